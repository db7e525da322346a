"""Delivers stored notifications: retries with exponential backoff, in order per incident and target.

Each due item runs through the shared stages (alertd.notify.stages: coalesce,
gate, rate limit, deliver, record); a round of deliveries is marked done in
one commit. The schedule lives in the store (due_at, attempts), not in memory,
so pending work survives restarts; in-process retry libraries cannot give that.
"""
from __future__ import annotations

import asyncio
import logging
import random
from datetime import datetime, timedelta
from typing import Callable

from alertd.core.outbox_items import OutboxItem
from alertd.core.service_metrics import Metrics
from alertd.integrations.base import DeliveryError, Notifier, NotifyStore
from alertd.notify.stages import Delivery, finished, pipeline, run
from alertd.store.base import StoreUnavailable

log = logging.getLogger(__name__)
ROUND_LINGER = 0.01  # seconds between a wake-up and the delivery round it starts


def backoff(attempts: int, base: float = 1.0, cap: float = 300.0) -> float:
    """Full-jitter exponential backoff, in seconds."""
    return random.uniform(base, min(cap, base * 2 ** attempts))


class OutboxWorker:
    def __init__(self, store: NotifyStore, notifiers: dict[str, Notifier], metrics: Metrics, clock: Callable[[], datetime], *,
                 poll: float = 0.5, max_attempts: int = 15, max_backoff: float = 300.0, concurrency: int = 16):
        self.store, self.notifiers, self.metrics, self.clock = store, notifiers, metrics, clock
        metrics.expect_deliveries(notifiers)
        self.poll, self.max_attempts, self.max_backoff = poll, max_attempts, max_backoff
        self.stages = pipeline(store)
        self._wake = asyncio.Event()
        self._limit = asyncio.Semaphore(concurrency)
        self._stopping = False

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    @property
    def stopped(self) -> bool:
        """Stopped for good: a stopped worker does not run again (a new one is made)."""
        return self._stopping

    async def run(self) -> None:
        while not self._stopping:
            try:
                items = await self.store.due_outbox(self.clock(), 200)
            except StoreUnavailable:
                log.warning("outbox: store unavailable, retrying")
                items = []
            if self._stopping:  # a stop lets a round in flight finish, but starts none
                return
            if items:
                await self._round(items)
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.poll)
            except asyncio.TimeoutError:
                continue
            await asyncio.sleep(ROUND_LINGER)  # gather the work of a few engine steps into one round

    async def drain(self, timeout: float = 5.0) -> None:
        """Deliver what is due now (used on shutdown and by tests)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            items = await self.store.due_outbox(self.clock(), 200)
            if not items:
                return
            await self._round(items)

    async def _round(self, items: list[OutboxItem]) -> None:
        """Deliver a round concurrently, then mark every success done in one commit."""
        results = await asyncio.gather(*(self._deliver(item) for item in items))
        done = [row for rows in results for row in rows]
        try:
            await self.store.finish_outbox_batch(done)
        except StoreUnavailable:  # delivered but not marked: delivered again later (notifiers are idempotent)
            log.warning("outbox: could not mark %d deliveries done; they will be retried", len(done))

    async def _deliver(self, item: OutboxItem) -> list[tuple[int, tuple[str, str, str] | None]]:
        """Run one item through the stages; the rows to mark done (none when it failed)."""
        kind = item.target.kind
        notifier = self.notifiers.get(kind)
        async with self._limit:
            if notifier is None:
                await self.store.retry_outbox(item.id, self.clock(), f"no notifier for target {item.target!r}", give_up=True)
                self.metrics.notifications.labels(kind, "no_notifier").inc()
                return []
            if item.unreadable:  # stored in a shape its intent does not have: nothing to deliver, ever
                await self._failed(item, kind, item.unreadable, False, None)
                return []
            try:
                d = await run(self.stages, Delivery(item, notifier))
            except DeliveryError as exc:
                await self._failed(item, kind, str(exc), exc.retry, exc.after)
                return []
            except Exception as exc:  # a notifier bug must not kill the worker
                log.exception("notifier %s crashed on outbox item %s", kind, item.id)
                await self._failed(item, kind, f"{type(exc).__name__}: {exc}", True, None)
                return []
            self.metrics.notifications.labels(kind, "skipped" if d.skipped else "delivered").inc()
            return finished(d)

    async def _failed(self, item: OutboxItem, kind: str, error: str, retry: bool, after: float | None) -> None:
        give_up = not retry or item.attempts + 1 >= self.max_attempts
        delay = after if after is not None else backoff(item.attempts, cap=self.max_backoff)
        await self.store.retry_outbox(item.id, self.clock() + timedelta(seconds=delay), error, give_up=give_up)
        self.metrics.notifications.labels(kind, "failed" if give_up else "retry").inc()
        log.warning("delivery to %s for %s %s: %s", item.target, item.incident_id,
                    "failed for good" if give_up else f"will retry in {delay:.1f}s", error)
