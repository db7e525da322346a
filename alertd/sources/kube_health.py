"""Kubernetes' own GPU health signals as a source: node conditions and Events, watched, stored as webhooks.

Runs on the elected engine only (a leader part, alertd/app/leadership.py): two list-then-watch
loops (alertd/sources/kube_watch.py), Nodes and Warning Events, whose objects become alerts
(alertd/sources/kube_alerts.py, admission.py) appended to the inbox log exactly as an Alertmanager
webhook is, so receive -> normalize -> classify stays one path. A relist, a restart or a second
replica reads the same objects again and makes the same delivery keys: the engine drops the copies.

Memory: per node, the alerts its watched conditions raised and whether it is Ready; per node with
recent rejections, at most ``max_pods`` pods; a bounded cache of pods' jobs. Events are not kept.
"""
from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Awaitable, Callable, Protocol

from alertd.core.json_types import JSONObject
from alertd.core.kube_objects import Event, Node, Pod, as_event, as_node, as_pod
from alertd.core.model import iso, parse_iso
from alertd.receive.payload import encode_webhook, read_notification
from alertd.rules.kube_health import KubeHealthRules
from alertd.sources.admission import AdmissionTracker
from alertd.sources.kube_alerts import (Raised, Wire, condition_changes, event_alerts, event_node, event_rule,
                                        event_time, is_fresh, node_conditions, node_ready)
from alertd.sources.kube_watch import StreamsApi, Watch, WatchStatus
from alertd.sources.settings import KubeHealthSettings

log = logging.getLogger(__name__)
RECEIVER = "kube-health"
JOB_CACHE = 4096  # pods whose job is remembered
JOB_LABELS = ("batch.kubernetes.io/job-name", "job-name", "training.kubeflow.org/job-name", "app.kubernetes.io/instance")


class Receives(Protocol):
    """Where the alerts go: the same append an Alertmanager webhook takes (Service.receive)."""

    async def __call__(self, body: bytes, alerts: int, received_at: datetime | None = None) -> int: ...


