"""The reliability report's background work, on the engine's replica: fleet samples, facts, metrics, digest.

Every minute, each step only when it is due:

* the fleet's GPU nodes from the Kubernetes API (``report.sample_interval``, default 1h; the day's latest
  sample is the day's row);
* the report facts rolled up and the metrics snapshot (last 7 and 30 days) recomputed (every 5 minutes);
* the weekly digest (``report.digest``), claimed in the store so it is posted once across restarts and
  replicas.

``report`` config section: docs/reliability-report.md.
"""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timedelta
from typing import Any, Callable

from alertd.core.durations import parse_duration
from alertd.enrich.fleet_size import sample_fleet
from alertd.enrich.kube_api import KubeUnavailable
from alertd.ha.elector import replica_name
from alertd.report import digest
from alertd.report.build import reliability
from alertd.report.compute import Period
from alertd.report.metrics import WINDOWS, ReportCollector
from alertd.report.rollup import rollup

log = logging.getLogger(__name__)
ROUND = 60.0
REFRESH = timedelta(minutes=5)
ROLL_EVERY = 30.0  # seconds: reports asked for more often read the facts as they are (the rollup scans incidents)


class Reporting:
    """Owned by the service; ``run`` is one of the engine's loops, ``rollup`` runs before each prune."""

    def __init__(self, svc: Any, doc: dict[str, Any] | None, clock: Callable[[], datetime]):
        doc = doc or {}
        self.svc, self.clock = svc, clock
        self.sample_every = parse_duration(doc.get("sample_interval", "1h"))
        self.digest = digest.DigestSettings.from_doc(doc.get("digest"))
        kube = getattr(svc.enricher, "kube", None)
        self.kube = kube if doc.get("sample_fleet", True) else None
        self.cluster = doc.get("cluster") or (kube.settings.cluster if kube is not None else "") or \
            svc.cfg.normalize.cluster_default
        self.collector = ReportCollector()
        self.holder = replica_name()
        self._sampled: datetime | None = None
        self._refreshed: datetime | None = None
        self._rolled = -ROLL_EVERY  # time.monotonic() of the last rollup
        self._roll_lock = asyncio.Lock()
        svc.metrics.add_collector(self.collector)

    def _policy(self) -> Any:
        routing = getattr(self.svc.rules, "routing", None)
        return getattr(routing, "cordoned", None)

    def _rma(self) -> tuple[Any, ...]:
        return tuple(getattr(self.svc.rules, "rma", ()) or ())

    async def report(self, p: Period) -> dict[str, Any]:
        await self._roll(force=False)
        return await reliability(self.svc.store, p, self.clock(), rules=self._rma(), policy=self._policy(),
                                 roll=False)

    async def rollup(self) -> int:
        return await self._roll(force=True)

    async def _roll(self, *, force: bool) -> int:
        """One rollup at a time; a report waits for one under way and reads the facts it wrote."""
        async with self._roll_lock:
            if not force and time.monotonic() - self._rolled < ROLL_EVERY:
                return 0
            n = await rollup(self.svc.store, self._policy())
            self._rolled = time.monotonic()
            return n

    async def sample(self, now: datetime) -> None:
        if self.kube is None:
            return
        try:
            nodes = await sample_fleet(self.kube)
        except KubeUnavailable as exc:
            log.warning("fleet size not sampled: %s", exc.reason)
            return
        except Exception:  # the report's other work goes on without today's sample
            log.exception("fleet size not sampled")
            return
        await self.svc.store.record_fleet_sample(self.cluster, nodes, now)
        self._sampled = now

    async def refresh(self, now: datetime) -> None:
        await self.rollup()
        for window, days in WINDOWS.items():
            self.collector.reports[window] = await self.report(Period(now - timedelta(days=days), now))
        self.collector.fleet = await self.svc.store.fleet_nodes()
        self._refreshed = now

    async def post(self, channel: str, text: str) -> None:
        slack = self.svc.notifiers.get("slack")
        if slack is None or not hasattr(slack, "post_text"):
            log.info("weekly digest (no Slack configured):\n%s", text)
            return
        await slack.post_text(channel, text)

    async def step(self) -> None:
        if not hasattr(self.svc.store, "report_facts"):  # a store without the report's tables (a test double)
            return
        now = self.clock()
        if self._sampled is None or now - self._sampled >= self.sample_every:
            await self.sample(now)
        if self._refreshed is None or now - self._refreshed >= REFRESH:
            await self.refresh(now)
        await digest.post_if_due(self.svc.store, self.digest, now, self.holder,
                                 lambda since, until: self.report(Period(since, until)), self.post,
                                 self.svc.cfg.external_url)

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reliability report round failed")
            await asyncio.sleep(ROUND)


__all__ = ["Reporting"]
