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
from alertd.core.json_types import JSONObject, as_object, each, integer, objects, string_map, text
from alertd.core.kube_findings import KubeNode, NodeCondition, NodeEvent, Pod, Taint
from alertd.enrich.kube_api import KubeUnavailable, NotFound, metadata
from alertd.enrich.kube_owners import KubeOwners
from alertd.core.model import parse_iso

log = logging.getLogger(__name__)


@dataclass(slots=True)
class NodeContext:
    """What Kubernetes knows about one node, in the shapes the incident annotations use."""

    node: KubeNode
    pods: list[Pod]  # GPU pods on the node, each with owner_chain, team, channel
    events: list[NodeEvent]
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
        # resourceVersion "0": answered from the API server's watch cache, where pods are indexed by node, as
        # the kubelet asks. Without it every list is a consistent read, which a server that cannot serve
        # those from its cache answers from etcd by reading every pod of the cluster: 9 s per node with
        # 20,000 pods (bench/storm_scale.py), a storm's square for the API server.
        pods_task = asyncio.ensure_future(self._get("CoreV1Api", "list_pod_for_all_namespaces", resource_version="0",
                                                    field_selector=f"spec.nodeName={node},status.phase!=Succeeded"))
        events_task = asyncio.ensure_future(self._get(
            "CoreV1Api", "list_event_for_all_namespaces", resource_version="0",
            field_selector=f"involvedObject.kind=Node,involvedObject.name={node}"))
        results = await asyncio.gather(node_task, pods_task, events_task, return_exceptions=True)
        node_obj, pods_list, events_list = results
        if isinstance(node_obj, NotFound):
            node_info = KubeNode(node, missing=True)
        elif isinstance(node_obj, BaseException):
            for r in results[1:]:
                if isinstance(r, BaseException) and not isinstance(r, (KubeUnavailable, NotFound)):
                    log.debug("kube request failed: %r", r)
            raise node_obj if isinstance(node_obj, KubeUnavailable) else KubeUnavailable(str(node_obj))
        else:
            node_info = self.describe_node(node_obj)
        if isinstance(pods_list, BaseException):
            raise pods_list if isinstance(pods_list, KubeUnavailable) else KubeUnavailable(str(pods_list))
        gpu_pods: list[JSONObject] = []
        others: set[tuple[str, str]] = set()
        for p in objects(pods_list.get("items")):  # every pod of the node: each is counted once
            if self.gpu_count(p)[0] > 0:
                gpu_pods.append(p)
            else:
                others.add((text(metadata(p), "namespace"), text(metadata(p), "name")))
        gpu_pods.sort(key=lambda p: (self._phase(p) not in ("Running", "Pending"), text(metadata(p), "namespace"),
                                     text(metadata(p), "name")))
        gpu_pods = gpu_pods[: self.settings.max_pods]
        described = await asyncio.gather(*(self._describe_pod(p, node) for p in gpu_pods))
        events = [] if isinstance(events_list, BaseException) else self.describe_events(events_list, node)
        if isinstance(events_list, BaseException) and not isinstance(events_list, NotFound):
            log.info("node events for %s unavailable: %s", node, events_list)
        return NodeContext(node=node_info, pods=list(described), events=events, fetched_at=self.now(),
                           other_pods=frozenset(others))

    async def namespace_pods(self, ns: str, limit: int) -> list[JSONObject]:
        """The unfinished pods of a namespace (a job's gang is found among them; cached like a node's)."""
        listed = await self._cached(("namespace-pods", ns), self.settings.cache_ttl, lambda: self._get(
            "CoreV1Api", "list_namespaced_pod", ns, field_selector="status.phase!=Succeeded", limit=limit))
        return objects(listed.get("items"))

    async def list_nodes(self, limit: int, token: str = "") -> JSONObject:
        """One page of the cluster's nodes (fleet size samples; never cached)."""
        extra = {"_continue": token} if token else {}
        return await self._get("CoreV1Api", "list_node", limit=limit, **extra)

    @staticmethod
    def _phase(pod: JSONObject) -> str:
        if metadata(pod).get("deletionTimestamp"):
            return "Terminating"
        return text(as_object(pod.get("status")), "phase", "Unknown")

    def gpu_count(self, pod: JSONObject) -> tuple[int, dict[str, int]]:
        """GPUs (and MIG slices) the pod holds: per resource, limits (else requests), containers summed,
        init containers counted as the max they need at once."""

        def per_container(c: JSONObject) -> dict[str, int]:
            res = as_object(c.get("resources"))
            merged = string_map(res.get("requests"))
            merged.update(string_map(res.get("limits")))
            out: dict[str, int] = {}
            for name, value in merged.items():
                if any(fnmatch.fnmatchcase(name, pat) for pat in self.settings.gpu_resources):
                    try:
                        out[name] = int(float(value))
                    except ValueError:
                        continue
            return out

        spec = as_object(pod.get("spec"))
        total: dict[str, int] = {}
        for c in objects(spec.get("containers")):
            for k, v in per_container(c).items():
                total[k] = total.get(k, 0) + v
        for c in objects(spec.get("initContainers")):
            for k, v in per_container(c).items():
                total[k] = max(total.get(k, 0), v)
        total = {k: v for k, v in total.items() if v > 0}
        return sum(total.values()), total

    def describe_node(self, obj: JSONObject) -> KubeNode:
        m, spec, status = metadata(obj), as_object(obj.get("spec")), as_object(obj.get("status"))
        labels = string_map(m.get("labels"))

        def first(keys: tuple[str, ...]) -> str:
            return next((labels[k] for k in keys if labels.get(k)), "")

        conditions = []
        ready = "Unknown"
        for c in objects(status.get("conditions")):
            kind, state = text(c, "type"), text(c, "status")
            healthy = (kind == "Ready") == (state == "True")
            conditions.append(NodeCondition(kind, state, text(c, "reason"), text(c, "lastTransitionTime"),
                                            "" if healthy else text(c, "message")[:300]))
            if kind == "Ready":
                ready = text(c, "status", "Unknown")
        taints = each(Taint.from_json, spec.get("taints"))  # the API's keys are the finding's
        cordoned = bool(spec.get("unschedulable"))
        capacity, allocatable = string_map(status.get("capacity")), string_map(status.get("allocatable"))
        has_gpus = capacity.get("nvidia.com/gpu") not in (None, "0")
        mig = tuple((k, v) for k, v in capacity.items()
                    if k != "nvidia.com/gpu" and v != "0"
                    and any(fnmatch.fnmatchcase(k, pat) for pat in self.settings.gpu_resources))
        by, at = self._cordon_origin(obj) if cordoned else ("", "")
        return KubeNode(name=text(m, "name"), cordoned=cordoned, ready=ready, conditions=tuple(conditions),
                        taints=taints, pool=first(self.settings.pool_labels),
                        instance_type=first(self.settings.instance_type_labels),
                        gpu_product=first(self.settings.gpu_product_labels),
                        gpu_capacity=capacity.get("nvidia.com/gpu") if has_gpus else None,
                        gpu_allocatable=allocatable.get("nvidia.com/gpu") if has_gpus else None,
                        mig=mig, cordoned_by=by, cordoned_at=at)

    @staticmethod
    def _cordon_origin(obj: JSONObject) -> tuple[str, str]:
        """Who set spec.unschedulable and when: the managedFields entry owning it, else the
        unschedulable taint's timeAdded."""
        best: tuple[str, str] = ("", "")
        for mf in objects(metadata(obj).get("managedFields")):
            fields = as_object(mf.get("fieldsV1"))
            if "f:unschedulable" in as_object(fields.get("f:spec")):
                when = text(mf, "time")
                if not best[0] or when > best[1]:
                    best = (text(mf, "manager"), when)
        if not best[1]:
            for t in objects(as_object(obj.get("spec")).get("taints")):
                if t.get("key") == "node.kubernetes.io/unschedulable" and t.get("timeAdded"):
                    best = (best[0], text(t, "timeAdded"))
        return best

    def describe_events(self, body: JSONObject, node: str) -> list[NodeEvent]:
        cutoff = self.now() - self.settings.events_window
        out = []
        for ev in objects(body.get("items")):
            when = (text(ev, "lastTimestamp") or text(ev, "eventTime") or text(ev, "firstTimestamp")
                    or text(metadata(ev), "creationTimestamp"))
            try:
                ts = parse_iso(when) if when else None
            except ValueError:
                ts = None
            if ts is not None and ts < cutoff:
                continue
            out.append(NodeEvent(
                node=node, time=when, type=text(ev, "type"), reason=text(ev, "reason"),
                message=text(ev, "message")[:300],
                source=(text(as_object(ev.get("source")), "component") or text(ev, "reportingComponent")
                        or text(ev, "reportingController")),
                count=integer(ev, "count") or integer(as_object(ev.get("series")), "count") or 1))
        out.sort(key=lambda e: e.time, reverse=True)
        return out[: self.settings.max_events]

    async def _describe_pod(self, pod: JSONObject, node: str) -> Pod:
        m = metadata(pod)
        ns, name = text(m, "namespace"), text(m, "name")
        count, resources = self.gpu_count(pod)
        chain, read = await self.owner_chain(ns, pod)
        namespace = await self.namespace(ns)
        # The most specific owner first: the top of the chain names the workload people know.
        team, channel = self.team_and_channel(list(reversed(read)) + ([namespace] if namespace else []))
        return Pod(namespace=ns, name=name, node=node, phase=self._phase(pod), gpus=count, owner_chain=tuple(chain),
                   gpu_resources=tuple(resources.items()) if set(resources) - {"nvidia.com/gpu"} else (),
                   team=team, channel=channel, started=text(as_object(pod.get("status")), "startTime"))


__all__ = ["KubeContext", "NodeContext"]
