"""The App's lifecycle: parts start in order, stop in reverse, and a part that fails to start stops the ones
that started before it (alertd/app/lifecycle.py); the reloader runs every step and reports the first failure."""
from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from alertd.app.lifecycle import App, Hooks, Lifecycle, Task
from alertd.app.reload import Reloader


class Fake:
    """A part that writes what happens to it into a shared journal, and fails where told."""

    def __init__(self, name: str, journal: list[str], *, fail_start: bool = False, fail_stop: bool = False):
        self.name, self.journal = name, journal
        self.fail_start, self.fail_stop = fail_start, fail_stop

    async def start(self) -> None:
        self.journal.append(f"start {self.name}")
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")

    async def stop(self) -> None:
        self.journal.append(f"stop {self.name}")
        if self.fail_stop:
            raise RuntimeError(f"{self.name} cannot stop")


NAMES = ["store", "processor", "leadership", "receiver group", "reloader", "housekeeping", "web"]


async def test_parts_start_in_order_and_stop_in_reverse() -> None:
    journal: list[str] = []
    life = Lifecycle(Fake(n, journal) for n in NAMES)
    await life.start()
    assert [p.name for p in life.started] == NAMES  # type: ignore[attr-defined]
    await life.stop()
    assert journal == [f"start {n}" for n in NAMES] + [f"stop {n}" for n in reversed(NAMES)]
    assert life.started == []
    await life.stop()  # twice: nothing is stopped again
    assert len(journal) == 2 * len(NAMES)


async def test_a_part_that_fails_to_start_stops_what_started_before_it_and_nothing_else() -> None:
    journal: list[str] = []
    parts = [Fake("store", journal), Fake("processor", journal), Fake("web", journal, fail_start=True),
             Fake("never", journal)]
    with pytest.raises(RuntimeError, match="web cannot start"):
        await Lifecycle(parts).start()
    assert journal == ["start store", "start processor", "start web", "stop processor", "stop store"]


async def test_a_part_that_fails_to_stop_does_not_keep_the_ones_below_it_running(caplog) -> None:
    journal: list[str] = []
    life = Lifecycle([Fake("store", journal), Fake("leadership", journal, fail_stop=True), Fake("web", journal)])
    await life.start()
    await life.stop()
    assert journal[3:] == ["stop web", "stop leadership", "stop store"]
    assert "stopping leadership failed" in caplog.text


async def test_a_cancelled_start_stops_what_started() -> None:
    journal: list[str] = []
    gate = asyncio.Event()

    class Slow(Fake):
        async def start(self) -> None:
            await super().start()
            await gate.wait()

    life = Lifecycle([Fake("store", journal), Slow("leadership", journal)])
    task = asyncio.get_running_loop().create_task(life.start())
    while journal != ["start store", "start leadership"]:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert journal[-1] == "stop store" and life.started == []


async def test_a_task_part_runs_while_started_and_is_cancelled_on_stop() -> None:
    ticks: list[int] = []
    stopped = asyncio.Event()

    async def loop() -> None:
        try:
            while True:
                ticks.append(1)
                await asyncio.sleep(0)
        finally:
            stopped.set()

    part = Task("ticker", loop)
    await part.start()
    while len(ticks) < 3:
        await asyncio.sleep(0)
    assert part.running
    await part.stop()
    assert stopped.is_set() and not part.running
    await part.stop()  # stopping a stopped task is harmless


async def test_hooks_call_their_functions_and_may_have_one_only() -> None:
    journal: list[str] = []

    async def opened() -> None:
        journal.append("open")

    async def closed() -> None:
        journal.append("close")

    life = Lifecycle([Hooks("store", opened, closed), Hooks("ready-only", stop=closed), Hooks("nothing")])
    await life.start()
    await life.stop()
    assert journal == ["open", "close", "close"]


