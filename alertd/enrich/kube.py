"""Kubernetes context for a node: its state, the pods holding its GPUs, their owners, recent events.

Through kubernetes_asyncio (a kubeconfig file, or the in-cluster service account).
Only reads: ``get`` nodes/namespaces/owner objects, ``list`` pods (by
``spec.nodeName``) and events (by ``involvedObject``). Typed APIs are called
with ``_preload_content=False`` and answered as plain JSON dicts (camelCase, as
the API server sends them): no model deserialisation on the hot path.

Owner chains follow ``ownerReferences`` with ``controller: true`` up to the
top (Pod -> ReplicaSet -> Deployment, Pod -> Job -> JobSet/CronJob, Pod ->
PyTorchJob / MPIJob / RayCluster ...); built-in kinds use their typed API,
everything else CustomObjectsApi with the group/version from ``apiVersion``
and the plural from ``owner_plurals`` (default: lower-case kind + ``s``).

Everything is cached with a TTL and fetched once at a time per key, so a
storm of alerts on one node costs one round of API calls.
"""
from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable

from alertd.durations import parse_duration
from alertd.model import parse_iso

log = logging.getLogger(__name__)

DEFAULT_POOL_LABELS = (
    "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool", "agentpool", "node-pool", "nodepool", "pool",
)
DEFAULT_INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
DEFAULT_GPU_PRODUCT_LABELS = ("nvidia.com/gpu.product",)


class KubeUnavailable(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NotFound(Exception):
    pass


@dataclass(frozen=True, slots=True)
class KubeSettings:
    enabled: bool = True
    kubeconfig: str = ""
    context: str = ""
    in_cluster: bool | None = None  # None: in-cluster when KUBERNETES_SERVICE_HOST is set and no kubeconfig
    cluster: str = ""  # only incidents of this cluster ("" = every incident)
    timeout: float = 5.0
    concurrency: int = 8
    cache_ttl: float = 30.0
    owner_cache_ttl: float = 300.0
    team_labels: tuple[str, ...] = ("team", "owner", "app.kubernetes.io/part-of")
    channel_annotations: tuple[str, ...] = ("alertd.io/slack-channel", "alertd.dev/slack-channel")
    pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS
    instance_type_labels: tuple[str, ...] = DEFAULT_INSTANCE_TYPE_LABELS
    gpu_product_labels: tuple[str, ...] = DEFAULT_GPU_PRODUCT_LABELS
    gpu_resources: tuple[str, ...] = ("nvidia.com/gpu", "nvidia.com/mig-*")
    events_window: timedelta = timedelta(hours=1)
    max_events: int = 20
    max_pods: int = 50
    max_owner_depth: int = 6
    owner_plurals: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> "KubeSettings":
        doc = doc or {}
        d = cls()
        return cls(
            enabled=doc.get("enabled", True),
            kubeconfig=doc.get("kubeconfig", ""),
            context=doc.get("context", ""),
            in_cluster=doc.get("in_cluster"),
            cluster=doc.get("cluster", ""),
            timeout=parse_duration(doc.get("timeout", "5s")).total_seconds(),
            concurrency=int(doc.get("concurrency", d.concurrency)),
            cache_ttl=parse_duration(doc.get("cache_ttl", "30s")).total_seconds(),
            owner_cache_ttl=parse_duration(doc.get("owner_cache_ttl", "5m")).total_seconds(),
            team_labels=tuple(doc.get("team_labels", d.team_labels)),
            channel_annotations=tuple(doc.get("channel_annotations", d.channel_annotations)),
            pool_labels=tuple(doc.get("pool_labels", d.pool_labels)),
            instance_type_labels=tuple(doc.get("instance_type_labels", d.instance_type_labels)),
            gpu_product_labels=tuple(doc.get("gpu_product_labels", d.gpu_product_labels)),
            gpu_resources=tuple(doc.get("gpu_resources", d.gpu_resources)),
            events_window=parse_duration(doc.get("events_window", "1h")),
            max_events=int(doc.get("max_events", d.max_events)),
            max_pods=int(doc.get("max_pods", d.max_pods)),
            max_owner_depth=int(doc.get("max_owner_depth", d.max_owner_depth)),
            owner_plurals=dict(doc.get("owner_plurals") or {}),
        )


@dataclass(slots=True)
class NodeContext:
    """What Kubernetes knows about one node, in the shapes the incident annotations use."""

    node: dict[str, Any]
    pods: list[dict[str, Any]]  # GPU pods on the node, each with owner_chain, team, channel
    events: list[dict[str, Any]]
    fetched_at: datetime
    other_pods: frozenset[tuple[str, str]] = frozenset()  # (namespace, name) of pods on the node without GPUs


@dataclass(slots=True)
class KubeStats:
    calls: int = 0  # API requests sent
    cache_hits: int = 0
    errors: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "cache_hits": self.cache_hits, "errors": self.errors}


