"""The engine lease: which process may run the engine, decided from one stored row.

Pure logic (row in, decision out, the time passed in). The store runs it inside
the transaction that reads the row with a lock, using the database's clock, so
replicas with skewed clocks still agree. The token grows by one at every change
of holder: it is the fencing token every engine write is checked against.
"""
from __future__ import annotations

from dataclasses import dataclass

from alertd.store.base import StoreUnavailable

ENGINE = "engine"


@dataclass(frozen=True, slots=True)
class LeaseRow:
    holder: str
    token: int
    expires_at: float  # seconds since the epoch, database clock
    address: str = ""


@dataclass(frozen=True, slots=True)
class LeaseVerdict:
    action: str  # "create", "renew", "take" or "wait"
    token: int  # the token we hold after the decision (0 when waiting)
    expires_at: float = 0.0


def judge_lease(row: LeaseRow | None, me: str, my_token: int, now: float, ttl: float) -> LeaseVerdict:
    """What ``me`` (holding ``my_token``, 0 if none) may do with the lease at ``now``."""
    if row is None:
        return LeaseVerdict("create", 1, now + ttl)
    if row.holder == me and row.token == my_token and my_token:
        return LeaseVerdict("renew", my_token, now + ttl)
    if row.expires_at <= now:
        return LeaseVerdict("take", row.token + 1, now + ttl)
    return LeaseVerdict("wait", 0)


class Fenced(StoreUnavailable):
    """A write by a process that no longer holds the engine lease (a deposed leader): refused."""
