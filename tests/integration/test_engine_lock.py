"""One engine per SQLite data directory: a second `alertd serve` on it refuses to start in one line naming
the directory and the holder's pid; kill -9 of the holder frees the lock at once; receiver processes share
the directory without the lock. Real processes, real flock()."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from alertd.ha import engine_lock
from testkit.alertd_proc import AlertdProcess, one_line, serve_once
from testkit.process import http


def test_second_engine_on_one_data_dir_is_refused_until_the_first_is_killed(tmp_path: Path) -> None:
    first = AlertdProcess(tmp_path / "a", {"log": {"level": "warning"}}).start()
    try:
        line = one_line(serve_once(first.data_dir))
        assert f"data directory {first.data_dir}" in line, line
        assert f"pid {first.pid} " in line and f"{first.db_path}-engine" in line, line
        assert (first.data_dir / "alertd.sqlite3-engine").read_text().startswith(f"pid {first.pid} ")
        assert first.alive() and http("GET", first.url + "/readyz", timeout=5)[0] == 200  # untouched

        first.kill9()  # the kernel drops the flock with the process: no stale lock, no waiting
        started = time.monotonic()
        first.start()
        assert time.monotonic() - started < 15
        assert (first.data_dir / "alertd.sqlite3-engine").read_text().startswith(f"pid {first.pid} ")
        assert one_line(serve_once(first.data_dir)).count(f"pid {first.pid} ") == 1
    finally:
        first.kill9()


def test_receiver_processes_share_the_data_dir_without_the_lock(tmp_path: Path) -> None:
    engine = AlertdProcess(tmp_path / "engine", {"log": {"level": "warning"}}).start()
    receiver = AlertdProcess(tmp_path / "receiver", {"log": {"level": "warning"}}, serve_args=["--role", "receiver"])
    receiver.data_dir = engine.data_dir
    try:
        receiver.start()
        status, headers, _ = http("GET", receiver.url + "/readyz", timeout=5)
        assert status == 200 and headers.get("X-Alertd-Role") == "receiver"
        assert (engine.data_dir / "alertd.sqlite3-engine").read_text().startswith(f"pid {engine.pid} ")
    finally:
        receiver.kill9()
        engine.kill9()


def test_lock_names_the_holder_and_is_free_after_release(tmp_path: Path) -> None:
    db = tmp_path / "alertd.sqlite3"
    held = engine_lock.acquire(db, tmp_path)
    try:
        with pytest.raises(engine_lock.EngineLocked) as refused:  # a second open file description conflicts
            engine_lock.acquire(db, tmp_path)
        assert f"data directory {tmp_path} (pid {os.getpid()} host " in str(refused.value)
    finally:
        held.release()
    engine_lock.acquire(db, tmp_path).release()


def test_holder_that_has_not_written_its_pid_yet_is_still_refused(tmp_path: Path) -> None:
    import fcntl

    db = tmp_path / "alertd.sqlite3"
    fd = os.open(engine_lock.lock_path(db), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(engine_lock.EngineLocked, match="pid is not recorded"):
            engine_lock.acquire(db, tmp_path)
    finally:
        os.close(fd)