# Built-in owner kinds: apiVersion group -> kind -> (API class, method).
_TYPED = {
    ("apps", "ReplicaSet"): ("AppsV1Api", "read_namespaced_replica_set"),
    ("apps", "Deployment"): ("AppsV1Api", "read_namespaced_deployment"),
    ("apps", "StatefulSet"): ("AppsV1Api", "read_namespaced_stateful_set"),
    ("apps", "DaemonSet"): ("AppsV1Api", "read_namespaced_daemon_set"),
    ("batch", "Job"): ("BatchV1Api", "read_namespaced_job"),
    ("batch", "CronJob"): ("BatchV1Api", "read_namespaced_cron_job"),
    ("", "ReplicationController"): ("CoreV1Api", "read_namespaced_replication_controller"),
}


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    refs = _meta(obj).get("ownerReferences") or []
    for ref in refs:
        if ref.get("controller"):
            return ref
    return None


def split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class KubeContext:
    def __init__(self, settings: KubeSettings, api_client: Any = None, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] | None = None):
        # The generated client is a large module: import it now, not on the event loop at the first alert.
        import kubernetes_asyncio.client  # noqa: F401
        import kubernetes_asyncio.config  # noqa: F401

        self.settings = settings
        self._api_client = api_client
        self._own_client = api_client is None
        self._client_lock = asyncio.Lock()
        self._apis: dict[str, Any] = {}
        self.monotonic = monotonic
        self.now = now or (lambda: datetime.now(timezone.utc))
        self.stats = KubeStats()
        self._sem = asyncio.Semaphore(max(1, settings.concurrency))
        self._cache: dict[tuple, tuple[float, Any]] = {}
        self._inflight: dict[tuple, asyncio.Future] = {}

    # ----- client -----

    async def client(self) -> Any:
        if self._api_client is not None:
            return self._api_client
        async with self._client_lock:
            if self._api_client is None:
                from kubernetes_asyncio import client, config

                conf = client.Configuration()
                s = self.settings
                in_cluster = s.in_cluster
                if in_cluster is None:
                    in_cluster = not s.kubeconfig and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
                try:
                    if in_cluster:
                        config.load_incluster_config(client_configuration=conf)
                    else:
                        await config.load_kube_config(config_file=s.kubeconfig or None, context=s.context or None,
                                                      client_configuration=conf, persist_config=False)
                except Exception as exc:
                    raise KubeUnavailable(f"no Kubernetes credentials: {exc}") from exc
                self._api_client = client.ApiClient(configuration=conf)
        return self._api_client

    async def _api(self, name: str) -> Any:
        api = self._apis.get(name)
        if api is None:
            from kubernetes_asyncio import client

            api = self._apis[name] = getattr(client, name)(await self.client())
        return api

    async def _get(self, api_name: str, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """One API request answered as a JSON dict; NotFound on 404, KubeUnavailable otherwise."""
        api = await self._api(api_name)
        async with self._sem:
            self.stats.calls += 1
            try:
                resp = await asyncio.wait_for(
                    getattr(api, method)(*args, _preload_content=False, _request_timeout=self.settings.timeout, **kwargs),
                    self.settings.timeout + 1)
            except asyncio.TimeoutError:
                self.stats.errors += 1
                raise KubeUnavailable(f"Kubernetes API: no answer within {self.settings.timeout:g}s") from None
            except KubeUnavailable:
                raise
            except Exception as exc:
                self.stats.errors += 1
                raise KubeUnavailable(f"Kubernetes API: {type(exc).__name__}: {exc}"[:200]) from exc
            try:
                raw = await resp.read()
                status = resp.status
            except Exception as exc:
                self.stats.errors += 1
                raise KubeUnavailable(f"Kubernetes API: {type(exc).__name__}: {exc}"[:200]) from exc
            finally:
                resp.release()
        if status == 404:
            raise NotFound(method)
        try:
            body = json.loads(raw)
        except ValueError:
            self.stats.errors += 1
            raise KubeUnavailable(f"Kubernetes API: HTTP {status}, not JSON") from None
        if not 200 <= status < 300:
            self.stats.errors += 1
            message = body.get("message") if isinstance(body, dict) else ""
            raise KubeUnavailable(f"Kubernetes API: HTTP {status}: {message}"[:200])
        if not isinstance(body, dict):
            self.stats.errors += 1
            raise KubeUnavailable("Kubernetes API: answer is not an object")
        return body

    async def _cached(self, key: tuple, ttl: float, fetch: Callable[[], Awaitable[Any]]) -> Any:
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self.monotonic():
            self.stats.cache_hits += 1
            return hit[1]
        fut = self._inflight.get(key)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            value = await fetch()
        except BaseException as exc:
            self._inflight.pop(key, None)
            if not fut.done():
                fut.set_exception(exc if isinstance(exc, Exception) else KubeUnavailable("cancelled"))
                fut.exception()
            raise
        self._inflight.pop(key, None)
        self._cache[key] = (self.monotonic() + ttl, value)
        if len(self._cache) > 8192:
            now = self.monotonic()
            for k in [k for k, (exp, _) in self._cache.items() if exp <= now]:
                del self._cache[k]
        fut.set_result(value)
        return value

    # ----- public -----

    def applies_to(self, cluster: str) -> bool:
        return not self.settings.cluster or not cluster or cluster == self.settings.cluster

    async def node_context(self, node: str) -> NodeContext:
        """The node, its GPU pods with their owners, and its recent events (cached per node)."""
        return await self._cached(("node-context", node), self.settings.cache_ttl, lambda: self._node_context(node))

    async def close(self) -> None:
        if self._api_client is not None and self._own_client:
            await self._api_client.close()
        self._api_client = None
        self._apis.clear()

    # ----- internals -----

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
        others = frozenset((_meta(p).get("namespace", ""), _meta(p).get("name", "")) for p in items
                           if self.gpu_count(p)[0] == 0)
        gpu_pods.sort(key=lambda p: (self._phase(p) not in ("Running", "Pending"), _meta(p).get("namespace", ""),
                                     _meta(p).get("name", "")))
        gpu_pods = gpu_pods[: self.settings.max_pods]
        described = await asyncio.gather(*(self._describe_pod(p, node) for p in gpu_pods))
        events = [] if isinstance(events_list, BaseException) else self.describe_events(events_list, node)
        if isinstance(events_list, BaseException) and not isinstance(events_list, NotFound):
            log.info("node events for %s unavailable: %s", node, events_list)
        return NodeContext(node=node_info, pods=list(described), events=events, fetched_at=self.now(),
                           other_pods=others)

    @staticmethod
    def _phase(pod: dict[str, Any]) -> str:
        if _meta(pod).get("deletionTimestamp"):
            return "Terminating"
        return (pod.get("status") or {}).get("phase", "Unknown")

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
        meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        labels = meta.get("labels") or {}

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
            "name": meta.get("name", ""),
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
        for mf in _meta(obj).get("managedFields") or []:
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
                    or _meta(ev).get("creationTimestamp"))
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
        meta = _meta(pod)
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        count, resources = self.gpu_count(pod)
        chain: list[dict[str, Any]] = []
        objects: list[dict[str, Any]] = [pod]
        current = pod
        for _ in range(self.settings.max_owner_depth):
            ref = controller_ref(current)
            if ref is None:
                break
            link = {"kind": ref.get("kind", ""), "name": ref.get("name", ""), "apiVersion": ref.get("apiVersion", "")}
            chain.append(link)
            try:
                current = await self.owner(ns, ref)
            except NotFound:
                link["missing"] = True
                break
            except KubeUnavailable as exc:
                link["unresolved"] = exc.reason
                break
            objects.append(current)
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

    def team_and_channel(self, objects: list[dict[str, Any]]) -> tuple[str, str]:
        team = channel = ""
        for obj in objects:
            meta = _meta(obj)
            labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
            if not team:
                team = next((labels.get(k) or annotations.get(k) for k in self.settings.team_labels
                             if labels.get(k) or annotations.get(k)), "")
            if not channel:
                channel = next((annotations.get(k) or labels.get(k) for k in self.settings.channel_annotations
                                if annotations.get(k) or labels.get(k)), "")
            if team and channel:
                break
        return team, channel

    async def namespace(self, ns: str) -> dict[str, Any] | None:
        if not ns:
            return None

        async def fetch() -> dict[str, Any] | None:
            try:
                return await self._get("CoreV1Api", "read_namespace", ns)
            except (NotFound, KubeUnavailable) as exc:
                log.debug("namespace %s unavailable: %s", ns, exc)
                return None

        return await self._cached(("namespace", ns), self.settings.owner_cache_ttl, fetch)

    async def owner(self, ns: str, ref: dict[str, Any]) -> dict[str, Any]:
        api_version, kind, name = ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", "")
        key = ("owner", ns, api_version, kind, name)

        async def fetch() -> dict[str, Any]:
            group, version = split_api_version(api_version)
            typed = _TYPED.get((group, kind))
            if typed is not None:
                return await self._get(typed[0], typed[1], name, ns)
            plural = self.settings.owner_plurals.get(kind) or kind.lower() + "s"
            return await self._get("CustomObjectsApi", "get_namespaced_custom_object", group, version, ns, plural, name)

        return await self._cached(key, self.settings.owner_cache_ttl, fetch)


def owners_of(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The top owner of each pod (the workload: PyTorchJob, Deployment ...), deduplicated."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pod in pods:
        chain = pod.get("owner_chain") or []
        top = chain[-1] if chain else {"kind": "Pod", "name": pod.get("name", "")}
        key = (pod.get("namespace", ""), top.get("kind", ""), top.get("name", ""))
        entry = seen.get(key)
        if entry is None:
            entry = seen[key] = {"kind": key[1], "name": key[2], "namespace": key[0], "team": pod.get("team", ""),
                                 "channel": pod.get("channel", ""), "pods": 0, "gpus": 0}
        entry["pods"] += 1
        entry["gpus"] += int(pod.get("gpus") or 0)
        entry["team"] = entry["team"] or pod.get("team", "")
        entry["channel"] = entry["channel"] or pod.get("channel", "")
    return list(seen.values())


__all__ = ["KubeContext", "KubeSettings", "KubeUnavailable", "NodeContext", "owners_of"]
