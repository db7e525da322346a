"""The App's lifecycle: parts start in order, stop in reverse, and a part that fails to start stops the ones
that started before it (alertd/app/lifecycle.py)."""
from __future__ import annotations

import asyncio
import signal

import pytest

from alertd.app.lifecycle import App, Hooks, Lifecycle, Task


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
