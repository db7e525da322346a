"""The reliability report's background work, on the engine's replica: fleet samples, facts, metrics, digest.

Every minute, each step only when it is due:

* the fleet's GPU nodes from the Kubernetes API (``report.sample_interval``, default 1h; the day's latest
  sample is the day's row);
* the report facts rolled up and the metrics snapshot (last 7 and 30 days) recomputed (every 5 minutes);
* the weekly digest (``report.digest``), claimed in the store so it is posted once across restarts and
  replicas.

``report`` config section (``Config.report``, alertd/report/settings.py): docs/reliability-report.md.
"""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timedelta
from typing import Callable, Mapping, Protocol, runtime_checkable

from prometheus_client.registry import Collector

from alertd.core.json_types import JSONObject
from alertd.core.fleet import NodeSample
from alertd.enrich.fleet_size import sample_fleet
from alertd.enrich.kube import KubeContext
from alertd.enrich.kube_api import KubeUnavailable
from alertd.ha.elector import replica_name
from alertd.integrations.base import Notifier
from alertd.report import digest
from alertd.report.build import ReportStore, reliability
from alertd.report.compute import Period
from alertd.report.metrics import WINDOWS, ReportCollector
from alertd.report.rollup import rollup
from alertd.report.settings import ReportSettings
from alertd.rules.rma import RmaRule
from alertd.rules.windows import CordonPolicy
from alertd.rules.ruleset import RuleSet

log = logging.getLogger(__name__)
ROUND = 60.0
REFRESH = timedelta(minutes=5)
ROLL_EVERY = 30.0  # seconds: reports asked for more often read the facts as they are (the rollup scans incidents)


class ReportingStore(ReportStore, digest.DigestStore, Protocol):
    """The store as the report's background work uses it: the facts, the fleet's samples, the digest's claim."""

    async def record_fleet_sample(self, cluster: str, nodes: list[NodeSample], now: datetime) -> None: ...

    async def fleet_nodes(self, cluster: str = "") -> list[tuple[str, str, str, int, bool]]: ...


@runtime_checkable
class PostsText(Protocol):
    """An integration that can post plain text to a channel (Slack): where the weekly digest goes."""

    async def post_text(self, channel: str, text: str) -> None: ...


class ReportingHost(Protocol):
    """The service as the report's work sees it: its store, the rules as loaded now, its integrations."""

    @property
    def store(self) -> ReportingStore: ...

    @property
    def rules(self) -> RuleSet: ...

    @property
    def notifiers(self) -> Mapping[str, Notifier]: ...


class AddsCollectors(Protocol):
    """The service's metrics (alertd/core/service_metrics.py): the report's figures are a collector of their own."""

    def add_collector(self, collector: Collector) -> None: ...


class Reporting:
    """Owned by the service; ``run`` is one of the engine's loops, ``rollup`` runs before each prune.
    ``kube``: enrichment's Kubernetes client, which samples the fleet; ``cluster_default``: the cluster named
    when neither the report section nor the client names one; ``external_url``: links in the digest."""

    def __init__(self, svc: ReportingHost, settings: ReportSettings, clock: Callable[[], datetime], *,
                 kube: KubeContext | None, metrics: AddsCollectors, cluster_default: str = "", external_url: str = ""):
        self.svc, self.clock, self.external_url = svc, clock, external_url
        self.sample_every = settings.sample_interval
        self.digest = settings.digest
        self.kube = kube if settings.sample_fleet else None
        self.sample_off, self._said_no_fleet = not settings.sample_fleet, False
        self.cluster = settings.cluster or (kube.settings.cluster if kube is not None else "") or cluster_default
        self.collector = ReportCollector()
        self.holder = replica_name()
        self._sampled: datetime | None = None
        self._refreshed: datetime | None = None
        self._rolled = -ROLL_EVERY  # time.monotonic() of the last rollup
        self._roll_lock = asyncio.Lock()
        metrics.add_collector(self.collector)

    def _policy(self) -> CordonPolicy | None:
        routing = self.svc.rules.routing
        return routing.cordoned if routing is not None else None  # (no routing section: no policy)

    def _rma(self) -> tuple[RmaRule, ...]:
        return self.svc.rules.rma

    async def report(self, p: Period) -> JSONObject:
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

    @property
    def no_fleet_size(self) -> str:
        """Why the report has no fleet size to count GPU-days by, or "" when it samples one."""
        if self.kube is not None:
            return ""
        return ("GPU-days, rates and lemons need the fleet's size, which alertd samples from the Kubernetes API: "
                + ("report.sample_fleet is false" if self.sample_off else "enrich.kube is not configured")
                + ", so GPU-days stay 0 and the rates n/a (docs/reliability-report.md).")

    async def sample(self, now: datetime) -> None:
        if self.kube is None:
            if not self._said_no_fleet:  # once: the page says it every time
                self._said_no_fleet = True
                log.info("fleet size not sampled: %s", self.no_fleet_size)
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
        reports = {window: await self.report(Period(now - timedelta(days=days), now)) for window, days in WINDOWS.items()}
        fleet = await self.svc.store.fleet_nodes()
        # Swapped in together: a scrape between the awaits above sees the last whole snapshot, not half of each.
        self.collector.reports, self.collector.fleet = reports, fleet
        self._refreshed = now

    async def post(self, channel: str, text: str) -> None:
        slack = self.svc.notifiers.get("slack")
        if not isinstance(slack, PostsText):
            log.info("weekly digest (no Slack configured):\n%s", text)
            return
        await slack.post_text(channel, text)

    async def step(self) -> None:
        now = self.clock()
        if self._sampled is None or now - self._sampled >= self.sample_every:
            await self.sample(now)
        if self._refreshed is None or now - self._refreshed >= REFRESH:
            await self.refresh(now)
        await digest.post_if_due(self.svc.store, self.digest, now, self.holder,
                                 lambda since, until: self.report(Period(since, until)), self.post,
                                 self.external_url)

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
