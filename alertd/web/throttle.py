"""Slowing down token guessing: token buckets of failed attempts, per client address and per token tried.

Every wrong or malformed token or password (on the API and the UI login, or on
the receiver, which has buckets of its own) takes one unit from the bucket of the
client's address and one from the bucket of the value tried (its SHA-256: the
value itself is never kept). A client whose bucket is empty gets 429 with
``Retry-After`` for wrong credentials; right ones are compared first and taken
(alertd/web/auth.py, which also spaces a client's 429s out). Buckets refill
steadily; a successful login takes nothing. The state is in memory, per process (a group of N
receiver processes allows N times the rate; still hours per million guesses, and
tokens have at least 16 characters). A few lines of arithmetic, so no library:
the well-known ones (``limits``) bring storage back-ends this does not need.
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Callable

MAX_KEYS = 50_000  # beyond this, full (idle) buckets are forgotten first


@dataclass(slots=True)
class Buckets:
    """``capacity`` attempts at once, then one every ``1 / rate`` seconds, per key."""

    capacity: float
    rate: float  # units per second
    clock: Callable[[], float] = time.monotonic
    _level: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (units left, when)

    def _now_level(self, key: str, now: float) -> float:
        left, when = self._level.get(key, (self.capacity, now))
        return min(self.capacity, left + (now - when) * self.rate)

    @property
    def idle(self) -> bool:
        """No key has taken anything lately (or all were forgotten): every bucket is full."""
        return not self._level

    def wait(self, key: str) -> float:
        """Seconds until ``key`` may try again (0: now)."""
        level = self._now_level(key, self.clock())
        return 0.0 if level >= 1 else (1 - level) / self.rate

    def take(self, key: str) -> None:
        now = self.clock()
        self._level[key] = (max(0.0, self._now_level(key, now) - 1), now)
        if len(self._level) > MAX_KEYS:
            self._forget(now)

    def _forget(self, now: float) -> None:
        full = [k for k in self._level if self._now_level(k, now) >= self.capacity]
        for key in full or sorted(self._level, key=lambda k: self._level[k][1])[: len(self._level) // 2]:
            del self._level[key]


@dataclass(slots=True)
class LoginThrottle:
    """Per client: 10 failures at once, then one every 6 s. Per value tried: 5, then one a minute."""

    clients: Buckets
    values: Buckets

    @classmethod
    def default(cls, clock: Callable[[], float] = time.monotonic) -> "LoginThrottle":
        return cls(Buckets(10, 1 / 6, clock), Buckets(5, 1 / 60, clock))

    def retry_after(self, client: str, value: str) -> int:
        """Whole seconds to wait before this client may try this value (0: go ahead)."""
        # The value's digest only when some value failed: the receiver asks this of every webhook.
        wait = max(self.clients.wait(client), self.values.wait(_digest(value)) if value and not self.values.idle else 0.0)
        return math.ceil(wait) if wait > 0 else 0

    def failed(self, client: str, value: str) -> None:
        self.clients.take(client)
        if value:
            self.values.take(_digest(value))


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode(errors="replace")).hexdigest()
