"""Leadership: when this process runs the engine, and what runs only while it does.

Roles: ``engine`` always runs the engine (one process, the default); ``replica`` receives and runs the
engine only while it holds the engine lease (several replicas on PostgreSQL); ``receiver`` only receives
(``serve --receivers N``). On becoming the leader the engine state and router memory are restored from
the store and the leader's parts start in order (processor, ticker, outbox, housekeeping, reconciler);
on losing the lease they stop at once, in reverse (a deposed leader must stop sending). Stopping the
service drains first: what was acknowledged goes through the engine, what is due is delivered.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Iterable, Protocol

from alertd.app.lifecycle import Lifecycle, Part
from alertd.app.processor import Processor
from alertd.config.settings import Config
from alertd.core.model import Incident
from alertd.engine.pipeline import Engine
from alertd.enrich.node_index import NodeIndex
from alertd.ha.elector import Elector, replica_name
from alertd.store.facade import SqlStore

log = logging.getLogger(__name__)
DRAIN_SECONDS = 10.0  # at most this long taking what was acknowledged through the engine at shutdown
DELIVER_SECONDS = 5.0  # then at most this long delivering what is due


class Resumes(Protocol):
    """Enrichment as leadership sees it: resumed for the open incidents on becoming the leader."""

    def resume(self, incidents: Iterable[Incident]) -> int: ...

    async def close(self) -> None: ...


class Leadership:
    name = "leadership"

    def __init__(self, cfg: Config, store: SqlStore, processor: Processor, *, role: str, parts: list[Part],
                 nodes: NodeIndex | None = None, enricher: Resumes | None = None, holder: str = ""):
        self.cfg, self.store, self.processor, self.role = cfg, store, processor, role
        self.holder = holder or replica_name()  # this process's name in the engine lease
        self.nodes, self.enricher = nodes, enricher
        self._leader = Lifecycle(parts)
        self.elector: Elector | None = None
        self._elector_task: asyncio.Task[None] | None = None
        self.metrics = processor.metrics

    @property
    def leading(self) -> bool:
        return self.processor.engine is not None

    async def start(self) -> None:
        if self.role == "engine":
            await self.lead(0)
        elif self.role == "replica":
            ha = self.cfg.ha
            self.elector = Elector(self.store, holder=self.holder, address=ha.advertise or self.cfg.listen,
                                   ttl=ha.lease_ttl, renew_every=ha.renew_interval,
                                   on_elected=self.lead, on_deposed=self.follow)
            await self.elector.round()  # lead at once when the lease is free
            self._elector_task = asyncio.get_running_loop().create_task(self.elector.run(), name="alertd-elector")

    async def lead(self, token: int) -> None:
        """Become the engine: fence every engine write, restore the state, start the engine's loops."""
        if token:
            self.store.set_fence(self.elector.holder if self.elector else None, token)
        state = await self.store.load_state()
        self.processor.take_engine(Engine(self.processor.rules, self.cfg.normalize, state, nodes=self.nodes,
                                            topology=self.nodes))
        self.processor.router.restore(await self.store.load_router_memory())
        self.processor.update_gauges()
        await self._leader.start()
        if self.enricher is not None:
            self.enricher.resume(state.incidents.values())
        self.metrics.leader.set(1)
        log.info("engine running: %d open incidents restored", len(state.incidents))

    async def follow(self, why: str) -> None:
        """Stop the engine's loops at once (a deposed leader must stop sending); the store keeps the rest."""
        await self._leader.stop()
        self.processor.drop_engine()
        self.processor.health.step_ok()  # the failing engine is gone: a follower is ready (its /readyz must say so)
        self.metrics.leader.set(0)
        self.store.set_fence(None)
        log.warning("engine stopped on this replica: %s", why)

    async def stop(self) -> None:
        """Finish what was acknowledged (inbox -> engine), deliver what is due; then give the lease up."""
        self.processor.stopping()
        if self._elector_task is not None:
            self._elector_task.cancel()
            await asyncio.gather(self._elector_task, return_exceptions=True)
        await self._leader.stop()
        if self.enricher is not None:
            await self.enricher.close()
        if self.leading:
            await self._drain()
        if self.elector is not None:
            await self.elector.stop()

    async def _drain(self) -> None:
        try:
            deadline = time.monotonic() + DRAIN_SECONDS
            while await self.processor.process_pending() and time.monotonic() < deadline:
                pass
            await asyncio.wait_for(self.processor.outbox.worker.drain(), DELIVER_SECONDS)
        except Exception:  # shutting down: what is left stays in the store for the next start
            log.exception("could not finish pending work before shutdown")


__all__ = ["Leadership", "Resumes"]