class KubeHealthSource:
    name = "kube-health"

    def __init__(self, settings: KubeHealthSettings, rules: Callable[[], KubeHealthRules], api: StreamsApi,
                 receive: Receives, *, clock: Callable[[], datetime],
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.settings, self.rules, self.api, self.receive = settings, rules, api, receive
        self.clock, self.sleep = clock, sleep
        self.nodes_status = WatchStatus("kube-health nodes")
        self.events_status = WatchStatus("kube-health events")
        self.raised: dict[str, dict[str, Raised | None]] = {}  # node -> condition type -> its alert (None: healthy)
        self.ready: dict[str, bool | None] = {}
        self.jobs: OrderedDict[tuple[str, str], str] = OrderedDict()
        rule = rules().admission
        self.admission = AdmissionTracker(rule, settings.cluster) if rule is not None else None
        self.stored = 0  # alerts appended to the inbox

    # ----- the leader part -----

    async def run(self) -> None:
        """Both watches and the admission timer, until cancelled (leadership lost, shutdown). Each run starts
        from nothing: an alert remembered from an earlier run may never have been stored (a run cancelled while
        its append was retried), so the first list raises every bad condition again; the engine drops copies."""
        self.raised.clear()
        self.ready.clear()
        if self.admission is not None:
            self.admission.bursts.clear()
        nodes = Watch(self.api, "CoreV1Api", "list_node", NodeHandler(self), self.nodes_status, sleep=self.sleep)
        events = Watch(self.api, "CoreV1Api", "list_event_for_all_namespaces", EventHandler(self), self.events_status,
                       field_selector="type=Warning", sleep=self.sleep)
        tasks = [asyncio.create_task(nodes.run(), name="alertd-kube-nodes"),
                 asyncio.create_task(events.run(), name="alertd-kube-events"),
                 asyncio.create_task(self._tick(), name="alertd-kube-admission")]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.nodes_status.up = self.events_status.up = False

    async def _tick(self) -> None:
        while True:
            await self.sleep(1.0)
            await self.admission_due()

    async def admission_due(self) -> None:
        if self.admission is not None:
            await self.emit(self.admission.due(self.clock(), self.ready))

    def statuses(self) -> tuple[WatchStatus, WatchStatus]:
        return self.nodes_status, self.events_status

    def failure(self, now: float) -> str:
        """Why /readyz should fail: a watch broken for longer than ``unready_after`` ("" when none is)."""
        limit = self.settings.unready_after
        for s in self.statuses():
            if limit and s.failing_since is not None and now - s.failing_since >= limit:
                return f"{s.name} watch failing: {s.error}"
        return ""

    # ----- into the inbox -----

    async def emit(self, alerts: list[Wire]) -> None:
        """Append the alerts as one webhook, checked as any webhook is; retried until stored (the watch waits)."""
        if not alerts:
            return
        body = encode_webhook(alerts, RECEIVER)
        read_notification(body, self.clock(), build=False)  # the receive path's own check: BadPayload is a bug here
        delay = 0.5
        while True:
            try:
                await self.receive(body, len(alerts), self.clock())
                self.stored += len(alerts)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # StoreUnavailable, a full backlog: nothing is lost, the watch waits
                log.warning("kube-health: %d alerts not stored yet (%s); retrying in %.1fs", len(alerts), exc, delay)
                await self.sleep(delay)
                delay = min(delay * 2, 30.0)

    # ----- nodes -----

    async def node_seen(self, node: Node) -> None:
        """A node listed or changed: alerts for its watched conditions that changed since it was last seen (all
        its bad ones when it was never seen: a first list, a new leader; the engine drops what it has)."""
        name = str((node.get("metadata") or {}).get("name") or "")
        now = node_conditions(node, self.rules(), self.settings.cluster)
        before = self.raised.get(name)
        self.raised[name] = now
        self.ready[name] = node_ready(node)
        await self.emit(condition_changes(before, now, iso(self.clock())))

    async def node_gone(self, name: str) -> None:
        before = self.raised.pop(name, None)
        self.ready.pop(name, None)
        await self.emit(condition_changes(before, {}, iso(self.clock())))

    # ----- events -----

    async def event_seen(self, event: Event) -> None:
        if not is_fresh(event, self.clock(), timedelta(seconds=self.settings.max_event_age)):
            return
        rules = self.rules()
        if (rule := event_rule(event, rules)) is not None:
            await self.emit(event_alerts(rule, event, self.settings.cluster))
            return
        adm = rules.admission
        if adm is None or not adm.matches(str(event.get("reason") or ""), str(event.get("message") or "")):
            return
        if self.admission is None or self.admission.rule is not adm:  # the first, or rules reloaded
            self.admission = self.admission or AdmissionTracker(adm, self.settings.cluster)
            self.admission.rule = adm
        obj = event.get("involvedObject") or {}
        if obj.get("kind") != "Pod":
            return
        ns, pod = str(obj.get("namespace") or ""), str(obj.get("name") or "")
        node, job = event_node(event), await self.job_of(ns, pod)
        if not node:
            return
        at = parse_iso(event_time(event)) or self.clock()
        self.admission.rejected(node, f"{ns}/{pod}", job, at, str(event.get("message") or ""))

    async def job_of(self, namespace: str, pod: str) -> str:
        """The pod's job (``namespace/name``): a job label, else its controller, else the pod itself."""
        key = (namespace, pod)
        if (job := self.jobs.get(key)) is not None:
            return job
        try:
            obj = as_pod(await self.api.read("CoreV1Api", "read_namespaced_pod", pod, namespace))
        except Exception:  # gone already, or not readable: the pod stands for its job
            obj = {}
        job = f"{namespace}/{job_name(obj) or pod}"
        self.jobs[key] = job
        while len(self.jobs) > JOB_CACHE:
            self.jobs.popitem(last=False)
        return job


def job_name(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    for name in JOB_LABELS:
        if labels.get(name):
            return str(labels[name])
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    return str(owner.get("name") or "") if owner else ""


class NodeHandler:
    def __init__(self, source: KubeHealthSource):
        self.source = source

    async def relisted(self, items: list[JSONObject]) -> None:
        names = set()
        for node in map(as_node, items):
            names.add(str((node.get("metadata") or {}).get("name") or ""))
            await self.source.node_seen(node)
        for gone in set(self.source.raised) - names:  # deleted while the watch was down
            await self.source.node_gone(gone)

    async def changed(self, kind: str, obj: JSONObject) -> None:
        node = as_node(obj)
        if kind == "DELETED":
            await self.source.node_gone(str((node.get("metadata") or {}).get("name") or ""))
        else:
            await self.source.node_seen(node)


class EventHandler:
    def __init__(self, source: KubeHealthSource):
        self.source = source

    async def relisted(self, items: list[JSONObject]) -> None:
        for event in map(as_event, items):
            await self.source.event_seen(event)

    async def changed(self, kind: str, obj: JSONObject) -> None:
        if kind in ("ADDED", "MODIFIED"):
            await self.source.event_seen(as_event(obj))


__all__ = ["KubeHealthSource", "RECEIVER", "job_name"]
