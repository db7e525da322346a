"""Kubernetes findings on an incident: the node's state, the GPU pods on it with their owner chains, and
the node's recent events (annotations ``kube_node``/``kube_nodes``, ``pods``, ``node_events``; shapes in
docs/enrichment.md). alertd/enrich/kube.py builds them from the API's objects; :mod:`alertd.core.findings`
puts them on the incident.
"""
from __future__ import annotations

from dataclasses import dataclass

from alertd.core.json_types import JSONObject, JSONValue, as_object, each, integer, optional_integer, string_map, text


@dataclass(frozen=True, slots=True)
class NodeCondition:
    type: str
    status: str
    reason: str = ""
    since: str = ""
    message: str = ""  # only on unhealthy conditions

    def to_json(self) -> JSONObject:
        out: JSONObject = {"type": self.type, "status": self.status, "reason": self.reason, "since": self.since}
        if self.message:
            out["message"] = self.message
        return out

    @classmethod
    def from_json(cls, d: JSONObject) -> "NodeCondition":
        return cls(text(d, "type"), text(d, "status"), text(d, "reason"), text(d, "since"), text(d, "message"))


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str = ""
    value: str = ""
    time_added: str = ""

    def to_json(self) -> JSONObject:
        out: JSONObject = {"key": self.key}
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.time_added:
            out["timeAdded"] = self.time_added
        return out

    @classmethod
    def from_json(cls, d: JSONObject) -> "Taint":
        return cls(text(d, "key"), text(d, "effect"), text(d, "value"), text(d, "timeAdded"))


@dataclass(frozen=True, slots=True)
class KubeNode:
    """A node as Kubernetes describes it (``kube_node``; a list of them is ``kube_nodes``)."""

    name: str
    cordoned: bool = False
    ready: str = "Unknown"
    conditions: tuple[NodeCondition, ...] = ()
    taints: tuple[Taint, ...] = ()
    pool: str = ""
    instance_type: str = ""
    gpu_product: str = ""
    gpu_capacity: str | None = None  # "gpus": {"capacity", "allocatable"}, absent on nodes without GPUs
    gpu_allocatable: str | None = None
    mig: tuple[tuple[str, str], ...] = ()  # MIG resource -> capacity
    cordoned_by: str = ""
    cordoned_at: str = ""
    missing: bool = False  # the API does not know the node

    def to_json(self) -> JSONObject:
        if self.missing:
            return {"name": self.name, "missing": True}
        out: JSONObject = {"name": self.name, "cordoned": self.cordoned, "ready": self.ready,
                           "conditions": [c.to_json() for c in self.conditions],
                           "taints": [t.to_json() for t in self.taints]}
        for key, value in (("pool", self.pool), ("instance_type", self.instance_type),
                           ("gpu_product", self.gpu_product)):
            if value:
                out[key] = value
        if self.gpu_capacity is not None:
            out["gpus"] = {"capacity": self.gpu_capacity, "allocatable": self.gpu_allocatable}
        if self.mig:
            out["mig"] = dict[str, JSONValue](self.mig)
        if self.cordoned_by:
            out["cordoned_by"] = self.cordoned_by
        if self.cordoned_at:
            out["cordoned_at"] = self.cordoned_at
        return out

    @classmethod
    def from_json(cls, d: JSONObject) -> "KubeNode":
        gpus = as_object(d.get("gpus"))
        return cls(name=text(d, "name"), cordoned=d.get("cordoned") is True, ready=text(d, "ready", "Unknown"),
                   conditions=each(NodeCondition.from_json, d.get("conditions")),
                   taints=each(Taint.from_json, d.get("taints")),
                   pool=text(d, "pool"), instance_type=text(d, "instance_type"), gpu_product=text(d, "gpu_product"),
                   gpu_capacity=text(gpus, "capacity") if "gpus" in d else None,
                   gpu_allocatable=text(gpus, "allocatable") if "gpus" in d else None,
                   mig=tuple(string_map(d.get("mig")).items()), cordoned_by=text(d, "cordoned_by"),
                   cordoned_at=text(d, "cordoned_at"), missing=d.get("missing") is True)


