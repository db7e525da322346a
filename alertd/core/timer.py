"""The clock that waiting code reads and sleeps on, injected like the engine's clock: production passes
nothing and gets the event loop's sleep and the monotonic clock; a test passes a timer it advances by hand,
so a retry due in two seconds runs when the test says two seconds have passed, not after a real wait."""
from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Timer(Protocol):
    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealTimer:
    """time.monotonic and asyncio.sleep."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


REAL_TIMER = RealTimer()
