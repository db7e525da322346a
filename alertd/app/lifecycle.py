"""Parts started in order and stopped in reverse, after Alertmanager's cmd/alertmanager (its onStop stack).

A part is anything with ``start()`` and ``stop()``. ``Lifecycle.start`` starts the parts one after the other
and pushes each onto a stop stack once it has started; ``Lifecycle.stop`` pops the stack, so a part stops
only after everything started after it (the web server before the engine, the engine before the store).
A part whose start fails is not on the stack: what started before it is stopped, in reverse, and the
error goes to the caller. A part whose stop fails is logged and the ones below it still stop.
"""
from __future__ import annotations

import asyncio
import logging
import signal
from typing import AsyncIterator, Awaitable, Callable, Iterable, Protocol, Sequence

log = logging.getLogger(__name__)


class Part(Protocol):
    """One piece of the running service (the store, the engine's leadership, the web server, ...)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def name_of(part: object) -> str:
    return str(getattr(part, "name", "") or type(part).__name__)


class Lifecycle:
    """A stop stack: parts started in order, stopped in reverse; one lifecycle runs once at a time."""

    def __init__(self, parts: Iterable[Part] = ()):
        self.parts: list[Part] = list(parts)
        self._started: list[Part] = []

    @property
    def started(self) -> list[Part]:
        """The parts running now, in the order they started."""
        return list(self._started)

    async def start(self) -> None:
        for part in self.parts:
            try:
                await part.start()
            except BaseException:
                log.debug("starting %s failed; stopping the %d parts started before it", name_of(part),
                          len(self._started))
                await self.stop()
                raise
            self._started.append(part)

    async def stop(self) -> None:
        while self._started:
            part = self._started.pop()
            try:
                await part.stop()
            except Exception:  # the parts below it still stop (the store closes after a failed drain)
                log.exception("stopping %s failed", name_of(part))


class Task:
    """A part that runs one coroutine as a task (a loop) while it is started; stopping cancels it."""

    def __init__(self, name: str, run: Callable[[], Awaitable[None]]):
        self.name, self._run = name, run
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._wrap(), name=self.name)

    async def _wrap(self) -> None:
        await self._run()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class Hooks:
    """A part made of two functions, for steps that are one call each (open a store, close a client)."""

    def __init__(self, name: str, start: Callable[[], Awaitable[None]] | None = None,
                 stop: Callable[[], Awaitable[None]] | None = None):
        self.name, self._start, self._stop = name, start, stop

    async def start(self) -> None:
        if self._start is not None:
            await self._start()

    async def stop(self) -> None:
        if self._stop is not None:
            await self._stop()


class App:
    """The running service: its parts started in order, then running until SIGTERM or SIGINT (or ``stop``
    set), then stopped in reverse. A part that fails to start stops the ones before it and the error
    reaches the caller (``alertd serve`` turns it into one line)."""

    def __init__(self, parts: Iterable[Part], *, signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)):
        self.lifecycle = Lifecycle(parts)
        self.signals = tuple(signals)

    def run(self) -> None:
        asyncio.run(self.serve())

    async def serve(self, stop: asyncio.Event | None = None) -> None:
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in self.signals:
            loop.add_signal_handler(signum, stop.set)
        try:
            await self.lifecycle.start()
            log.debug("started: %s", ", ".join(name_of(p) for p in self.lifecycle.started))
            await stop.wait()
        finally:
            for signum in self.signals:
                loop.remove_signal_handler(signum)
            await self.lifecycle.stop()


def cleanup_ctx(part: Part) -> Callable[[object], AsyncIterator[None]]:
    """The part as an aiohttp cleanup context: started with an application, stopped at its cleanup (for a
    web application served on its own, as the tests and benchmarks do)."""

    async def context(_: object) -> AsyncIterator[None]:
        await part.start()
        yield
        await part.stop()

    return context


__all__ = ["App", "Hooks", "Lifecycle", "Part", "Task", "cleanup_ctx", "name_of"]
