"""The enricher: after an engine step is committed, fetch kernel-log evidence and Kubernetes
context for the incident's node(s) and write them back as incident annotations.

Flow::

    Service._step -> enricher.submit(changes)      (synchronous, never blocks the step)
        only on "opened" and when a node new to the incident joins
        one job per incident+node:
            logs:  LogSearcher.fetch(node, window around the alert's startsAt)
                   deadline (default 3s): not answered yet -> logs_unavailable, keep waiting
                   answer -> log_evidence (+ Xid upgrade via Service.add_evidence)
                   failure -> logs_unavailable: reason, retried later
            kube:  KubeContext.node_context(node) -> kube_node, pods, owners, node_events
        results land in per-incident state; a writer turns that state into annotations
        (Service.annotate, one step per changed key), coalescing bursts.

Notifications never wait for any of this: the outbox already has the change;
each annotation is a later change that notifiers see as an update.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

from alertd.durations import parse_duration
from alertd.engine.correlate import KIND_PRIORITY
from alertd.enrich.kube import KubeContext, KubeSettings, KubeUnavailable, NodeContext, owners_of
from alertd.enrich.logs import (
    LogLine, LogSearcher, LogSettings, LogsUnavailable, build_backend, describe_error, iso_millis,
)
from alertd.enrich.nvrm import parse_xid, pci_to_uuid, split_lines
from alertd.gpu.pci import normalize_pci
from alertd.model import SEVERITY_RANK, Change, Incident, Signal

log = logging.getLogger(__name__)

EVENT_KIND = "enrichment"
SOURCE = "kernel log"
# Annotation keys (documented in docs/enrichment.md; the Slack renderer reads them).
LOG_EVIDENCE = "log_evidence"
LOGS_UNAVAILABLE = "logs_unavailable"
KUBE_NODE = "kube_node"
KUBE_NODES = "kube_nodes"
PODS = "pods"
OWNERS = "owners"
NODE_EVENTS = "node_events"
KUBE_UNAVAILABLE = "kube_unavailable"


@dataclass(frozen=True, slots=True)
class EnrichSettings:
    enabled: bool = True
    deadline: float = 3.0
    retry: tuple[float, ...] = (30.0, 120.0, 600.0)
    recheck: bool = True
    max_evidence: int = 50
    max_pods: int = 50
    max_events: int = 20
    write_delay: float = 0.1
    upgrade: bool = True
    logs: LogSettings | None = None
    kube: KubeSettings | None = None

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> "EnrichSettings":
        doc = doc or {}
        d = cls()
        logs_doc, kube_doc = doc.get("logs"), doc.get("kube")
        logs = LogSettings.from_doc(logs_doc) if logs_doc is not None and logs_doc.get("enabled", True) else None
        kube = KubeSettings.from_doc(kube_doc) if kube_doc is not None and kube_doc.get("enabled", True) else None
        return cls(
            enabled=doc.get("enabled", True),
            deadline=parse_duration(doc.get("deadline", "3s")).total_seconds(),
            retry=tuple(parse_duration(r).total_seconds() for r in doc.get("retry", ["30s", "2m", "10m"])),
            recheck=doc.get("recheck", True),
            max_evidence=int(doc.get("max_evidence", d.max_evidence)),
            max_pods=int(doc.get("max_pods", d.max_pods)),
            max_events=int(doc.get("max_events", d.max_events)),
            write_delay=parse_duration(doc.get("write_delay", "100ms")).total_seconds(),
            upgrade=doc.get("upgrade", True),
            logs=logs,
            kube=kube,
        )


@dataclass(slots=True)
class Target:
    """One node of one incident to enrich."""

    incident_id: str
    node: str
    anchor: datetime  # the earliest startsAt of the incident's alerts on this node
    cluster: str = ""
    fleet: bool = False
    gpus: list[dict[str, str]] = field(default_factory=list)  # GPUs the alerts named on this node
    pods: dict[tuple[str, str], list[dict[str, str]]] = field(default_factory=dict)  # (ns, pod) -> GPUs (dcgm pod labels)
    submitted: float = 0.0


@dataclass(slots=True)
class _IncidentState:
    """What enrichment found per node; annotation values are computed from this."""

    nodes: list[str] = field(default_factory=list)
    evidence: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    log_failures: dict[str, str] = field(default_factory=dict)
    kube: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> {"node", "pods", "events"}
    kube_failures: dict[str, str] = field(default_factory=dict)
    signals: list[Signal] = field(default_factory=list)
    fleet: bool = False
    waiters: list[asyncio.Future] = field(default_factory=list)


def _signal_rank(sig: Signal) -> tuple[int, int]:
    return SEVERITY_RANK.get(sig.severity, 0), KIND_PRIORITY.get(sig.kind, 0)


def _short(node: str) -> str:
    return node.split(".", 1)[0]


def build_evidence(lines: Iterable[LogLine], node: str, gpus: Iterable[dict[str, str]] = (),
                   limit: int = 50) -> list[dict[str, Any]]:
    """Log lines -> evidence entries; Xid lines are kept first when there are more than ``limit``."""
    lines = list(lines)
    uuids = pci_to_uuid((ln.message for ln in lines), gpus)
    out: list[dict[str, Any]] = []
    for ln in lines:
        xid = None
        for part in split_lines(ln.message):
            xid = parse_xid(part)
            if xid is not None:
                break
        entry: dict[str, Any] = {
            "time": iso_millis(ln.time) if ln.time else None,  # fixed width: sorts as text
            "host": ln.host or node,
            "node": node,
            "line": ln.message if len(ln.message) <= 500 else ln.message[:499] + "…",
            "xid": xid.xid if xid else None,
            "pci": xid.pci if xid else None,
            "gpu_uuid": uuids.get(xid.pci) if xid and xid.pci else None,
            "pid": xid.pid if xid else None,
            "process": (xid.process or None) if xid else None,
        }
        if xid and xid.gpu_instance is not None:
            entry["mig"] = {"gpu_instance": xid.gpu_instance, "compute_instance": xid.compute_instance}
        pod = ln.fields.get("kubernetes_pod_name")
        if pod:
            entry["pod"] = pod
        out.append(entry)
    return _cap(out, limit)


def _cap(entries: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    if len(entries) <= limit:
        return entries
    xids = [e for e in entries if e.get("xid")]
    rest = [e for e in entries if not e.get("xid")]
    keep = xids[:limit] + rest[: max(0, limit - len(xids))]
    return sorted(keep, key=lambda e: e.get("time") or "")


class Enricher:
    """Owns the log searcher and the Kubernetes context; the service calls submit/bind/close."""

    def __init__(self, settings: EnrichSettings, *, searcher: LogSearcher | None = None,
                 kube: KubeContext | None = None):
        self.settings = settings
        self.searcher = searcher
        if self.searcher is None and settings.logs is not None:
            self.searcher = LogSearcher(build_backend(settings.logs), settings.logs)
        self.kube = kube
        if self.kube is None and settings.kube is not None:
            self.kube = KubeContext(settings.kube)
        self.service: Any = None
        self._state: dict[str, _IncidentState] = {}
        self._seen: dict[str, set[str]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._dirty: dict[str, None] = {}
        self._writer: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._closed = False
        self._writing = False
        self._force: set[str] = set()
        self.latencies: deque[float] = deque(maxlen=10000)  # submit -> results written, seconds
        self.counts = {"targets": 0, "log_ok": 0, "log_unavailable": 0, "kube_ok": 0, "kube_unavailable": 0,
                       "upgrades": 0, "writes": 0, "retries": 0, "rechecks": 0}
        self._histogram: Any = None

    @classmethod
    def from_config(cls, doc: dict[str, Any] | None) -> "Enricher | None":
        """None when the ``enrich`` section is absent or disabled, or configures nothing."""
        if not doc:
            return None
        settings = EnrichSettings.from_doc(doc)
        if not settings.enabled or (settings.logs is None and settings.kube is None):
            return None
        return cls(settings)

    # ----- wiring -----

    def bind(self, service: Any) -> None:
        """Called once the service exists: results go back through service.annotate/add_evidence."""
        self.service = service
        registry = getattr(getattr(service, "metrics", None), "registry", None)
        if registry is not None and self._histogram is None:
            from prometheus_client import Histogram

            self._histogram = Histogram(
                "alertd_enrichment_seconds", "Time from an incident change to its enrichment being written.",
                buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60), registry=registry)
            registry.register(_StatsCollector(self))

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
                for target in self._targets(change):
                    self.counts["targets"] += 1
                    self._spawn(loop, self._enrich(target), "alertd-enrich")
            except Exception:  # enrichment must never break the service
                log.exception("could not start enrichment for %s", change.incident.id)

    async def close(self) -> None:
        """Stop background work: pending jobs are dropped, a write in progress may finish."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._writer is not None:
            if self._wake is not None:
                self._wake.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._writer), 2)
            except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
                self._writer.cancel()
                await asyncio.gather(self._writer, return_exceptions=True)
        for state in self._state.values():
            for fut in state.waiters:
                if not fut.done():
                    fut.cancel()
        if self.searcher is not None:
            await self.searcher.close()
        if self.kube is not None:
            await self.kube.close()

    async def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no job, retry or write is pending (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = [t for t in self._tasks if not t.done() and t.get_name() != "alertd-enrich-later"]
            if not busy and not self._dirty and not self._writing:
                return True
            await asyncio.sleep(0.02)
        return False

    def stats(self) -> dict[str, Any]:
        lat = sorted(self.latencies)
        out: dict[str, Any] = dict(self.counts)
        if lat:
            out["latency_p50"] = lat[len(lat) // 2]
            out["latency_p95"] = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
            out["latency_max"] = lat[-1]
        if self.searcher is not None:
            out["logs"] = self.searcher.stats.to_dict() | {"requests": self.searcher.backend.requests}
        if self.kube is not None:
            out["kube"] = self.kube.stats.to_dict()
        return out

    # ----- which nodes to enrich -----

    def _targets(self, change: Change) -> list[Target]:
        inc = change.incident
        if not inc.is_open or "resolved" in change.kinds:
            self._forget(inc.id)
            return []
        nodes = self._nodes_of(inc)
        if not nodes:
            return []
        seen = self._seen.get(inc.id)
        opened = "opened" in change.kinds
        if seen is None:
            seen = self._seen[inc.id] = set()
            if not opened:
                # First sight after a restart (or a late bind): nodes of members that did not change
                # in this step were enriched before; only the ones that just joined are new.
                changed = set(change.members)
                seen.update(n for n in self._member_nodes(inc, exclude=changed))
                if not inc.fleet and inc.node and any(inc.annotations.get(k) for k in (LOG_EVIDENCE, PODS, KUBE_NODE)):
                    seen.add(inc.node)
                self._seed_state(inc)
        new = [n for n in nodes if n not in seen]
        if not new:
            return []
        seen.update(new)
        state = self._state.setdefault(inc.id, _IncidentState())
        state.fleet = inc.fleet
        for n in new:
            if n not in state.nodes:
                state.nodes.append(n)
        now = time.monotonic()
        out = []
        for node in new:
            members = [m for m in inc.members.values() if m.subject.node == node]
            if not members and inc.fleet:  # a node the fleet took over: its alerts live in the child incident
                for child_id in inc.children:
                    child = self._incident(child_id)
                    if child is not None:
                        members += [m for m in child.members.values() if m.subject.node == node]
            anchor = min((m.starts_at for m in members), default=inc.opened_at)
            gpus: list[dict[str, str]] = []
            pods: dict[tuple[str, str], list[dict[str, str]]] = {}
            for m in members:
                g = m.subject.gpu.to_dict() if m.subject.gpu else None
                if g and g not in gpus:
                    gpus.append(g)
                if m.subject.pod and g:  # dcgm pod mapping: the GPU's labels name the pod using it
                    lst = pods.setdefault((m.subject.namespace, m.subject.pod), [])
                    if g and g not in lst:
                        lst.append(g)
            if not inc.fleet and node == inc.node:
                for g in inc.gpus:
                    if g not in gpus:
                        gpus.append(dict(g))
            out.append(Target(inc.id, node, anchor, inc.cluster, inc.fleet, gpus, pods, now))
        return out

    @staticmethod
    def _nodes_of(inc: Incident) -> list[str]:
        nodes: list[str] = []
        for n in ([*inc.nodes] if inc.fleet else [inc.node]) + [m.subject.node for m in inc.members.values()]:
            if n and n not in nodes:
                nodes.append(n)
        return nodes

    @staticmethod
    def _member_nodes(inc: Incident, exclude: set[str]) -> set[str]:
        out = {m.subject.node for fp, m in inc.members.items() if fp not in exclude and m.subject.node}
        if inc.fleet:
            joined = {m.subject.node for fp, m in inc.members.items() if fp in exclude}
            out |= {n for n in inc.nodes if n not in joined}
        return out

    def _seed_state(self, inc: Incident) -> None:
        """Rebuild per-node state from existing annotations, so merging a new node keeps the old ones."""
        state = self._state.setdefault(inc.id, _IncidentState(fleet=inc.fleet))
        ann = inc.annotations
        for e in ann.get(LOG_EVIDENCE) or []:
            if isinstance(e, dict):
                node = e.get("node") or e.get("host") or ""
                state.evidence.setdefault(node, []).append(e)
        nodes_info = ann.get(KUBE_NODES) or ([ann[KUBE_NODE]] if isinstance(ann.get(KUBE_NODE), dict) else [])
        for n in nodes_info:
            if isinstance(n, dict) and n.get("name"):
                state.kube.setdefault(n["name"], {"node": n, "pods": [], "events": []})
        for p in ann.get(PODS) or []:
            if isinstance(p, dict) and p.get("node"):
                state.kube.setdefault(p["node"], {"node": {"name": p["node"]}, "pods": [], "events": []})["pods"].append(p)
        for ev in ann.get(NODE_EVENTS) or []:
            if isinstance(ev, dict) and ev.get("node") in state.kube:
                state.kube[ev["node"]]["events"].append(ev)
        for node in list(state.evidence) + list(state.kube):
            if node and node not in state.nodes:
                state.nodes.append(node)

    def _forget(self, incident_id: str) -> None:
        self._seen.pop(incident_id, None)
        state = self._state.pop(incident_id, None)
        self._dirty.pop(incident_id, None)
        if state is not None:
            for fut in state.waiters:
                if not fut.done():
                    fut.set_result(None)

    # ----- jobs -----

    def _spawn(self, loop: asyncio.AbstractEventLoop, coro: Any, name: str) -> asyncio.Task:
        task = loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _later(self, delay: float, coro_fn: Any) -> None:
        async def run() -> None:
            await asyncio.sleep(delay)
            await coro_fn()

        if not self._closed:
            self._spawn(asyncio.get_running_loop(), run(), "alertd-enrich-later")

    async def _enrich(self, target: Target) -> None:
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
            waiter = self._mark_dirty(target.incident_id)
            if waiter is not None:
                await waiter
                self._observe(time.monotonic() - target.submitted)
        except asyncio.CancelledError:
            for j in jobs:
                j.cancel()
            raise

    def _observe(self, seconds: float) -> None:
        self.latencies.append(seconds)
        if self._histogram is not None:
            self._histogram.observe(seconds)

    async def _logs(self, target: Target, attempt: int, fresh: bool = False, recheck: bool = True) -> None:
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
        evidence = build_evidence(result.lines, target.node, target.gpus, self.settings.logs.max_lines)
        state.evidence[target.node] = evidence
        state.log_failures.pop(target.node, None)
        if self.settings.upgrade and not target.fleet:  # one node's Xid does not retitle a fleet event
            signal = self._upgrade_signal(target, evidence)
            if signal is not None and signal not in state.signals:
                state.signals.append(signal)
        self._mark_dirty(target.incident_id)
        if recheck and not result.complete and self.settings.recheck:
            # The window was still open: look again once it has closed. The cached answer expires
            # then too, so all incidents sharing the window get the one new search.
            wait = (query.end + self.settings.logs.ingest_lag - result.fetched_at).total_seconds() + 1.0
            self._later(max(0.0, wait), lambda: self._recheck_logs(target))

    async def _retry_logs(self, target: Target, attempt: int) -> None:
        state = self._state.get(target.incident_id)
        if state is None or target.node not in state.log_failures:
            return
        self.counts["retries"] += 1
        await self._logs(target, attempt, fresh=True)

    async def _retry_kube(self, target: Target, attempt: int) -> None:
        state = self._state.get(target.incident_id)
        if state is None or target.node not in state.kube_failures:
            return
        self.counts["retries"] += 1
        await self._kube(target, attempt)

    async def _recheck_logs(self, target: Target) -> None:
        self.counts["rechecks"] += 1
        if target.incident_id in self._state:
            await self._logs(target, attempt=len(self.settings.retry), recheck=False)

    def _set_log_failure(self, target: Target, reason: str) -> bool:
        """Mark the node's logs unavailable, unless earlier evidence for it is already shown."""
        state = self._state.get(target.incident_id)
        if state is None or target.node in state.evidence:
            return False
        state.log_failures[target.node] = reason
        self._mark_dirty(target.incident_id)
        return True

    def _upgrade_signal(self, target: Target, evidence: list[dict[str, Any]]) -> Signal | None:
        """The Xid from the log that should classify the incident, or None."""
        svc = self.service
        catalog = getattr(getattr(svc, "rules", None), "catalog", None)
        inc = self._incident(target.incident_id)
        if catalog is None or inc is None:
            return None
        pcis = {normalize_pci(g.get("pci_bus_id", "")) for g in target.gpus} - {""}
        uuids = {g.get("uuid") for g in target.gpus} - {None, ""}
        best: Signal | None = None
        for e in evidence:
            code = e.get("xid")
            if not code:
                continue
            if pcis or uuids:  # a GPU-specific incident: only Xids of its GPUs count
                if e.get("pci") and e["pci"] not in pcis and not (e.get("gpu_uuid") in uuids):
                    continue
            sig = catalog.lookup(int(code)).signal(detail="from kernel log")
            if sig.severity == "info":
                continue
            rank = (_signal_rank(sig), not sig.fold_into_previous)
            if best is None or rank > (_signal_rank(best), not best.fold_into_previous):
                best = sig
        if best is None:
            return None
        if not inc.xids:
            return best
        if best.xid in inc.xids:
            return None
        current = inc.primary
        if current is None or _signal_rank(best) > _signal_rank(current):
            return best
        return None

    async def _kube(self, target: Target, attempt: int) -> None:
        assert self.kube is not None
        state = self._state.get(target.incident_id)
        if state is None:
            return
        try:
            ctx = await self.kube.node_context(target.node)
            pods = await self._pods_for(target, ctx)
        except KubeUnavailable as exc:
            self.counts["kube_unavailable"] += 1
            if target.node not in state.kube:  # keep what an earlier answer showed
                state.kube_failures[target.node] = exc.reason
                self._mark_dirty(target.incident_id)
                if attempt < len(self.settings.retry):
                    following = attempt + 1
                    self._later(self.settings.retry[attempt], lambda: self._retry_kube(target, following))
            return
        except Exception as exc:
            log.exception("Kubernetes enrichment failed for %s", target.incident_id)
            state.kube_failures[target.node] = describe_error(exc)
            self._mark_dirty(target.incident_id)
            return
        self.counts["kube_ok"] += 1
        state.kube[target.node] = {"node": ctx.node, "pods": pods, "events": ctx.events}
        state.kube_failures.pop(target.node, None)
        self._mark_dirty(target.incident_id)

    async def _pods_for(self, target: Target, ctx: NodeContext) -> list[dict[str, Any]]:
        """The pods dcgm labels named (with their GPUs), else every GPU pod on the node.

        A named pod that runs on the node without GPUs (the exporter's own pod, when the
        scrape did not honour labels) names nothing; a named pod no longer on the node is
        kept as a stub so people still see whose it was."""
        named = {k: v for k, v in target.pods.items() if k not in ctx.other_pods}
        if not named:
            return [dict(p) for p in ctx.pods]
        by_name = {(p["namespace"], p["name"]): p for p in ctx.pods}
        out = []
        for (ns, name), gpus in named.items():
            pod = by_name.get((ns, name))
            if pod is None:
                assert self.kube is not None
                pod = {"namespace": ns, "name": name, "node": target.node, "phase": "NotFound", "gpus": None,
                       "owner_chain": []}
                namespace = await self.kube.namespace(ns)
                team, channel = self.kube.team_and_channel([namespace] if namespace else [])
                if team:
                    pod["team"] = team
                if channel:
                    pod["channel"] = channel
            else:
                pod = dict(pod)
            if gpus:
                pod["gpu_devices"] = gpus
            out.append(pod)
        return out

    # ----- writing annotations -----

    def _incident(self, incident_id: str) -> Incident | None:
        engine = getattr(self.service, "engine", None)
        if engine is None:
            return None
        return engine.state.incidents.get(incident_id)

    def _mark_dirty(self, incident_id: str) -> asyncio.Future | None:
        state = self._state.get(incident_id)
        if state is None or self._closed or self.service is None:
            return None
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        state.waiters.append(fut)
        self._dirty[incident_id] = None
        if self._writer is None or self._writer.done():
            self._wake = asyncio.Event()
            self._writer = loop.create_task(self._write_loop(), name="alertd-enrich-writer")
        assert self._wake is not None
        self._wake.set()
        return fut

    async def _write_loop(self) -> None:
        assert self._wake is not None
        while not self._closed or self._dirty:
            await self._wake.wait()
            self._wake.clear()
            if self.settings.write_delay > 0 and not self._closed:
                await asyncio.sleep(self.settings.write_delay)
            while self._dirty:
                incident_id = next(iter(self._dirty))
                del self._dirty[incident_id]
                self._writing = True
                try:
                    await self._flush(incident_id)
                except Exception as exc:  # e.g. the store is failing: try again shortly
                    log.warning("could not write enrichment for %s, retrying: %s", incident_id, describe_error(exc))
                    self._later(2.0, lambda iid=incident_id: self._rewrite(iid))
                finally:
                    self._writing = False
            if self._closed:
                return

    async def _rewrite(self, incident_id: str) -> None:
        # After a failed commit the engine's memory may hold values the store lost: write them all again.
        self._force.add(incident_id)
        self._mark_dirty(incident_id)

    def values(self, incident_id: str) -> dict[str, Any]:
        """Annotation values computed from what enrichment found (None removes a key)."""
        state = self._state.get(incident_id)
        if state is None:
            return {}
        out: dict[str, Any] = {}
        s = self.settings
        if self.searcher is not None:
            entries = [e for n in state.nodes for e in state.evidence.get(n, [])]
            if entries or any(n in state.evidence for n in state.nodes):
                out[LOG_EVIDENCE] = _cap(sorted(entries, key=lambda e: e.get("time") or ""), s.max_evidence)
            failures = [state.log_failures[n] for n in state.nodes if n in state.log_failures]
            if not failures:
                out[LOGS_UNAVAILABLE] = None
            elif len(state.nodes) == 1:
                out[LOGS_UNAVAILABLE] = failures[0]
            else:
                out[LOGS_UNAVAILABLE] = f"{failures[-1]} ({len(failures)} of {len(state.nodes)} nodes)"
        if self.kube is not None:
            known = [n for n in state.nodes if n in state.kube]
            if known:
                if not state.fleet and len(state.nodes) == 1:
                    out[KUBE_NODE] = state.kube[known[0]]["node"]
                else:
                    out[KUBE_NODES] = [state.kube[n]["node"] for n in known]
                pods = [p for n in known for p in state.kube[n]["pods"]][: s.max_pods]
                out[PODS] = pods
                out[OWNERS] = owners_of(pods)
                events = sorted((e for n in known for e in state.kube[n]["events"]),
                                key=lambda e: e.get("time") or "", reverse=True)
                out[NODE_EVENTS] = events[: s.max_events]
            failures = [state.kube_failures[n] for n in state.nodes if n in state.kube_failures]
            out[KUBE_UNAVAILABLE] = (failures[0] if len(failures) == 1 else
                                     f"{failures[-1]} ({len(failures)} of {len(state.nodes)} nodes)") if failures else None
        return out

    async def _flush(self, incident_id: str) -> None:
        state = self._state.get(incident_id)
        if state is None:
            return
        waiters, state.waiters = state.waiters, []
        force = incident_id in self._force
        self._force.discard(incident_id)
        try:
            svc = self.service
            for key, value in self.values(incident_id).items():
                inc = self._incident(incident_id)
                if inc is None:
                    return
                current = inc.annotations.get(key)
                if value is None and key not in inc.annotations:
                    continue
                if value == current and not force:
                    continue
                await svc.annotate(incident_id, key, value, EVENT_KIND, self._describe(key, value, state))
                self.counts["writes"] += 1
            while state.signals:
                if self._incident(incident_id) is None:
                    break
                changes = await svc.add_evidence(incident_id, state.signals[0], SOURCE)
                state.signals.pop(0)
                if changes:
                    self.counts["upgrades"] += 1
        finally:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    @staticmethod
    def _describe(key: str, value: Any, state: _IncidentState) -> str:
        if key == LOG_EVIDENCE:
            xids = sorted({e["xid"] for e in value if e.get("xid")})
            hosts = sorted({e.get("host", "") for e in value} - {""})
            text = f"kernel log: {len(value)} line(s)" + (f" from {', '.join(hosts[:5])}" if hosts else "")
            return text + (f"; Xid {', '.join(map(str, xids))}" if xids else "")
        if key == LOGS_UNAVAILABLE:
            return f"kernel log unavailable: {value}" if value else "kernel log available again"
        if key == KUBE_UNAVAILABLE:
            return f"Kubernetes context unavailable: {value}" if value else "Kubernetes context available again"
        if key == OWNERS:
            parts = [f"{o['kind']} {o['namespace']}/{o['name']}" + (f" (team {o['team']})" if o.get("team") else "")
                     for o in value[:3]]
            return "owners: " + ("; ".join(parts) if parts else "no GPU workload on the node")
        if key == PODS:
            return f"{len(value)} GPU pod(s) on the node(s)"
        if key == KUBE_NODE:
            bits = [f"node {value.get('name', '')}: Ready={value.get('ready', '?')}"]
            if value.get("cordoned"):
                bits.append("cordoned" + (f" by {value['cordoned_by']}" if value.get("cordoned_by") else ""))
            return ", ".join(bits)
        if key == KUBE_NODES:
            return f"Kubernetes state of {len(value)} node(s)"
        if key == NODE_EVENTS:
            return f"{len(value)} recent node event(s)"
        return key


class _StatsCollector:
    """Exposes the searcher's and the Kubernetes client's counters on /metrics."""

    def __init__(self, enricher: Enricher):
        self.enricher = enricher

    def collect(self):  # pragma: no cover - exercised through /metrics
        from prometheus_client.core import CounterMetricFamily

        e = self.enricher
        if e.searcher is not None:
            s = e.searcher.stats
            fam = CounterMetricFamily("alertd_enrichment_log_queries", "Log queries by outcome.", labels=["outcome"])
            fam.add_metric(["cache_hit"], s.cache_hits)
            fam.add_metric(["joined"], s.joined)
            fam.add_metric(["searched"], s.searched)
            fam.add_metric(["failed"], s.failures)
            yield fam
            yield CounterMetricFamily("alertd_enrichment_log_requests", "Requests sent to the log backend.",
                                      value=e.searcher.backend.requests)
        if e.kube is not None:
            yield CounterMetricFamily("alertd_enrichment_kube_requests", "Kubernetes API requests.", value=e.kube.stats.calls)
            yield CounterMetricFamily("alertd_enrichment_kube_errors", "Failed Kubernetes API requests.",
                                      value=e.kube.stats.errors)


__all__ = ["Enricher", "EnrichSettings", "Target", "build_evidence"]
