"""Kubernetes context for a node: its state, the pods holding its GPUs, their owners, recent events.

Only reads: ``get`` nodes/namespaces/owner objects, ``list`` pods (by
``spec.nodeName``) and events (by ``involvedObject``). The requests, their cache
and credentials live in :mod:`alertd.enrich.kube_api`; owner chains and
team/channel attribution in :mod:`alertd.enrich.kube_owners`. This module reads
the node and its pods and shapes them the way the incident annotations use them.
"""
from __future__ import annotations

import asyncio
import fnmatch
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alertd.enrich.kube_api import KubeUnavailable, NotFound, meta
from alertd.enrich.kube_owners import KubeOwners
from alertd.core.model import parse_iso

log = logging.getLogger(__name__)


@dataclass(slots=True)
class NodeContext:
    """What Kubernetes knows about one node, in the shapes the incident annotations use."""

    node: dict[str, Any]
    pods: list[dict[str, Any]]  # GPU pods on the node, each with owner_chain, team, channel
    events: list[dict[str, Any]]
    fetched_at: datetime
    other_pods: frozenset[tuple[str, str]] = frozenset()  # (namespace, name) of pods on the node without GPUs


class KubeContext(KubeOwners):
    """Node context for the enricher: :meth:`node_context` is what it calls (cached per node)."""

    def applies_to(self, cluster: str) -> bool:
        return not self.settings.cluster or not cluster or cluster == self.settings.cluster

    async def node_context(self, node: str) -> NodeContext:
        """The node, its GPU pods with their owners, and its recent events (cached per node)."""
        return await self._cached(("node-context", node), self.settings.cache_ttl, lambda: self._node_context(node))

    async def _node_context(self, node: str) -> NodeContext:
        node_task = asyncio.ensure_future(self._get("CoreV1Api", "read_node", node))
        pods_task = asyncio.ensure_future(self._get("CoreV1Api", "list_pod_for_all_namespaces",
                                                    field_selector=f"spec.nodeName={node},status.phase!=Succeeded"))
        events_task = asyncio.ensure_future(self._get(
            "CoreV1Api", "list_event_for_all_namespaces",
            field_selector=f"involvedObject.kind=Node,involvedObject.name={node}"))
        results = await asyncio.gather(node_task, pods_task, events_task, return_exceptions=True)
        node_obj, pods_list, events_list = results
        if isinstance(node_obj, NotFound):
            node_info: dict[str, Any] = {"name": node, "missing": True}
        elif isinstance(node_obj, BaseException):
            for r in results[1:]:
                if isinstance(r, BaseException) and not isinstance(r, (KubeUnavailable, NotFound)):
                    log.debug("kube request failed: %r", r)
            raise node_obj if isinstance(node_obj, KubeUnavailable) else KubeUnavailable(str(node_obj))
        else:
            node_info = self.describe_node(node_obj)
        if isinstance(pods_list, BaseException):
            raise pods_list if isinstance(pods_list, KubeUnavailable) else KubeUnavailable(str(pods_list))
        items = pods_list.get("items") or []
        gpu_pods = [p for p in items if self.gpu_count(p)[0] > 0]
        others = frozenset((meta(p).get("namespace", ""), meta(p).get("name", "")) for p in items
                           if self.gpu_count(p)[0] == 0)
        gpu_pods.sort(key=lambda p: (self._phase(p) not in ("Running", "Pending"), meta(p).get("namespace", ""),
                                     meta(p).get("name", "")))
        gpu_pods = gpu_pods[: self.settings.max_pods]
        described = await asyncio.gather(*(self._describe_pod(p, node) for p in gpu_pods))
        events = [] if isinstance(events_list, BaseException) else self.describe_events(events_list, node)
        if isinstance(events_list, BaseException) and not isinstance(events_list, NotFound):
            log.info("node events for %s unavailable: %s", node, events_list)
        return NodeContext(node=node_info, pods=list(described), events=events, fetched_at=self.now(),
                           other_pods=others)

    async def namespace_pods(self, ns: str, limit: int) -> list[dict[str, Any]]:
        """The unfinished pods of a namespace (a job's gang is found among them; cached like a node's)."""
        listed = await self._cached(("namespace-pods", ns), self.settings.cache_ttl, lambda: self._get(
            "CoreV1Api", "list_namespaced_pod", ns, field_selector="status.phase!=Succeeded", limit=limit))
        return list(listed.get("items") or [])

    async def list_nodes(self, limit: int, token: str = "") -> dict[str, Any]:
        """One page of the cluster's nodes (fleet size samples; never cached)."""
        extra = {"_continue": token} if token else {}
        return await self._get("CoreV1Api", "list_node", limit=limit, **extra)

    @staticmethod
    def _phase(pod: dict[str, Any]) -> str:
        if meta(pod).get("deletionTimestamp"):
            return "Terminating"
        return str((pod.get("status") or {}).get("phase", "Unknown"))

    def gpu_count(self, pod: dict[str, Any]) -> tuple[int, dict[str, int]]:
        """GPUs (and MIG slices) the pod holds: per resource, limits (else requests), containers summed,
        init containers counted as the max they need at once."""

        def per_container(c: dict[str, Any]) -> dict[str, int]:
            res = c.get("resources") or {}
            merged = dict(res.get("requests") or {})
            merged.update(res.get("limits") or {})
            out: dict[str, int] = {}
            for name, value in merged.items():
                if any(fnmatch.fnmatchcase(name, pat) for pat in self.settings.gpu_resources):
                    try:
                        out[name] = int(float(str(value)))
                    except ValueError:
                        continue
            return out

        spec = pod.get("spec") or {}
        total: dict[str, int] = {}
        for c in spec.get("containers") or []:
            for k, v in per_container(c).items():
                total[k] = total.get(k, 0) + v
        for c in spec.get("initContainers") or []:
            for k, v in per_container(c).items():
                total[k] = max(total.get(k, 0), v)
        total = {k: v for k, v in total.items() if v > 0}
        return sum(total.values()), total

    def describe_node(self, obj: dict[str, Any]) -> dict[str, Any]:
        m, spec, status = meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        labels = m.get("labels") or {}

        def first(keys: tuple[str, ...]) -> str:
            return next((labels[k] for k in keys if labels.get(k)), "")

        conditions = []
        ready = "Unknown"
        for c in status.get("conditions") or []:
            entry = {"type": c.get("type", ""), "status": c.get("status", ""), "reason": c.get("reason", ""),
                     "since": c.get("lastTransitionTime", "")}
            healthy = (c.get("type") == "Ready") == (c.get("status") == "True")
            if not healthy and c.get("message"):
                entry["message"] = str(c["message"])[:300]
            if c.get("type") == "Ready":
                ready = c.get("status", "Unknown")
            conditions.append(entry)
        taints = [{k: t[k] for k in ("key", "value", "effect", "timeAdded") if t.get(k)} for t in spec.get("taints") or []]
        cordoned = bool(spec.get("unschedulable"))
        out: dict[str, Any] = {
            "name": m.get("name", ""),
            "cordoned": cordoned,
            "ready": ready,
            "conditions": conditions,
            "taints": taints,
            "pool": first(self.settings.pool_labels),
            "instance_type": first(self.settings.instance_type_labels),
            "gpu_product": first(self.settings.gpu_product_labels),
        }
        capacity = status.get("capacity") or {}
        allocatable = status.get("allocatable") or {}
        if capacity.get("nvidia.com/gpu") not in (None, "0"):
            out["gpus"] = {"capacity": capacity.get("nvidia.com/gpu"), "allocatable": allocatable.get("nvidia.com/gpu")}
        mig = {k: v for k, v in capacity.items()
               if k != "nvidia.com/gpu" and v not in ("0", 0)
               and any(fnmatch.fnmatchcase(k, pat) for pat in self.settings.gpu_resources)}
        if mig:
            out["mig"] = mig
        if cordoned:
            by, at = self._cordon_origin(obj)
            if by:
                out["cordoned_by"] = by
            if at:
                out["cordoned_at"] = at
        return {k: v for k, v in out.items() if v not in ("", None)}

    @staticmethod
    def _cordon_origin(obj: dict[str, Any]) -> tuple[str, str]:
        """Who set spec.unschedulable and when: the managedFields entry owning it, else the
        unschedulable taint's timeAdded."""
        best: tuple[str, str] = ("", "")
        for mf in meta(obj).get("managedFields") or []:
            fields = mf.get("fieldsV1") or {}
            if "f:unschedulable" in (fields.get("f:spec") or {}):
                when = mf.get("time", "")
                if not best[0] or when > best[1]:
                    best = (mf.get("manager", ""), when)
        if not best[1]:
            for t in (obj.get("spec") or {}).get("taints") or []:
                if t.get("key") == "node.kubernetes.io/unschedulable" and t.get("timeAdded"):
                    best = (best[0], t["timeAdded"])
        return best

    def describe_events(self, body: dict[str, Any], node: str) -> list[dict[str, Any]]:
        cutoff = self.now() - self.settings.events_window
        out = []
        for ev in body.get("items") or []:
            when = (ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
                    or meta(ev).get("creationTimestamp"))
            try:
                ts = parse_iso(when) if when else None
            except ValueError:
                ts = None
            if ts is not None and ts < cutoff:
                continue
            source = ev.get("source") or {}
            out.append({
                "node": node,
                "time": when or "",
                "type": ev.get("type", ""),
                "reason": ev.get("reason", ""),
                "message": str(ev.get("message", ""))[:300],
                "source": source.get("component") or ev.get("reportingComponent") or ev.get("reportingController") or "",
                "count": ev.get("count") or (ev.get("series") or {}).get("count") or 1,
            })
        out.sort(key=lambda e: e["time"], reverse=True)
        return out[: self.settings.max_events]

    async def _describe_pod(self, pod: dict[str, Any], node: str) -> dict[str, Any]:
        m = meta(pod)
        ns, name = m.get("namespace", ""), m.get("name", "")
        count, resources = self.gpu_count(pod)
        chain, objects = await self.owner_chain(ns, pod)
        namespace = await self.namespace(ns)
        # The most specific owner first: the top of the chain names the workload people know.
        team, channel = self.team_and_channel(list(reversed(objects)) + ([namespace] if namespace else []))
        out: dict[str, Any] = {
            "namespace": ns,
            "name": name,
            "node": node,
            "phase": self._phase(pod),
            "gpus": count,
            "owner_chain": chain,
        }
        if set(resources) - {"nvidia.com/gpu"}:
            out["gpu_resources"] = resources
        if team:
            out["team"] = team
        if channel:
            out["channel"] = channel
        started = (pod.get("status") or {}).get("startTime")
        if started:
            out["started"] = started
        return out


__all__ = ["KubeContext", "NodeContext"]
