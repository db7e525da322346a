"""Start-up failures say in one line which file is wrong and what to do (exit 2, no traceback), and a
full disk answers 503 then recovers. The read-only and full file systems are real: size-limited tmpfs
mounts (CI runs as root; elsewhere these tests are skipped, saying why)."""
from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from testkit.alertd_proc import AlertdProcess, one_line, serve_once as serve
from testkit.pipeline import wait
from testkit.process import http
from testkit.webhooks import UniqueWebhooks, dumps


def test_corrupt_database_names_the_file_and_how_to_move_it_aside(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "alertd.sqlite3").write_bytes(b"not a database, just some bytes " * 300)
    line = one_line(serve(data))
    db = data / "alertd.sqlite3"
    assert f"the database {db} is corrupt" in line and f"mv {db} {db}.corrupt" in line


def test_truncated_database_is_reported_as_corrupt(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db = data / "alertd.sqlite3"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
    conn.commit()
    conn.close()
    raw = db.read_bytes()
    db.write_bytes(raw[:100] + b"\0" * 4000 + raw[4100:])  # the schema page overwritten
    assert "is corrupt" in one_line(serve(data))


def test_a_damaged_data_page_names_the_file_and_the_ways_on(tmp_path):
    """The schema page is intact, so opening works; the damage is found when the engine reads its state.
    The line still names the file and what to do (restore, sqlite3 .recover, move aside): no traceback."""
    server = AlertdProcess(tmp_path, {"log": {"level": "warning"}})
    data = server.data_dir
    server.start()
    try:
        gen = UniqueWebhooks(run="damaged", distinct_nodes=True)
        for _ in range(150):
            assert server.post(dumps(gen.next()))[0] == 200
        server.wait_drained(30)
    finally:
        server.stop()
    db = data / "alertd.sqlite3"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'incidents' AND pagetype = 'leaf'")]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    assert len(pages) >= 3, pages
    with open(db, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size + 8)
            f.write(os.urandom(size - 8))
    done = serve(data)  # logs its start first: the failure comes once the engine reads the damaged pages
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("alertd: ")]
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert f"the database {db} is corrupt" in line, line
    assert f"sqlite3 {db} .recover" in line and "backup" in line and f"mv {db} {db}.corrupt" in line, line


@contextlib.contextmanager
def tmpfs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True, capture_output=True)


def test_read_only_data_directory_names_the_path(tmp_path):
    with tmpfs(tmp_path / "ro", "8m") as mnt:
        data = mnt / "data"
        data.mkdir()
        conn = sqlite3.connect(data / "alertd.sqlite3")
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
        conn.close()  # an open file keeps the remount from succeeding
        remount(mnt, "ro")
        line = one_line(serve(data))
        assert f"the data directory {data} is on a read-only file system" in line and "--data-dir" in line


def test_full_disk_answers_503_then_recovers(tmp_path):
    with tmpfs(tmp_path / "full", "3m") as mnt:
        server = AlertdProcess(mnt / "alertd", {"log": {"level": "warning"}})
        server.start()
        try:
            gen = UniqueWebhooks(run="full", distinct_nodes=True)
            statuses = []
            for _ in range(2000):  # bounded: 3 MB fills long before
                status, body, headers = server.post(dumps(gen.next()))
                statuses.append(status)
                if status == 503:
                    assert headers.get("Retry-After") and "retry" in body["error"], body
                    break
            assert statuses[-1] == 503 and set(statuses[:-1]) <= {200}, statuses[-5:]
            assert http("GET", server.url + "/readyz")[0] == 503
            assert server.alive() and http("GET", server.url + "/healthz")[0] == 200
            remount(mnt, "size=64m")  # space again, as when an operator grows the volume
            deadline = time.monotonic() + 30
            while True:
                status, _, _ = server.post(dumps(gen.next()))
                if status == 200:
                    break
                assert status == 503 and time.monotonic() < deadline, status
                time.sleep(0.5)
            server.wait_drained(30)
            # With receivers, the engine process's recovery reaches their /readyz within its next report.
            wait("/readyz 200 once the engine's steps commit again",
                 lambda: http("GET", server.url + "/readyz")[0] == 200, timeout=5, every=0.05)
            metrics = server.metrics()
            assert metrics['alertd_webhooks_rejected_total{reason="store_unavailable"}'] >= 1
        finally:
            server.stop()
