"""Which nodes of an incident to enrich, and what to look for on each.

An incident is enriched per node: the node it is about, or for a fleet
incident every node it covers. A :class:`EnrichTarget` carries what the jobs need
about that node: where to centre the log window (the earliest ``startsAt`` of
the incident's alerts there) and which GPUs and pods the alerts named, so
only Xids of those GPUs can reclassify the incident and the pods shown are
the ones the exporter named.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterable

from alertd.core.json_types import strings
from alertd.enrich.annotations import KUBE_NODE, LOG_EVIDENCE, PODS
from alertd.core.model import Change, Incident, Member
from alertd.core.vocabulary import EventKind


@dataclass(slots=True)
class EnrichTarget:
    """One node of one incident to enrich."""

    incident_id: str
    node: str
    anchor: datetime  # the earliest startsAt of the incident's alerts on this node
    cluster: str = ""
    fleet: bool = False
    gpus: list[dict[str, str]] = field(default_factory=list)  # GPUs the alerts named on this node
    pods: dict[tuple[str, str], list[dict[str, str]]] = field(default_factory=dict)  # (ns, pod) -> GPUs (dcgm pod labels)
    submitted: float = 0.0


def nodes_of(inc: Incident) -> list[str]:
    """Every node of the incident, in order: for a fleet its listed nodes, then its own members' nodes."""
    listed = [*inc.nodes] if inc.fleet else [inc.node]
    return [n for n in dict.fromkeys(listed + [m.subject.node for m in inc.members.values()]) if n]


def step_nodes(change: Change) -> list[str]:
    """The nodes a step may have added to an incident: those of the members it changed and, for a fleet,
    those its ``nodes_joined`` events name. What a fleet of thousands of nodes costs per step is what the
    step did, never the fleet's size."""
    inc = change.incident
    if not inc.fleet:
        return nodes_of(inc)
    members = [m.subject.node for fp in change.members if (m := inc.members.get(fp)) is not None]
    return [n for n in dict.fromkeys(joined_nodes(change) + members) if n]


def joined_nodes(change: Change) -> list[str]:
    """The nodes the step's ``nodes_joined`` events name."""
    return [n for e in change.events if e.kind == EventKind.NODES_JOINED for n in strings(e.data.get("nodes"))]


def member_nodes(inc: Incident, exclude: set[str], joined_nodes: Iterable[str] = ()) -> set[str]:
    out = {m.subject.node for fp, m in inc.members.items() if fp not in exclude and m.subject.node}
    if inc.fleet:
        joined = {m.subject.node for fp, m in inc.members.items() if fp in exclude} | set(joined_nodes)
        out |= {n for n in inc.nodes if n not in joined}
    return out


def enriched_before(inc: Incident, changed: set[str], joined_nodes: Iterable[str] = ()) -> set[str]:
    """Nodes of an incident first seen after a restart (or a late bind) that were enriched before:
    those of members that did not change in this step, and of a fleet the nodes that did not just
    join it (``joined_nodes``); only the ones that just joined are new."""
    seen = member_nodes(inc, exclude=changed, joined_nodes=joined_nodes)
    if not inc.fleet and inc.node and any(inc.annotations.get(k) for k in (LOG_EVIDENCE, PODS, KUBE_NODE)):
        seen.add(inc.node)
    return seen


def targets_for(inc: Incident, nodes: list[str], children_on: Callable[[str], Iterable[Incident]],
                submitted: float) -> list[EnrichTarget]:
    """The targets for some nodes of an incident. ``children_on`` gives a fleet incident's child incidents on
    one node (the engine's index by node), where the alerts of a node the fleet took over live. The
    incident's own members are read once for all the nodes."""
    wanted = set(nodes)
    own: dict[str, list[Member]] = {}
    for m in inc.members.values():
        if m.subject.node in wanted:
            own.setdefault(m.subject.node, []).append(m)
    out = []
    for node in nodes:
        members = own.get(node, [])
        if not members and inc.fleet:
            members = [m for child in children_on(node) for m in child.members.values() if m.subject.node == node]
        out.append(_target(inc, node, members, submitted))
    return out


def _target(inc: Incident, node: str, members: list[Member], submitted: float) -> EnrichTarget:
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
    return EnrichTarget(inc.id, node, anchor, inc.cluster, inc.fleet, gpus, pods, submitted)


__all__ = ["EnrichTarget", "enriched_before", "member_nodes", "joined_nodes", "nodes_of", "step_nodes", "targets_for"]
