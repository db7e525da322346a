"""What enrichment found, per incident and node, and the incident annotations made from it.

Results are kept per node (:class:`IncidentState`) and the annotation values
are computed from the whole state each time, so a node that joins an incident
adds to what is shown instead of replacing it, and a failure on one node does
not hide another node's evidence. :func:`seed_state` reads the annotations back
into state, for incidents that were enriched before a restart.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from alertd.enrich.log_evidence import cap_evidence
from alertd.enrich.kube_owners import owners_of
from alertd.enrich.settings import EnrichSettings
from alertd.core.findings import JOBS, LOG_EVIDENCE, LOGS_UNAVAILABLE, OWNERS, PODS, Findings
from alertd.core.model import Signal

# Annotation keys (documented in docs/enrichment.md; alertd/core/findings.py reads them back for notify and the UI).
KUBE_NODE = "kube_node"
KUBE_NODES = "kube_nodes"
NODE_EVENTS = "node_events"
KUBE_UNAVAILABLE = "kube_unavailable"


@dataclass(slots=True)
class IncidentState:
    """What enrichment found per node; annotation values are computed from this."""

    nodes: list[str] = field(default_factory=list)
    evidence: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    log_failures: dict[str, str] = field(default_factory=dict)
    kube: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> {"node", "pods", "events"}
    kube_failures: dict[str, str] = field(default_factory=dict)
    signals: list[Signal] = field(default_factory=list)
    fleet: bool = False
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


def annotation_values(state: IncidentState, s: EnrichSettings, *, logs: bool, kube: bool) -> dict[str, Any]:
    """Annotation values computed from what enrichment found (None removes a key).

    ``logs``/``kube`` say which sources are configured: keys of a source that is
    not are left alone."""
    out: dict[str, Any] = {}
    if logs:
        entries = [e for n in state.nodes for e in state.evidence.get(n, [])]
        if entries or any(n in state.evidence for n in state.nodes):
            out[LOG_EVIDENCE] = cap_evidence(sorted(entries, key=lambda e: e.get("time") or ""), s.max_evidence)
        failures = [state.log_failures[n] for n in state.nodes if n in state.log_failures]
        if not failures:
            out[LOGS_UNAVAILABLE] = None
        elif len(state.nodes) == 1:
            out[LOGS_UNAVAILABLE] = failures[0]
        else:
            out[LOGS_UNAVAILABLE] = f"{failures[-1]} ({len(failures)} of {len(state.nodes)} nodes)"
    if kube:
        known = [n for n in state.nodes if n in state.kube]
        if known:
            if not state.fleet and len(state.nodes) == 1:
                out[KUBE_NODE] = state.kube[known[0]]["node"]
            else:
                out[KUBE_NODES] = [state.kube[n]["node"] for n in known]
            pods = [p for n in known for p in state.kube[n]["pods"]][: s.max_pods]
            out[PODS] = pods
            out[OWNERS] = owners_of(pods)
            out[JOBS] = merged_jobs([state.kube[n].get("jobs") or [] for n in known])
            events = sorted((e for n in known for e in state.kube[n]["events"]),
                            key=lambda e: e.get("time") or "", reverse=True)
            out[NODE_EVENTS] = events[: s.max_events]
        failures = [state.kube_failures[n] for n in state.nodes if n in state.kube_failures]
        out[KUBE_UNAVAILABLE] = (failures[0] if len(failures) == 1 else
                                 f"{failures[-1]} ({len(failures)} of {len(state.nodes)} nodes)") if failures else None
    return out


def merged_jobs(per_node: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One entry per job across the incident's nodes (the later node's answer wins), most GPU-hours first."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for jobs in per_node:
        for j in jobs:
            key = (str(j.get("namespace", "")), str(j.get("kind", "")), str(j.get("name", "")))
            hit = sorted(set(seen.get(key, {}).get("hitPods") or []) | set(j.get("hitPods") or []))
            seen[key] = {**j, "hitPods": hit}
    return sorted(seen.values(), key=lambda j: (-float(j.get("gpuHoursLost") or 0), j.get("name", "")))


def seed_state(state: IncidentState, ann: dict[str, Any]) -> None:
    """Rebuild per-node state from existing annotations, so merging a new node keeps the old ones."""
    for e in ann.get(LOG_EVIDENCE) or []:
        if isinstance(e, dict):
            node = e.get("node") or e.get("host") or ""
            state.evidence.setdefault(node, []).append(e)
    nodes_info = ann.get(KUBE_NODES) or ([ann[KUBE_NODE]] if isinstance(ann.get(KUBE_NODE), dict) else [])
    for n in nodes_info:
        if isinstance(n, dict) and n.get("name"):
            state.kube.setdefault(n["name"], {"node": n, "pods": [], "events": []})
    old_jobs = [j for j in ann.get(JOBS) or [] if isinstance(j, dict)]
    if old_jobs and nodes_info and isinstance(nodes_info[0], dict) and nodes_info[0].get("name"):
        state.kube[nodes_info[0]["name"]]["jobs"] = old_jobs
    for p in ann.get(PODS) or []:
        if isinstance(p, dict) and p.get("node"):
            state.kube.setdefault(p["node"], {"node": {"name": p["node"]}, "pods": [], "events": []})["pods"].append(p)
    for ev in ann.get(NODE_EVENTS) or []:
        if isinstance(ev, dict) and ev.get("node") in state.kube:
            state.kube[ev["node"]]["events"].append(ev)
    for node in list(state.evidence) + list(state.kube):
        if node and node not in state.nodes:
            state.nodes.append(node)


def describe(key: str, value: Any) -> str:
    """The one-line text of the incident event that records an annotation change."""
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
    if key == JOBS:
        return "jobs hit: " + (Findings.from_annotations({JOBS: value}).jobs_line() or "none")
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


__all__ = [
    "JOBS", "KUBE_NODE", "KUBE_NODES", "KUBE_UNAVAILABLE", "LOGS_UNAVAILABLE", "LOG_EVIDENCE", "NODE_EVENTS", "OWNERS",
    "PODS", "IncidentState", "annotation_values", "describe", "seed_state",
]
