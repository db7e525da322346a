"""What enrichment found, per incident and node, and the incident annotations made from it.

Results are kept per node (:class:`IncidentState`) and the annotation values
are computed from the whole state each time, so a node that joins an incident
adds to what is shown instead of replacing it, and a failure on one node does
not hide another node's evidence. :func:`seed_state` reads the annotations back
into state, for incidents that were enriched before a restart.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

from alertd.core.findings import (JOBS, KUBE_NODE, KUBE_NODES, KUBE_UNAVAILABLE, LOG_EVIDENCE, LOGS_UNAVAILABLE,
                                  NODE_EVENTS, OWNERS, PODS, EvidenceLine, Findings, Job, jobs_line)
from alertd.core.json_types import JSONObject, JSONValue, integer, strings
from alertd.core.kube_findings import KubeNode, NodeEvent, Pod
from alertd.core.model import Signal
from alertd.engine.jobs import SIZE as JOB_SIZE
from alertd.enrich.kube_owners import owners_of
from alertd.enrich.log_evidence import cap_evidence
from alertd.enrich.settings import EnrichSettings
from alertd.core.words import counted


LISTED_NODES = 100  # nodes whose Kubernetes state a fleet incident lists (kube_nodes)


@dataclass(slots=True)
class NodeFindings:
    """What Kubernetes showed for one node of the incident."""

    node: KubeNode
    pods: list[Pod] = field(default_factory=list)
    events: list[NodeEvent] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)


@dataclass(slots=True)
class IncidentState:
    """What enrichment found per node; annotation values are computed from this."""

    nodes: dict[str, None] = field(default_factory=dict)  # in the order they joined; a dict, for thousands
    evidence: dict[str, list[EvidenceLine]] = field(default_factory=dict)
    log_failures: dict[str, str] = field(default_factory=dict)
    kube: dict[str, NodeFindings] = field(default_factory=dict)
    kube_failures: dict[str, str] = field(default_factory=dict)
    signals: list[Signal] = field(default_factory=list)
    fleet: bool = False
    job_size: JSONObject | None = None  # a job incident's pods from the API (engine/jobs.py's SIZE)
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


def annotation_values(state: IncidentState, s: EnrichSettings, *, logs: bool,
                      kube: bool) -> dict[str, tuple[JSONValue, str]]:
    """Annotation values computed from what enrichment found, each with the one-line text of the event that
    records its change (a None value removes a key).

    ``logs``/``kube`` say which sources are configured: keys of a source that is
    not are left alone."""
    out: dict[str, tuple[JSONValue, str]] = {}
    if logs:
        entries = [e for n in state.nodes for e in state.evidence.get(n, [])]
        if entries or any(n in state.evidence for n in state.nodes):
            kept = cap_evidence(sorted(entries, key=lambda e: e.time or ""), s.max_evidence)
            out[LOG_EVIDENCE] = [e.to_json() for e in kept], _evidence_text(kept)
        failures = [state.log_failures[n] for n in state.nodes if n in state.log_failures]
        reason = _failure(failures, len(state.nodes), each=len(state.nodes) == 1)
        out[LOGS_UNAVAILABLE] = reason, (f"kernel log unavailable: {reason}" if reason else "kernel log available again")
    if kube:
        _kube_values(state, s, out)
        size = state.job_size
        if size is not None:
            out[JOB_SIZE] = size, (f"job: {counted(integer(size, 'gpus'), 'GPU')} in {counted(integer(size, 'pods'), 'pod')} "
                                   f"on {counted(len(strings(size.get('nodes'))), 'node')} (Kubernetes API)")
    return out


def _kube_values(state: IncidentState, s: EnrichSettings, out: dict[str, tuple[JSONValue, str]]) -> None:
    known = [state.kube[n] for n in state.nodes if n in state.kube]
    if known:
        if not state.fleet and len(state.nodes) == 1:
            out[KUBE_NODE] = known[0].node.to_json(), _node_text(known[0].node)
        else:
            listed = known[:LISTED_NODES]  # a storm's thousands: each node's own incident holds its state
            more = f", the first {len(listed)} listed (each node's incident has its own)" if len(known) > len(listed) else ""
            out[KUBE_NODES] = [k.node.to_json() for k in listed], f"Kubernetes state of {len(known)} node(s){more}"
        pods = [p for k in known for p in k.pods][: s.max_pods]
        out[PODS] = [p.to_json() for p in pods], f"{len(pods)} GPU pod(s) on the node(s)"
        owners = owners_of(pods)
        parts = [f"{o.kind} {o.namespace}/{o.name}" + (f" (team {o.team})" if o.team else "") for o in owners[:3]]
        out[OWNERS] = [o.to_json() for o in owners], "owners: " + ("; ".join(parts) if parts else
                                                                     "no GPU workload on the node")
        jobs = merged_jobs([k.jobs for k in known])
        out[JOBS] = [j.to_json() for j in jobs], "jobs hit: " + (jobs_line(jobs) or "none")
        events = sorted((e for k in known for e in k.events), key=lambda e: e.time, reverse=True)[: s.max_events]
        out[NODE_EVENTS] = [e.to_json() for e in events], f"{len(events)} recent node event(s)"
    failures = [state.kube_failures[n] for n in state.nodes if n in state.kube_failures]
    reason = _failure(failures, len(state.nodes), each=len(failures) == 1)
    out[KUBE_UNAVAILABLE] = reason, (f"Kubernetes context unavailable: {reason}" if reason
                                     else "Kubernetes context available again")


def _failure(failures: list[str], nodes: int, *, each: bool) -> str | None:
    """The reason a source is unavailable; ``each``: the first failure as it is, else the last with a count."""
    if not failures:
        return None
    return failures[0] if each else f"{failures[-1]} ({len(failures)} of {counted(nodes, 'node')})"


def _evidence_text(entries: list[EvidenceLine]) -> str:
    xids = sorted({e.xid for e in entries if e.xid})
    hosts = sorted({e.host for e in entries} - {""})
    text = f"kernel log: {len(entries)} line(s)" + (f" from {', '.join(hosts[:5])}" if hosts else "")
    return text + (f"; Xid {', '.join(map(str, xids))}" if xids else "")


def _node_text(node: KubeNode) -> str:
    bits = [f"node {node.name}: Ready={node.ready if not node.missing else '?'}"]
    if node.cordoned:
        bits.append("cordoned" + (f" by {node.cordoned_by}" if node.cordoned_by else ""))
    return ", ".join(bits)


def merged_jobs(per_node: list[list[Job]]) -> list[Job]:
    """One entry per job across the incident's nodes (the later node's answer wins), most GPU-hours first."""
    seen: dict[tuple[str, str, str], Job] = {}
    for jobs in per_node:
        for j in jobs:
            before = seen.get(j.key)
            hit = sorted(set(before.hit_pods if before else ()) | set(j.hit_pods))
            seen[j.key] = replace(j, hit_pods=tuple(hit))
    return sorted(seen.values(), key=lambda j: (-j.gpu_hours_lost, j.name))


def seed_state(state: IncidentState, found: Findings) -> None:
    """Rebuild per-node state from the incident's findings, so merging a new node keeps the old ones."""
    for e in found.evidence:
        state.evidence.setdefault(e.node or e.host, []).append(e)
    for n in found.nodes:
        if n.name:
            state.kube.setdefault(n.name, NodeFindings(n))
    if found.jobs and found.nodes and found.nodes[0].name:
        state.kube[found.nodes[0].name].jobs = list(found.jobs)
    for p in found.pods:
        if p.node:
            state.kube.setdefault(p.node, NodeFindings(KubeNode(p.node))).pods.append(p)
    for ev in found.node_events:
        if ev.node in state.kube:
            state.kube[ev.node].events.append(ev)
    state.nodes.update(dict.fromkeys(n for n in [*state.evidence, *state.kube] if n))


__all__ = [
    "JOBS", "KUBE_NODE", "KUBE_NODES", "KUBE_UNAVAILABLE", "LOGS_UNAVAILABLE", "LOG_EVIDENCE", "NODE_EVENTS", "OWNERS",
    "PODS", "IncidentState", "NodeFindings", "annotation_values", "seed_state",
]