async def test_the_app_runs_until_told_to_stop_then_stops_in_reverse() -> None:
    journal: list[str] = []
    stop = asyncio.Event()
    app = App([Fake(n, journal) for n in NAMES], signals=())
    running = asyncio.get_running_loop().create_task(app.serve(stop))
    while len(journal) < len(NAMES):
        await asyncio.sleep(0)
    assert journal == [f"start {n}" for n in NAMES]
    stop.set()
    await running
    assert journal[len(NAMES):] == [f"stop {n}" for n in reversed(NAMES)]


async def test_the_app_stops_on_sigterm() -> None:
    journal: list[str] = []
    app = App([Fake("store", journal), Fake("web", journal)], signals=(signal.SIGUSR2,))
    running = asyncio.get_running_loop().create_task(app.serve())
    while len(journal) < 2:
        await asyncio.sleep(0)
    signal.raise_signal(signal.SIGUSR2)
    await asyncio.wait_for(running, 5)
    assert journal == ["start store", "start web", "stop web", "stop store"]


async def test_the_app_reports_a_failed_start_after_stopping_what_started() -> None:
    journal: list[str] = []
    app = App([Fake("store", journal), Fake("web", journal, fail_start=True)], signals=())
    with pytest.raises(RuntimeError, match="web cannot start"):
        await app.serve()
    assert journal == ["start store", "start web", "stop store"]


async def test_the_reloader_runs_every_step_and_reports_the_first_failure() -> None:
    ran: list[str] = []

    def step(name: str, ok: bool) -> object:
        def run() -> tuple[bool, str]:
            ran.append(name)
            return ok, "" if ok else f"{name} failed"
        return run

    reloader = Reloader([step("rules", True), step("credentials", False), step("certificate", False),  # type: ignore[list-item]
                         step("receivers", True)])
    assert await reloader() == (False, "credentials failed")
    assert ran == ["rules", "credentials", "certificate", "receivers"]
    assert Reloader([step("rules", True)]).reload() == (True, "")  # type: ignore[list-item]


async def test_sighup_reloads_and_records_it_in_the_audit_trail() -> None:
    audited: list[tuple[str, ...]] = []

    async def audit(*entry: str) -> None:
        audited.append(entry)

    reloader = Reloader([lambda: (False, "rules/x.yml:3: bad")], audit=audit, signum=signal.SIGUSR1)
    await reloader.start()
    try:
        signal.raise_signal(signal.SIGUSR1)
        for _ in range(100):
            if audited:
                break
            await asyncio.sleep(0.01)
    finally:
        await reloader.stop()
    assert audited == [("SIGHUP", "reload", "rules", "signal", "failed", "rules/x.yml:3: bad")]


def _service(tmp_path, role: str = "engine", **kw: object):  # type: ignore[no-untyped-def]
    from alertd.app.service import Service
    from alertd.config.settings import Config
    from alertd.rules.ruleset import load_rules
    from alertd.store.sqlite import SqliteStore
    rules = str(Path(__file__).resolve().parents[2] / "rules")
    cfg = Config(data_dir=tmp_path, rule_paths=[rules])
    return Service(cfg, SqliteStore(tmp_path / "a.sqlite3"), load_rules([rules]), role=role, **kw)


def test_the_service_names_its_parts_in_the_order_they_start(tmp_path) -> None:
    from alertd.app.lifecycle import name_of

    assert [name_of(p) for p in _service(tmp_path).parts] == [
        "store", "clients", "alertd-backlog", "background", "leadership", "ready"]
    # The engine of a receiver group takes no webhook, so it counts no backlog.
    assert "alertd-backlog" not in [name_of(p) for p in _service(tmp_path, shared_inbox=True).parts]


async def test_a_service_whose_engine_cannot_start_closes_its_store(tmp_path) -> None:
    svc = _service(tmp_path)

    async def broken() -> None:
        raise RuntimeError("state unreadable")

    closed: list[bool] = []
    close = svc.store.close

    async def closing() -> None:
        closed.append(True)
        await close()

    svc.store.load_state = broken  # type: ignore[method-assign]
    svc.store.close = closing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="state unreadable"):
        await svc.start()
    assert not svc.ready and not svc.leading and closed == [True]
