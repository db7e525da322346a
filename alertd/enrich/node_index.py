"""Exporter pod -> node and address -> node, from the Kubernetes API, for the engine to read.

dcgm-exporter on Kubernetes without ``NODE_NAME`` names its own pod in ``Hostname`` and its pod
IP in ``instance``. The engine is pure, so it cannot ask Kubernetes; the
service does, at its edge, before each engine step (:meth:`NodeIndex.prepare`):
for the step's alerts it finds what they point at (alertd/engine/identity.py's
``pointers``), looks up what it does not know yet, and waits at most ``wait``
seconds. The engine then reads the answers through the small
:class:`~alertd.engine.identity.NodeLookup` interface, without I/O.

Bounded on every side: at most ``max_lookups`` lookups per step, the API's
concurrency and timeout from ``enrich.kube`` (the same client,
:class:`~alertd.enrich.kube_api.KubeApi`), a lookup that found nothing or failed
is not tried again for ``failure_ttl``, answers are refreshed after ``ttl``, the
nodes' addresses are listed at most every ``refresh``, and at most
``MAX_ENTRIES`` answers are kept. A lookup still running when the step goes on
keeps running: its answer serves the alert when Alertmanager sends it again.

The same node list is the engine's topology snapshot (:class:`~alertd.engine.domains.Topology`): per node,
the labels the domain kinds name (``topology.kubernetes.io/zone``, a rack label, ``nvidia.com/gpu.clique``),
and how many nodes carry each value. It is listed every ``refresh`` from the API server's cache
(``resourceVersion=0``: no read of etcd), the first time waited for like a lookup, later in the background.
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any, Iterable, Mapping, Protocol

from alertd.core.json_types import JSONObject, as_object, objects, string_map, text
from alertd.enrich.kube_api import KubeApi, KubeUnavailable, NotFound, metadata
from alertd.enrich.settings import EnrichSettings, KubeSettings, NodeIndexSettings
from alertd.core.model import Alert
from alertd.engine.identity import Pointer, is_address, is_exporter_pod, pointers
from alertd.engine.normalize import NormalizeConfig

log = logging.getLogger(__name__)
MAX_ENTRIES = 65_536
MAX_NODE_PAGES = 200  # of 500 nodes each


class IndexConfig(Protocol):
    """The configuration as the node index reads it (alertd/config/settings.py's Config): the API server it asks
    (``enrich.kube``), how (``normalize.kubernetes``), and the labels it reads."""

    @property
    def enrich(self) -> EnrichSettings: ...

    @property
    def kubernetes(self) -> NodeIndexSettings: ...

    @property
    def normalize(self) -> NormalizeConfig: ...


class NodeIndex(KubeApi):
    """One cluster's pod -> node and address -> node answers (the engine's NodeLookup)."""

    def __init__(self, kube: KubeSettings, settings: NodeIndexSettings, ncfg: NormalizeConfig,
                 api_client: Any = None, **kw: Any):
        super().__init__(kube, api_client, **kw)
        self.index_settings, self.ncfg = settings, ncfg
        self.generation = 0
        self._pods: dict[tuple[str, str], str] = {}  # (namespace or "", pod) -> node
        self._node_addresses: dict[str, str] = {}  # InternalIP / ExternalIP / Hostname / node name -> node
        self._pod_ips: dict[str, str] = {}  # pod IP -> node
        self._next_try: dict[Pointer, float] = {}  # not looked up again before this monotonic time
        self._stale_at: dict[Any, float] = {}  # answer -> when it is looked up again (pod IPs are reused)
        self._keys: frozenset[str] = frozenset()  # node labels the topology snapshot keeps
        self._labels: dict[str, dict[str, str]] = {}  # node -> its kept labels
        self._carrying: Counter[tuple[str, str]] = Counter()  # (label, value) -> nodes carrying it
        self._nodes_due = float("-inf")
        self._nodes_task: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()

    @classmethod
    def from_config(cls, cfg: "IndexConfig") -> "NodeIndex | None":
        """Built when enrich.kube is configured and normalize.kubernetes is not disabled."""
        kube, settings = cfg.enrich.kube, cfg.kubernetes
        if kube is None or not settings.enabled:
            return None
        return cls(kube, settings, cfg.normalize)

    # ----- NodeLookup: what the engine reads -----

    def applies_to(self, cluster: str) -> bool:
        return not self.settings.cluster or not cluster or cluster == self.settings.cluster

    def node_of_pod(self, cluster: str, namespace: str, pod: str) -> str:
        if not self.applies_to(cluster):
            return ""
        return self._pods.get((namespace, pod)) or self._pods.get(("", pod)) or ""

    def node_of_address(self, cluster: str, address: str) -> str:
        if not self.applies_to(cluster):
            return ""
        return self._node_addresses.get(address) or self._pod_ips.get(address) or ""

    def is_node(self, cluster: str, name: str) -> bool | None:
        if not self.applies_to(cluster) or not self._node_addresses:
            return None  # not listed (yet), or another cluster's
        return name in self._node_addresses

    # ----- Topology: the nodes' labels, for the engine -----

    def keep_labels(self, keys: Iterable[str]) -> None:
        keys = frozenset(keys)
        if keys - self._keys:
            self._nodes_due = float("-inf")  # list again at the next step: a label not kept so far
        self._keys = keys

    def node_labels(self, cluster: str, node: str) -> Mapping[str, str]:
        return self._labels.get(node, {}) if self.applies_to(cluster) else {}

    def nodes_with(self, cluster: str, label: str, value: str) -> int:
        return self._carrying.get((label, value), 0) if self.applies_to(cluster) else 0

    # ----- the edge: look up what a step's alerts point at -----

    async def prepare(self, alerts: Iterable[Alert]) -> None:
        """Start the lookups the alerts need and wait for them at most ``wait`` seconds. Never raises: an
        alert whose node stays unknown is still processed ("node unknown", its origin named)."""
        try:
            tasks = self._start(alerts)
            if tasks:
                await asyncio.wait(tasks, timeout=self.index_settings.wait)
        except Exception:  # a bug here must not stop the engine
            log.exception("node lookups failed")

    def _start(self, alerts: Iterable[Alert]) -> list[asyncio.Task[None]]:
        now, s, n = self.monotonic(), self.index_settings, self.ncfg
        wanted: list[Pointer] = []
        for alert in alerts:
            if not self.applies_to(alert.labels.get(n.cluster_label) or n.cluster_default):
                continue
            for p in pointers(alert.labels, n.node_labels, n.exporter_pod_pattern):
                if p not in wanted and self._next_try.get(p, float("-inf")) <= now and not self._known(p):
                    wanted.append(p)
        tasks: list[asyncio.Task[None]] = []
        if any(p.kind in ("address", "node") for p in wanted):
            tasks.append(self._nodes_refreshed())
        elif self._keys and now >= self._nodes_due:  # the topology snapshot: waited for until there is one
            listing = self._nodes_refreshed()
            if not self._labels:
                tasks.append(listing)
        for p in wanted[: s.max_lookups]:
            self._next_try[p] = now + s.failure_ttl
            task = asyncio.get_running_loop().create_task(self._lookup(p))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            tasks.append(task)
        if len(self._next_try) > MAX_ENTRIES:
            self._next_try = {p: t for p, t in self._next_try.items() if t > now}
        return tasks

    def _known(self, p: Pointer) -> bool:
        """Answered, and the answer not older than ``ttl`` (node addresses: listed within ``refresh``)."""
        now = self.monotonic()
        if p.kind == "pod":
            return any(self._stale_at.get(k, now) > now for k in ((p.namespace, p.name), ("", p.name)))
        if p.kind == "node":
            return bool(self._node_addresses) and self._nodes_due > now
        return (p.name in self._node_addresses and self._nodes_due > now) or self._stale_at.get(p.name, now) > now

    def _nodes_refreshed(self) -> asyncio.Task[None]:
        """The running (or a new, when due) listing of the nodes' addresses."""
        if self._nodes_task is None or (self._nodes_task.done() and self.monotonic() >= self._nodes_due):
            self._nodes_due = self.monotonic() + self.index_settings.refresh
            self._nodes_task = asyncio.get_running_loop().create_task(self._list_nodes())
        return self._nodes_task

    async def _list_nodes(self) -> None:
        found: dict[str, str] = {}
        labels: dict[str, dict[str, str]] = {}
        cont = ""
        try:
            for _ in range(MAX_NODE_PAGES):
                # the first page from the API server's watch cache (resourceVersion=0), the rest by their token
                page = await self._get("CoreV1Api", "list_node", limit=500,
                                       **({"_continue": cont} if cont else {"resource_version": "0"}))
                for node in objects(page.get("items")):
                    name = text(metadata(node), "name")
                    found[name] = name
                    kept = {k: v for k, v in string_map(metadata(node).get("labels")).items() if k in self._keys}
                    if kept:
                        labels[name] = kept
                    for addr in objects(as_object(node.get("status")).get("addresses")):
                        if text(addr, "address"):
                            found[text(addr, "address")] = name
                cont = text(metadata(page), "continue")
                if not cont:
                    break
        except (KubeUnavailable, NotFound) as exc:
            self._nodes_due = self.monotonic() + self.index_settings.failure_ttl
            log.info("node addresses not listed: %s", exc)
            return
        if found != self._node_addresses:
            self._node_addresses = found
            self.generation += 1
        if labels != self._labels:
            self._labels = labels
            self._carrying = Counter(kv for kept in labels.values() for kv in kept.items())

    async def _lookup(self, p: Pointer) -> None:
        try:
            if p.kind == "pod":
                await self._lookup_pod(p)
            elif p.kind == "node":
                await self._nodes_refreshed()
            else:
                await self._lookup_address(p.name)
        except (KubeUnavailable, NotFound) as exc:
            log.debug("node of %s %s not found: %s", p.kind, p.name, exc)

    async def _lookup_pod(self, p: Pointer) -> None:
        if p.namespace:
            pod = await self._get("CoreV1Api", "read_namespaced_pod", p.name, p.namespace)
        else:
            items = objects((await self._get("CoreV1Api", "list_pod_for_all_namespaces",
                                             field_selector=f"metadata.name={p.name}")).get("items"))
            if not items:
                return
            pod = items[0]
        node = text(as_object(pod.get("spec")), "nodeName")
        if node:
            self._remember(self._pods, (p.namespace, p.name), node)
            self._remember(self._pods, ("", p.name), node)

    async def _lookup_address(self, address: str) -> None:
        await self._nodes_refreshed()
        if address in self._node_addresses or not is_address(address):
            return
        items = objects((await self._get("CoreV1Api", "list_pod_for_all_namespaces",
                                         field_selector=f"status.podIP={address}")).get("items"))
        live = [pod for pod in items if text(as_object(pod.get("status")), "phase") not in ("Succeeded", "Failed")
                and self._per_node(pod)]
        node = next((text(as_object(pod.get("spec")), "nodeName") for pod in live
                     if text(as_object(pod.get("spec")), "nodeName")), "")
        if node:
            self._remember(self._pod_ips, address, node)

    def _per_node(self, pod: JSONObject) -> bool:
        """Only a per-node agent's pod IP names its node: a DaemonSet's pod, an exporter pod, one on the host
        network. An operator's or kube-state-metrics' pod runs anywhere: its node says nothing of the alert."""
        owners = objects(metadata(pod).get("ownerReferences"))
        return any(o.get("kind") == "DaemonSet" for o in owners) or bool(as_object(pod.get("spec")).get("hostNetwork")) \
            or is_exporter_pod(text(metadata(pod), "name"), self.ncfg.exporter_pod_pattern)

    def _remember(self, table: dict[Any, str], key: Any, node: str) -> None:
        self._stale_at[key] = self.monotonic() + self.index_settings.ttl
        if table.get(key) == node:
            return
        if len(table) >= MAX_ENTRIES:
            oldest = next(iter(table))
            del table[oldest]
            self._stale_at.pop(oldest, None)
        table[key] = node
        self.generation += 1

    async def close(self) -> None:
        for task in [*self._running, *([self._nodes_task] if self._nodes_task else [])]:
            task.cancel()
        await super().close()


__all__ = ["NodeIndex", "NodeIndexSettings"]
