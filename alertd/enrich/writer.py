"""Writes what enrichment found back to its incidents, off the enrichment jobs' path.

A result only marks its incident dirty; one background task turns each dirty
incident's state into annotation values and writes those that changed,
together with any queued Xid upgrade, in one engine step (``Service.enrich``):
nobody reads an upgrade without its log lines, and a pass is one update to the
notifiers. After a wake-up it waits ``write_delay`` so a burst of results for
one incident becomes one pass; an incident of thousands of nodes (a storm's fleet),
whose values are read over all of them, is written at most once per
``write_delay`` x nodes / ``PACE_NODES``. Notifications never wait for this: what
enrichment writes is a later change that notifiers see as an update.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any, Callable, Coroutine

from alertd.core.json_types import JSONValue
from alertd.enrich.annotations import IncidentState
from alertd.enrich.host import EnrichHost
from alertd.enrich.logs import describe_error

log = logging.getLogger(__name__)

EVENT_KIND = "enrichment"
PACE_NODES = 1000  # an incident of more nodes than this is written less often than write_delay
SOURCE = "kernel log"


class AnnotationWriter:
    """Coalesces dirty incidents and writes their annotations through the service.

    ``states`` is the enricher's per-incident state (shared, not copied);
    ``values`` computes an incident's annotation values from it; ``service``,
    ``delay`` and ``closed`` are asked on every use, so the writer follows the
    enricher's bind, its settings and its shutdown; ``later`` schedules a retry;
    ``counts`` gets ``writes`` and ``upgrades``."""

    def __init__(self, states: dict[str, IncidentState], values: Callable[[str], dict[str, tuple[JSONValue, str]]], *,
                 service: Callable[[], EnrichHost | None], delay: Callable[[], float], closed: Callable[[], bool],
                 later: Callable[[float, Callable[[], Coroutine[Any, Any, None]]], None], counts: dict[str, int]):
        self._service = service
        self._states = states
        self._values = values
        self._delay = delay
        self._closed = closed
        self._later = later
        self._counts = counts
        self._dirty: dict[str, None] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._writing = False
        self._force: set[str] = set()
        self._due: dict[str, float] = {}  # incident -> when its pace allows its next write (large fleets)

    @property
    def idle(self) -> bool:
        return not self._dirty and not self._writing

    def mark_dirty(self, incident_id: str) -> asyncio.Future[None] | None:
        """Queue a write of the incident; the future resolves once it was written (None: nothing to write)."""
        state = self._states.get(incident_id)
        if state is None or self._closed() or self._service() is None:
            return None
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        state.waiters.append(fut)
        self._dirty[incident_id] = None
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._write_loop(), name="alertd-enrich-writer")
        assert self._wake is not None
        self._wake.set()
        return fut

    def forget(self, incident_id: str, state: IncidentState | None) -> None:
        """The incident was resolved: drop its pending write and release whoever waits for it."""
        self._dirty.pop(incident_id, None)
        self._due.pop(incident_id, None)
        if state is not None:
            for fut in state.waiters:
                if not fut.done():
                    fut.set_result(None)

    async def close(self) -> None:
        """Let a write in progress finish (2s at most), then cancel whatever still waits."""
        if self._task is not None:
            if self._wake is not None:
                self._wake.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 2)
            except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        for state in self._states.values():
            for fut in state.waiters:
                if not fut.done():
                    fut.cancel()

    async def _write_loop(self) -> None:
        assert self._wake is not None
        while not self._closed() or self._dirty:
            await self._wake.wait()
            self._wake.clear()
            delay = self._delay()
            if delay > 0 and not self._closed():
                await asyncio.sleep(delay)
            while self._dirty:
                incident_id = self._next_due()
                if incident_id is None:  # only large fleets written lately are dirty: wait for the first, or news
                    self._wake.clear()
                    wait = min(self._due.get(i, 0.0) for i in self._dirty) - time.monotonic()
                    try:
                        await asyncio.wait_for(self._wake.wait(), max(0.0, wait))
                    except asyncio.TimeoutError:
                        pass
                    continue
                del self._dirty[incident_id]
                self._writing = True
                try:
                    await self._flush(incident_id)
                except Exception as exc:  # e.g. the store is failing: try again shortly
                    log.warning("could not write enrichment for %s, retrying: %s", incident_id, describe_error(exc))
                    self._later(2.0, functools.partial(self._rewrite, incident_id))
                finally:
                    self._writing = False
            if self._closed():
                return

    def _next_due(self) -> str | None:
        """The first dirty incident whose pace allows a write now (all of them once closing)."""
        now = time.monotonic()
        return next((i for i in self._dirty if self._closed() or self._due.get(i, 0.0) <= now), None)

    def _paced(self, incident_id: str, state: IncidentState) -> None:
        """A write reads all of an incident's nodes: a fleet of n nodes is written at most once per
        ``delay`` x n / PACE_NODES, so a storm's results cost the same per node however many nodes it has."""
        pace = self._delay() * len(state.nodes) / PACE_NODES
        if pace > self._delay():
            self._due[incident_id] = time.monotonic() + pace
        else:
            self._due.pop(incident_id, None)

    async def _rewrite(self, incident_id: str) -> None:
        # After a failed commit the engine's memory may hold values the store lost: write them all again.
        self._force.add(incident_id)
        self.mark_dirty(incident_id)

    async def _flush(self, incident_id: str) -> None:
        state = self._states.get(incident_id)
        if state is None:
            return
        waiters, state.waiters = state.waiters, []
        self._paced(incident_id, state)
        force = incident_id in self._force
        self._force.discard(incident_id)
        try:
            svc = self._service()
            if svc is None:  # not bound (yet): nothing to write through
                return
            inc = svc.open_incident(incident_id)
            if inc is None:
                return
            annotations = {key: (value, text) for key, (value, text) in self._values(incident_id).items()
                           if (force or value != inc.annotations.get(key)) and (value is not None or key in inc.annotations)}
            signals = list(state.signals)
            if not annotations and not signals:
                return
            changes = await svc.enrich(incident_id, annotations, signals, SOURCE)
            del state.signals[:len(signals)]
            self._counts["writes"] += len(annotations)
            self._counts["upgrades"] += sum(e.kind != EVENT_KIND for c in changes for e in c.events)
        finally:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)


__all__ = ["AnnotationWriter", "EVENT_KIND", "SOURCE"]
