"""Housekeeping on the engine leader: retention and the gauges that need a store query.

Every minute the outbox backlog gauge (and the store's size where it is not measured at each scrape);
every five minutes, prune what retention lets go (inbox, outbox, resolved incidents).
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Awaitable, Callable, Protocol

from alertd.config.settings import Config
from alertd.core.service_metrics import Metrics

log = logging.getLogger(__name__)
EVERY = 60.0  # seconds between rounds
PRUNE_EVERY = 5  # rounds between prunes


class Retained(Protocol):
    """What housekeeping needs of the store: its retention part (alertd/store/retention.py) and its size."""

    async def prune(self, before: datetime, *, resolved_before: datetime | None = None) -> int: ...

    async def stats(self) -> dict[str, int]: ...

    async def size_bytes(self) -> int | None: ...


class Housekeeping:
    def __init__(self, cfg: Config, store: Retained, *, clock: Callable[[], datetime], metrics: Metrics,
                 failed: Callable[[str, Exception], None], measured_at_scrape: bool,
                 before_prune: Callable[[], Awaitable[object]] | None = None):
        self.cfg, self.store, self.clock, self.metrics, self._failed = cfg, store, clock, metrics, failed
        self.measured_at_scrape = measured_at_scrape  # the store's size (SQLite's stat() calls): not asked here
        self._before_prune = before_prune  # the report keeps what it needs of incidents before they go

    async def run(self) -> None:
        rounds = 0
        while True:
            try:
                await self.round(prune=rounds % PRUNE_EVERY == 0)
            except Exception as exc:
                self._failed("housekeeping", exc)
            rounds += 1
            await asyncio.sleep(EVERY)

    async def round(self, *, prune: bool) -> None:
        if prune:
            if self._before_prune is not None:
                await self._before_prune()
            now = self.clock()
            storage = self.cfg.storage
            keep = timedelta(seconds=storage.incident_retention)  # 0 keeps resolved incidents forever
            pruned = await self.store.prune(now - timedelta(seconds=storage.retention),
                                            resolved_before=now - keep if keep else None)
            if pruned:
                log.info("pruned %d old rows (inbox, outbox, resolved incidents)", pruned)
        self.metrics.outbox_pending.set((await self.store.stats()).get("outbox_pending", 0))
        if not self.measured_at_scrape and (size := await self.store.size_bytes()) is not None:
            self.metrics.store_bytes.set(size)