@dataclass(frozen=True, slots=True)
class OwnerLink:
    """One link of a pod's owner chain: the controller, up to the top (the workload people know)."""

    kind: str
    name: str
    api_version: str = ""
    missing: bool = False  # the owner was deleted
    unresolved: str = ""  # why alertd could not read it

    def to_json(self) -> JSONObject:
        out: JSONObject = {"kind": self.kind, "name": self.name, "apiVersion": self.api_version}
        if self.missing:
            out["missing"] = True
        if self.unresolved:
            out["unresolved"] = self.unresolved
        return out

    @classmethod
    def from_json(cls, d: JSONObject) -> "OwnerLink":
        return cls(text(d, "kind"), text(d, "name"), text(d, "apiVersion"), d.get("missing") is True,
                   text(d, "unresolved"))


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """A GPU that dcgm labels mapped to a pod."""

    uuid: str = ""
    index: str = ""
    pci_bus_id: str = ""
    model: str = ""

    def to_json(self) -> JSONObject:
        return {k: v for k, v in (("uuid", self.uuid), ("index", self.index), ("pci_bus_id", self.pci_bus_id),
                                  ("model", self.model)) if v}

    @classmethod
    def from_json(cls, d: JSONObject) -> "GpuDevice":
        return cls(text(d, "uuid"), text(d, "index"), text(d, "pci_bus_id"), text(d, "model"))


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod holding the node's GPUs (``pods``)."""

    namespace: str
    name: str
    node: str = ""
    phase: str = ""
    gpus: int | None = 0  # None: a pod dcgm named that is no longer on the node
    owner_chain: tuple[OwnerLink, ...] = ()
    team: str = ""
    channel: str = ""
    started: str = ""
    gpu_resources: tuple[tuple[str, int], ...] = ()  # MIG: resource -> count
    gpu_devices: tuple[GpuDevice, ...] = ()

    @property
    def top_owner(self) -> OwnerLink | None:
        return self.owner_chain[-1] if self.owner_chain else None

    def line(self) -> str:
        """namespace/name · phase · GPUs · team."""
        parts = ["/".join(x for x in (self.namespace, self.name) if x) or "?"]
        if self.phase:
            parts.append(self.phase)
        if self.gpus:
            parts.append(f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}")
        if self.team:
            parts.append(f"team {self.team}")
        return " · ".join(parts)

    def to_json(self) -> JSONObject:
        out: JSONObject = {"namespace": self.namespace, "name": self.name, "node": self.node, "phase": self.phase,
                           "gpus": self.gpus, "owner_chain": [o.to_json() for o in self.owner_chain]}
        if self.gpu_resources:
            out["gpu_resources"] = dict[str, JSONValue](self.gpu_resources)
        if self.gpu_devices:
            out["gpu_devices"] = [g.to_json() for g in self.gpu_devices]
        for key, value in (("team", self.team), ("channel", self.channel), ("started", self.started)):
            if value:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, d: JSONObject) -> "Pod":
        resources = as_object(d.get("gpu_resources"))
        return cls(namespace=text(d, "namespace"), name=text(d, "name") or text(d, "pod"), node=text(d, "node"),
                   phase=text(d, "phase"), gpus=optional_integer(d, "gpus"),
                   owner_chain=each(OwnerLink.from_json, d.get("owner_chain")),
                   team=text(d, "team"), channel=text(d, "channel"), started=text(d, "started"),
                   gpu_resources=tuple((k, integer(resources, k)) for k in resources),
                   gpu_devices=each(GpuDevice.from_json, d.get("gpu_devices")))

    @classmethod
    def from_text(cls, line: str) -> "Pod":
        """Earlier versions stored pods as ``namespace/name`` text."""
        ns, _, name = line.strip().rpartition("/")
        return cls(namespace=ns, name=name)


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """A recent event of the node (``node_events``)."""

    node: str
    time: str
    type: str = ""
    reason: str = ""
    message: str = ""
    source: str = ""
    count: int = 1

    def to_json(self) -> JSONObject:
        return {"node": self.node, "time": self.time, "type": self.type, "reason": self.reason,
                "message": self.message, "source": self.source, "count": self.count}

    @classmethod
    def from_json(cls, d: JSONObject) -> "NodeEvent":
        count = optional_integer(d, "count")
        return cls(text(d, "node"), text(d, "time"), text(d, "type"), text(d, "reason"), text(d, "message"),
                   text(d, "source"), 1 if count is None else count)


__all__ = ["GpuDevice", "KubeNode", "NodeCondition", "NodeEvent", "OwnerLink", "Pod", "Taint"]
