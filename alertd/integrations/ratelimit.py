"""Spacing of sends per key (a Slack channel, a webhook endpoint), shared by the outbox's rate-limit stage."""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Hashable


class RateLimiter:
    """Per-key spacing (GCRA with a burst) plus pauses from 429 answers.

    ``slot`` hands out the next free time in order (a reservation). A caller
    that would wait long gives its item back to the outbox with that delay and
    keeps the reservation under ``token``, so a busy channel does not hold up
    deliveries to other channels, and the item keeps its place when it returns.

    ``at_wire`` is called by the integration right before the request goes out:
    between a slot and the wire there is work (a store read, a write-ahead write)
    whose time varies, so the spacing the API sees is kept there, from the times
    sends really went.
    """

    def __init__(self, rate: float, burst: int = 1, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.burst = max(1, burst)
        self.clock, self.sleep = clock, sleep  # injected together: a test's clock moves when it sleeps
        self._tat: dict[Hashable, float] = {}
        self._paused: dict[Hashable, float] = {}
        self._held: dict[Hashable, tuple[Hashable, float]] = {}  # token -> (key, reserved slot)
        self._sent: dict[Hashable, list[float]] = {}  # key -> times of the last ``burst`` sends

    def pause(self, key: Hashable, seconds: float) -> None:
        until = self.clock() + seconds
        self._paused[key] = max(self._paused.get(key, 0.0), until)
        self._tat[key] = max(self._tat.get(key, 0.0), until)  # reservations made later start after it

    def paused_for(self, key: Hashable) -> float:
        return max(0.0, self._paused.get(key, 0.0) - self.clock())

    def slot(self, key: Hashable, token: Hashable = None) -> float:
        """The time this send may go (reserved now, or earlier under ``token``)."""
        now = self.clock()
        held = self._held.pop(token, None) if token is not None else None
        if held is not None and held[0] == key:
            slot = held[1]
        else:
            tat = max(self._tat.get(key, now), now)
            slot = max(now, tat - (self.burst - 1) * self.interval)
            self._tat[key] = max(tat, slot) + self.interval
        sent = self._sent.get(key, [])
        if len(sent) >= self.burst:  # never closer than the rate to what was really sent
            slot = max(slot, sent[-self.burst] + self.interval * self.burst)
        return max(slot, self._paused.get(key, 0.0))

    def hold(self, token: Hashable, key: Hashable, slot: float) -> None:
        self._held[token] = (key, slot)
        if len(self._held) > 100_000:  # tokens of items that never came back (given up, other process)
            self._held.pop(next(iter(self._held)))

    async def acquire(self, key: Hashable) -> None:
        await self.wait_until(key, self.slot(key))

    async def wait_until(self, key: Hashable, slot: float) -> None:
        """Sleep until ``slot``, or the end of a pause that came meanwhile."""
        while (wait := max(slot, self._paused.get(key, 0.0)) - self.clock()) > 0:
            await self.sleep(wait)

    async def at_wire(self, key: Hashable) -> None:
        """Sleep until a send may leave now (the rate from the last ``burst`` sends, any pause), and count it."""
        sent = self._sent.setdefault(key, [])
        while True:
            earliest = sent[-self.burst] + self.interval * self.burst if len(sent) >= self.burst else 0.0
            wait = max(earliest, self._paused.get(key, 0.0)) - self.clock()
            if wait <= 0:
                sent.append(self.clock())
                del sent[:-self.burst]
                return
            await self.sleep(wait)
