"""A Timer (alertd.core.timer) that moves only when the test advances it: sleepers wake in the order they are
due, each given a few turns of the event loop to run before the next."""
from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import datetime, timedelta, timezone


class ManualTimer:
    def __init__(self, start: float = 1000.0) -> None:
        self._start = self._now = start
        self._wall = datetime.now(timezone.utc)
        self._order = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> datetime:
        """The wall clock moving with this timer (for code that stamps datetimes)."""
        return self._wall + timedelta(seconds=self._now - self._start)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), fut))
        await fut

    @property
    def sleeping(self) -> int:
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    async def advance(self, seconds: float) -> None:
        until = self._now + seconds
        while self._sleepers and self._sleepers[0][0] <= until:
            due, _, fut = heapq.heappop(self._sleepers)
            self._now = max(self._now, due)
            if not fut.done():
                fut.set_result(None)
            await _turns()
        self._now = until
        await _turns()


async def _turns(n: int = 10) -> None:
    for _ in range(n):
        await asyncio.sleep(0)
