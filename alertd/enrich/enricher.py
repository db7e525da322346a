"""The enricher: after an engine step is committed, fetch kernel-log evidence and Kubernetes
context for the incident's node(s) and write them back as incident annotations.

Flow::

    Service._step -> enricher.submit(changes)      (synchronous, never blocks the step)
        only on "opened" and when a node new to the incident joins
        one job per incident+node, at most IN_FLIGHT at once (the rest of a storm's queued):
            logs:  LogSearcher.fetch(node, window around the alert's startsAt)
                   deadline (default 3s): not answered yet -> logs_unavailable, keep waiting
                   answer -> log_evidence (+ an Xid upgrade)
                   failure -> logs_unavailable: reason, retried later
            kube:  KubeContext.node_context(node) -> kube_node, pods, owners, node_events
        results land in per-incident state; a writer turns that state into the changed
        annotations and the upgrade, written in one engine step (Service.enrich),
        coalescing bursts.

Notifications never wait for any of this: the outbox already has the change;
what enrichment writes is a later change that notifiers see as an update.

This module holds the service-facing object and its jobs; which nodes to
enrich is :mod:`~alertd.enrich.targets`, evidence and the Xid upgrade
:mod:`~alertd.enrich.log_evidence`, annotation values :mod:`~alertd.enrich.annotations`
and the writing :mod:`~alertd.enrich.writer`.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Coroutine, Iterable, Mapping

from prometheus_client import Histogram

from alertd.enrich import metrics
from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.timer import REAL_TIMER, Timer
from alertd.core.kube_findings import GpuDevice, Pod
from alertd.enrich.annotations import IncidentState, NodeFindings, annotation_values, seed_state
from alertd.enrich.host import EnrichHost
from alertd.enrich.log_evidence import evidence_from_lines, upgrade_signal
from alertd.enrich.kube import KubeContext, NodeContext
from alertd.enrich.kube_api import KubeUnavailable
from alertd.enrich.jobs import JobImpactReader, job_of
from alertd.engine.jobs import is_job
from alertd.enrich.backends import build_backend
from alertd.enrich.logs import LogsUnavailable, describe_error
from alertd.enrich.searcher import LogSearcher
from alertd.enrich.settings import EnrichSettings
from alertd.enrich.targets import (EnrichTarget, enriched_before, joined_nodes, nodes_of, step_nodes,
                                   targets_for)
from alertd.enrich.writer import AnnotationWriter
from alertd.core.findings import EvidenceLine, Job
from alertd.core.model import Change, Incident, Signal
from alertd.core.vocabulary import EventKind

log = logging.getLogger(__name__)
# Targets enriched at once; the rest wait in a queue. A storm of 20,000 nodes is 40,000 targets (each node's
# incident and the fleet): as a task each they added 630 MB to the process, queued 370 MB (bench/storm_scale.py).
IN_FLIGHT = 64


def _unfinished(inc: Incident) -> bool:
    """Nothing stored yet, or a source recorded as unavailable (its retry lived in the engine's memory)."""
    found = inc.findings
    return found.logs_unavailable is not None or found.kube_unavailable is not None or \
        not (found.evidence or found.pods or found.kube_node)


class Enricher:
    """Owns the log searcher and the Kubernetes context; the service calls submit/bind/close."""

    def __init__(self, settings: EnrichSettings, *, searcher: LogSearcher | None = None,
                 kube: KubeContext | None = None, timer: Timer = REAL_TIMER):
        self.settings = settings
        self.timer = timer  # what retries and rechecks wait on
        self.searcher = searcher
        if self.searcher is None and settings.logs is not None:
            self.searcher = LogSearcher(build_backend(settings.logs), settings.logs)
        self.kube = kube
        if self.kube is None and settings.kube is not None:
            self.kube = KubeContext(settings.kube)
        self.jobs = JobImpactReader(self.kube, self.kube.settings.jobs) if self.kube is not None else None
        self.service: EnrichHost | None = None
        self._state: dict[str, IncidentState] = {}
        self._seen: dict[str, set[str]] = {}
        self._sizing: dict[str, bool] = {}  # job incident -> its pods are being read (True: read again after)
        self._tasks: set[asyncio.Task[None]] = set()
        self._queue: deque[EnrichTarget] = deque()  # targets waiting for one of the IN_FLIGHT workers
        self._working = 0
        self._closed = False
        self.latencies: deque[float] = deque(maxlen=10000)  # submit -> results written, seconds
        self.counts = {"targets": 0, "log_ok": 0, "log_unavailable": 0, "kube_ok": 0, "kube_unavailable": 0,
                       "upgrades": 0, "writes": 0, "retries": 0, "rechecks": 0}
        self._histogram: Histogram | None = None
        self.writer = AnnotationWriter(self._state, self.values, service=lambda: self.service,
                                       delay=lambda: self.settings.write_delay, closed=lambda: self._closed,
                                       later=self._later, counts=self.counts)

    @classmethod
    def from_settings(cls, settings: EnrichSettings) -> "Enricher | None":
        """None when the ``enrich`` section (``Config.enrich``) is absent or disabled, or configures nothing."""
        if not settings.enabled or (settings.logs is None and settings.kube is None):
            return None
        return cls(settings)

    @classmethod
    def from_doc(cls, doc: Mapping[str, object] | None) -> "Enricher | None":
        """The same from an ``enrich`` section as written (tests and benchmarks that build one by hand)."""
        return cls.from_settings(EnrichSettings.from_doc(doc))

    # ----- wiring -----

    def bind(self, service: EnrichHost) -> None:
        """Called once the service exists: results go back through service.enrich."""
        self.service = service
        if self._histogram is None:
            self._histogram = metrics.register(self, service.metrics)

    def submit(self, changes: Iterable[Change]) -> None:
        """Start enrichment for incidents that opened or gained a node. Never blocks, never raises."""
        if self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for change in changes:
            try:
                targets = self._targets(change)
            except Exception:  # enrichment must never break the service
                log.exception("could not start enrichment for %s", change.incident.id)
                continue
            self.counts["targets"] += len(targets)
            self._queue.extend(targets)
        while self._queue and self._working < IN_FLIGHT:
            self._working += 1
            self._spawn(loop, self._work(), "alertd-enrich")

    def resume(self, incidents: Iterable[Incident], limit: int = 500) -> int:
        """On becoming the engine (a start, a failover): enrich again the open incidents whose first attempt
        or retries may have been pending in another process's memory: those with no enrichment stored, and
        those whose stored annotations say the kernel log or Kubernetes was unavailable (a retry was due).
        The incidents' annotations in the store are the durable record of what was done; what they already
        show is kept (the state is seeded from them), so a source still down costs nothing shown."""
        pending = [inc for inc in incidents if inc.is_open and not inc.fleet and inc.node and _unfinished(inc)]
        pending = sorted(pending, key=lambda inc: inc.opened_at, reverse=True)[:limit]
        for inc in pending:
            self._seen.pop(inc.id, None)
            seed_state(self._state.setdefault(inc.id, IncidentState(fleet=inc.fleet)), inc.findings)
        self.submit(Change(incident=inc, kinds=[EventKind.OPENED]) for inc in pending)
        if pending:
            log.info("enrichment resumed for %d open incidents without stored enrichment or with a retry due",
                     len(pending))
        return len(pending)

    async def close(self) -> None:
        """Stop background work: pending jobs are dropped, a write in progress may finish."""
        self._closed = True
        self._queue.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.writer.close()
        if self.searcher is not None:
            await self.searcher.close()
        if self.kube is not None:
            await self.kube.close()

    async def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no job, retry or write is pending (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = [t for t in self._tasks if not t.done() and t.get_name() != "alertd-enrich-later"]
            if not busy and not self._queue and self.writer.idle:
                return True
            await asyncio.sleep(0.02)
        return False

    def stats(self) -> JSONObject:
        lat = sorted(self.latencies)
        out: JSONObject = dict[str, JSONValue](self.counts)
        if lat:
            out["latency_p50"] = lat[len(lat) // 2]
            out["latency_p95"] = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
            out["latency_max"] = lat[-1]
        if self.searcher is not None:
            out["logs"] = dict[str, JSONValue](self.searcher.stats.to_dict() | {"requests": self.searcher.backend.requests})
        if self.kube is not None:
            out["kube"] = dict[str, JSONValue](self.kube.stats.to_dict())
        return out

    def values(self, incident_id: str) -> dict[str, tuple[JSONValue, str]]:
        """Annotation values computed from what enrichment found (None removes a key)."""
        state = self._state.get(incident_id)
        if state is None:
            return {}
        return annotation_values(state, self.settings, logs=self.searcher is not None, kube=self.kube is not None)

    # ----- which nodes to enrich -----

    def _targets(self, change: Change) -> list[EnrichTarget]:
        inc = change.incident
        if not inc.is_open or EventKind.RESOLVED in change.kinds:
            self._forget(inc.id)
            return []
        seen = self._seen.get(inc.id)
        nodes = nodes_of(inc) if seen is None else step_nodes(change)
        if not nodes:
            return []
        if seen is None:
            seen = self._seen[inc.id] = set()
            if EventKind.OPENED not in change.kinds:
                # First sight after a restart (or a late bind): nodes of members that did not change
                # in this step were enriched before; only the ones that just joined are new.
                seen.update(enriched_before(inc, set(change.members), joined_nodes(change)))
                seed_state(self._state.setdefault(inc.id, IncidentState(fleet=inc.fleet)), inc.findings)
        new = [n for n in nodes if n not in seen]
        if not new:
            return []
        seen.update(new)
        state = self._state.setdefault(inc.id, IncidentState())
        state.fleet = inc.fleet
        state.nodes.update(dict.fromkeys(new))
        if is_job(inc):
            self._size_job(inc)
        return targets_for(inc, new, self._children_on(inc.id), self.timer.monotonic())

    def _forget(self, incident_id: str) -> None:
        self._seen.pop(incident_id, None)
        self.writer.forget(incident_id, self._state.pop(incident_id, None))

    def _incident(self, incident_id: str) -> Incident | None:
        return self.service.open_incident(incident_id) if self.service is not None else None

    def _children_on(self, fleet_id: str) -> Callable[[str], list[Incident]]:
        service = self.service
        return lambda node: service.fleet_children_on(fleet_id, node) if service is not None else []

    def _size_job(self, inc: Incident) -> None:
        """Read a job incident's pods from the API (its GPUs, its nodes), again as nodes join it."""
        who = job_of(inc)
        if who is None or self.jobs is None or self.kube is None or not self.kube.applies_to(inc.cluster):
            return
        if inc.id in self._sizing:
            self._sizing[inc.id] = True  # read again once the running read ends
            return
        self._sizing[inc.id] = False
        self._spawn(asyncio.get_running_loop(), self._job_size(inc.id, who), "alertd-enrich-job")

    async def _job_size(self, incident_id: str, who: tuple[str, str, str]) -> None:
        assert self.jobs is not None
        try:
            again = True
            while again and not self._closed:
                try:
                    size = await self.jobs.size(*who)
                except KubeUnavailable as exc:  # the title keeps what the alerts name
                    log.info("pods of job %s/%s/%s not read: %s", *who, exc.reason)
                    size = None
                state = self._state.get(incident_id)
                if state is not None and size is not None and size != state.job_size:
                    state.job_size = size
                    self.writer.mark_dirty(incident_id)
                again = self._sizing.get(incident_id, False)
                self._sizing[incident_id] = False
        finally:
            self._sizing.pop(incident_id, None)

    # ----- jobs -----

    def _spawn(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _later(self, delay: float, coro_fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        async def run() -> None:
            await self.timer.sleep(delay)
            if not self._closed:  # due now: a task of its own, which wait_idle counts as work
                self._spawn(asyncio.get_running_loop(), coro_fn(), "alertd-enrich-due")

        if not self._closed:
            self._spawn(asyncio.get_running_loop(), run(), "alertd-enrich-later")

    async def _work(self) -> None:
        """One of at most IN_FLIGHT workers: enriches queued targets until none is left."""
        try:
            while self._queue and not self._closed:
                target = self._queue.popleft()
                try:
                    await self._enrich(target)
                except Exception:  # one target's failure must not stop the queue
                    log.exception("enrichment of %s failed", target.incident_id)
        finally:
            self._working -= 1

    async def _enrich(self, target: EnrichTarget) -> None:
        jobs = []
        logs_job = None
        if self.searcher is not None and self.settings.logs is not None:
            logs_job = asyncio.ensure_future(self._logs(target, attempt=0))
            jobs.append(logs_job)
        if self.kube is not None and self.kube.applies_to(target.cluster):
            jobs.append(asyncio.ensure_future(self._kube(target, attempt=0)))
        if not jobs:
            return
        try:
            if logs_job is not None and self.settings.deadline > 0:
                done, _ = await asyncio.wait({logs_job}, timeout=self.settings.deadline)
                if not done:
                    self._set_log_failure(target, f"no answer within {self.settings.deadline:g}s (still searching)")
            await asyncio.gather(*jobs, return_exceptions=True)
            waiter = self.writer.mark_dirty(target.incident_id)
            if waiter is not None:  # latency is measured to the write; the worker takes the next target now
                submitted = target.submitted
                waiter.add_done_callback(lambda f: None if f.cancelled() else self._observe(time.monotonic() - submitted))
        except asyncio.CancelledError:
            for j in jobs:
                j.cancel()
            raise

    def _observe(self, seconds: float) -> None:
        self.latencies.append(seconds)
        if self._histogram is not None:
            self._histogram.observe(seconds)

    async def _logs(self, target: EnrichTarget, attempt: int, fresh: bool = False, recheck: bool = True) -> None:
        assert self.searcher is not None and self.settings.logs is not None
        if target.incident_id not in self._state:
            return
        query = self.searcher.window(target.node, target.anchor)
        try:
            result = await self.searcher.fetch(query, fresh=fresh)
        except LogsUnavailable as exc:
            self.counts["log_unavailable"] += 1
            if self._set_log_failure(target, exc.reason) and attempt < len(self.settings.retry):
                following = attempt + 1
                self._later(self.settings.retry[attempt], lambda: self._retry_logs(target, following))
            return
        except Exception as exc:  # a bug in parsing must not take the service down
            log.exception("log enrichment failed for %s", target.incident_id)
            self._set_log_failure(target, describe_error(exc))
            return
        self.counts["log_ok"] += 1
        state = self._state.get(target.incident_id)
        if state is None:
            return
        evidence = evidence_from_lines(result.lines, target.node, target.gpus, self.settings.logs.max_lines)
        state.evidence[target.node] = evidence
        state.log_failures.pop(target.node, None)
        if self.settings.upgrade and not target.fleet:  # one node's Xid does not retitle a fleet event
            signal = self._upgrade_signal(target, evidence)
            if signal is not None and signal not in state.signals:
                state.signals.append(signal)
        self.writer.mark_dirty(target.incident_id)
        if recheck and not result.complete and self.settings.recheck:
            # The window was still open: look again once it has closed. The cached answer expires
            # then too, so all incidents sharing the window get the one new search.
            wait = (query.end + self.settings.logs.ingest_lag - result.fetched_at).total_seconds() + 1.0
            self._later(max(0.0, wait), lambda: self._recheck_logs(target))

    async def _retry_logs(self, target: EnrichTarget, attempt: int) -> None:
        state = self._state.get(target.incident_id)
        if state is None or target.node not in state.log_failures:
            return
        self.counts["retries"] += 1
        await self._logs(target, attempt, fresh=True)

    async def _retry_kube(self, target: EnrichTarget, attempt: int) -> None:
        state = self._state.get(target.incident_id)
        if state is None or target.node not in state.kube_failures:
            return
        self.counts["retries"] += 1
        await self._kube(target, attempt)

    async def _recheck_logs(self, target: EnrichTarget) -> None:
        self.counts["rechecks"] += 1
        if target.incident_id in self._state:
            await self._logs(target, attempt=len(self.settings.retry), recheck=False)

    def _set_log_failure(self, target: EnrichTarget, reason: str) -> bool:
        """Mark the node's logs unavailable, unless earlier evidence for it is already shown."""
        state = self._state.get(target.incident_id)
        if state is None or target.node in state.evidence:
            return False
        state.log_failures[target.node] = reason
        self.writer.mark_dirty(target.incident_id)
        return True

    def _upgrade_signal(self, target: EnrichTarget, evidence: list[EvidenceLine]) -> Signal | None:
        """The Xid from the log that should classify the incident, or None (see evidence.upgrade_signal)."""
        rules = self.service.rules if self.service is not None else None
        inc = self._incident(target.incident_id)
        if rules is None or inc is None:
            return None
        return upgrade_signal(evidence, inc, rules.catalog, target.gpus, rules.sxids)

    async def _kube(self, target: EnrichTarget, attempt: int) -> None:
        assert self.kube is not None
        state = self._state.get(target.incident_id)
        if state is None:
            return
        try:
            ctx = await self.kube.node_context(target.node)
            pods = await self._pods_for(target, ctx)
            jobs = await self._jobs_for(target, pods)
        except KubeUnavailable as exc:
            self.counts["kube_unavailable"] += 1
            if target.node not in state.kube:  # keep what an earlier answer showed
                state.kube_failures[target.node] = exc.reason
                self.writer.mark_dirty(target.incident_id)
                if attempt < len(self.settings.retry):
                    following = attempt + 1
                    self._later(self.settings.retry[attempt], lambda: self._retry_kube(target, following))
            return
        except Exception as exc:
            log.exception("Kubernetes enrichment failed for %s", target.incident_id)
            state.kube_failures[target.node] = describe_error(exc)
            self.writer.mark_dirty(target.incident_id)
            return
        self.counts["kube_ok"] += 1
        state.kube[target.node] = NodeFindings(ctx.node, pods, list(ctx.events), jobs)
        state.kube_failures.pop(target.node, None)
        self.writer.mark_dirty(target.incident_id)

    async def _jobs_for(self, target: EnrichTarget, pods: list[Pod]) -> list[Job]:
        """The jobs these pods belong to, with their gangs and the cost of the fault (alertd/enrich/jobs.py)."""
        if self.jobs is None or not self.jobs.costs.enabled or not pods:
            return []
        try:
            return [j.to_finding() for j in await self.jobs.jobs_for_pods(pods, target.anchor)]
        except Exception:  # the impact is an addition: the node, pods and owners are shown without it
            log.exception("job impact failed for %s", target.incident_id)
            return []

    async def _pods_for(self, target: EnrichTarget, ctx: NodeContext) -> list[Pod]:
        """The pods dcgm labels named (with their GPUs), else every GPU pod on the node.

        A named pod that runs on the node without GPUs (the exporter's own pod, when the
        scrape did not honour labels) names nothing; a named pod no longer on the node is
        kept as a stub so people still see whose it was."""
        named = {k: v for k, v in target.pods.items() if k not in ctx.other_pods}
        if not named:
            return list(ctx.pods)
        by_name = {(p.namespace, p.name): p for p in ctx.pods}
        out = []
        for (ns, name), gpus in named.items():
            pod = by_name.get((ns, name))
            if pod is None:
                assert self.kube is not None
                namespace = await self.kube.namespace(ns)
                team, channel = self.kube.team_and_channel([namespace] if namespace else [])
                pod = Pod(namespace=ns, name=name, node=target.node, phase="NotFound", gpus=None, team=team,
                          channel=channel)
            if gpus:
                pod = replace(pod, gpu_devices=tuple(GpuDevice(g.get("uuid", ""), g.get("index", ""),
                                                               g.get("pci_bus_id", ""), g.get("model", ""))
                                                     for g in gpus))
            out.append(pod)
        return out


__all__ = ["Enricher"]
