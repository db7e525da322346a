"""Keeps (or waits for) the engine lease and tells the service when it becomes or stops being leader.

Timing: the lease lasts ``ttl``; the holder renews every ``renew_every``. A
leader that could not renew for ``ttl / 2`` steps down by itself (stops its
engine and outbox) well before another replica may take over at ``ttl``; the
fencing token refuses whatever write was still in flight. A follower tries every
``renew_every``, so after a leader's death (kill -9, partition) takeover comes
within ``ttl + renew_every``. Each round is bounded by the leader's step-down time: a store call
that hangs on a dead link does not keep a cut-off leader running.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from typing import Awaitable, Callable, Protocol

log = logging.getLogger(__name__)
STEP_DOWN_SLACK = 0.01  # seconds: a deadline this close counts as reached


def replica_name() -> str:
    """Unique per process: the pod name (HOSTNAME in Kubernetes) plus a random suffix."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class LeaseDecision(Protocol):
    """What one lease round decided (alertd/store/lease.py): the action taken and the token now held (0: none)."""

    @property
    def action(self) -> str: ...

    @property
    def token(self) -> int: ...


class LeaseHolder(Protocol):
    """The lease row as seen in that round: who holds it, and where it answers."""

    @property
    def holder(self) -> str: ...

    @property
    def address(self) -> str: ...


class LeaseStore(Protocol):
    """The store's engine lease (alertd/store/coordination.py), decided on the database's clock."""

    async def acquire_lease(self, holder: str, address: str, ttl: float,
                            token: int) -> tuple[LeaseDecision, LeaseHolder | None]: ...

    async def release_lease(self, holder: str, token: int) -> None: ...


class Elector:
    def __init__(self, store: LeaseStore, *, holder: str, address: str, ttl: float, renew_every: float,
                 on_elected: Callable[[int], Awaitable[None]], on_deposed: Callable[[str], Awaitable[None]]):
        self.store, self.holder, self.address = store, holder, address
        self.ttl, self.renew_every = ttl, renew_every
        self.on_elected, self.on_deposed = on_elected, on_deposed
        self.token = 0
        self.leader_address = ""
        self.leader_holder = ""
        self._renewed_at = 0.0
        self._stopping = False

    @property
    def leading(self) -> bool:
        return self.token != 0

    async def run(self) -> None:
        while not self._stopping:
            await self.round()
            await asyncio.sleep(self.renew_every)

    async def round(self) -> None:
        try:
            # Bounded: a store call can hang on a dead link (a partition, a middlebox whose upstream is
            # gone) long after TCP or the database would notice, and a leader must step down on time.
            decision, row = await asyncio.wait_for(
                self.store.acquire_lease(self.holder, self.address, self.ttl, self.token), self._round_deadline())
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            why = "no answer in time" if isinstance(exc, TimeoutError) else str(exc)
            if self.leading and time.monotonic() >= self._renewed_at + self.ttl / 2 - STEP_DOWN_SLACK:
                await self._step_down(f"could not renew the engine lease for {self.ttl / 2:.1f}s: {why}")
            else:
                log.warning("engine lease round failed: %s", why)
            return
        if decision.token:
            self._renewed_at = time.monotonic()
            self.leader_holder, self.leader_address = self.holder, self.address
            if not self.leading:
                self.token = decision.token
                log.info("elected engine leader (%s, fencing token %d)", decision.action, decision.token)
                try:
                    await self.on_elected(decision.token)
                except Exception:
                    log.exception("could not start the engine after election; giving the lease up")
                    await self._step_down("engine start failed")
                    await self._release(decision.token)
            return
        if row is not None:
            self.leader_holder, self.leader_address = row.holder, row.address
        if self.leading:
            await self._step_down(f"the engine lease is held by {row.holder if row else '?'}")

    def _round_deadline(self) -> float | None:
        """A leader waits for a renewal until its step-down time (ttl / 2 after the last one). A follower
        waits as long as it takes: it runs nothing meanwhile, and a round given up while the store still
        runs it could take the lease without this process knowing."""
        if not self.leading:
            return None
        return max(STEP_DOWN_SLACK, self._renewed_at + self.ttl / 2 - time.monotonic())

    async def _step_down(self, why: str) -> None:
        token, self.token = self.token, 0
        log.warning("stepping down as engine leader (token %d): %s", token, why)
        await self.on_deposed(why)

    async def _release(self, token: int) -> None:
        try:
            await asyncio.wait_for(self.store.release_lease(self.holder, token), self.ttl)  # cut off: it expires anyway
        except Exception as exc:
            log.warning("could not release the engine lease: %s", exc)

    async def stop(self) -> None:
        """On a clean shutdown the lease is released so a follower takes over at its next round."""
        self._stopping = True
        if self.leading:
            token, self.token = self.token, 0
            await self._release(token)
