"""How a ``serve --receivers N`` group's engine process tells its receivers whether to answer /readyz 503."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

from alertd.app import receiver_group as group
from alertd.app.receiver_group import HealthReport, engine_failure
from testkit.notify_harness import wait_for


def test_a_failure_reported_by_the_engine_process_makes_the_receivers_unready(tmp_path: Path) -> None:
    path = tmp_path / "engine-health"
    failure = ""
    report = HealthReport(path, lambda: failure)
    report.write()
    assert engine_failure(str(path)) == ""
    failure = "store failing: OperationalError: disk I/O error"
    report.write()
    assert engine_failure(str(path)) == "engine process: store failing: OperationalError: disk I/O error"
    assert not path.with_name("engine-health.new").exists()


def test_a_report_that_stopped_coming_is_a_stalled_engine_process(tmp_path: Path) -> None:
    path = tmp_path / "engine-health"
    HealthReport(path, lambda: "").write()
    old = time.time() - 30
    os.utime(path, (old, old))
    assert engine_failure(str(path)) == "engine process has not reported for 30s: stalled or stopped"
    assert engine_failure(str(path), stale_after=60) == ""


def test_no_report_at_all_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "engine-health"
    assert engine_failure(str(missing)).startswith(f"engine process health not readable at {missing}: ")


def test_a_report_that_cannot_be_written_is_logged_once_not_raised(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="alertd.app.receiver_group")
    report = HealthReport(tmp_path / "gone" / "engine-health", lambda: "")
    for _ in range(3):
        report.write()
    assert caplog.text.count("could not report the engine's health") == 1
    (tmp_path / "gone").mkdir()
    report.write()
    assert "reaches the receivers again" in caplog.text and engine_failure(str(report.path)) == ""


async def test_a_change_is_reported_at_once_and_no_change_every_second(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(group, "HEALTH_POLL", 0.01)
    monkeypatch.setattr(group, "HEALTH_EVERY", 3600.0)
    path = tmp_path / "engine-health"
    state = {"failure": ""}
    report = HealthReport(path, lambda: state["failure"])
    report.write()
    task = asyncio.get_running_loop().create_task(report.run())
    try:
        state["failure"] = "store failing: boom"  # reported long before HEALTH_EVERY
        await wait_for(lambda: engine_failure(path) == "engine process: store failing: boom", 3, 0.01)
        state["failure"] = ""
        await wait_for(lambda: engine_failure(path) == "", 3, 0.01)
        written = path.stat().st_mtime_ns
        monkeypatch.setattr(group, "HEALTH_EVERY", 0.05)  # nothing changes: the report is still refreshed
        await wait_for(lambda: path.stat().st_mtime_ns != written, 3, 0.01)
    finally:
        task.cancel()
