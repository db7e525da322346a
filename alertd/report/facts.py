"""One incident -> the small record the reliability report counts (pure).

What an incident is, for the report (docs/reliability-report.md, "What counts"):

* ``failure``: hardware took GPUs out of service: category hardware, memory, nvlink or driver, at
  severity error or critical, and not planned work;
* ``application``: the job's fault (application Xids 13, 31, 43, ...): counted apart;
* ``maintenance``: planned work on a node cordoned before its trouble started (rules/routing.yml,
  ``cordoned``; the same test routing uses): counted apart;
* ``folded``: a node incident folded into a fleet incident (the fleet incident counts, once);
* ``other``: warnings and information (thermal slowdown, a watchdog).

A failure takes its node(s) out of service, every GPU of them (a GPU reset or a reboot drains the node)
from the incident's opening until its last alert ended (``endedAt``; the resolution when none ended).
"""
from __future__ import annotations

from typing import Any, Mapping

from alertd.core.findings import Findings
from alertd.core.model import Incident, iso

HARDWARE_CATEGORIES = ("hardware", "memory", "nvlink", "driver")
FAILURE_SEVERITIES = ("error", "critical")
DEFAULT_GPUS_PER_NODE = 8


def kind_of(doc: Mapping[str, Any], planned: bool) -> str:
    category, severity = doc.get("category") or "other", doc.get("severity") or ""
    if doc.get("parentId"):
        return "folded"
    if category == "application":
        return "application"
    if planned:
        return "maintenance"
    if category in HARDWARE_CATEGORIES and severity in FAILURE_SEVERITIES:
        return "failure"
    return "other"


def last_end(inc: Incident) -> str | None:
    """When a resolved incident's trouble ended: its last alert's end (the alerts' own clock, before the
    hold-down that resolution waits), or None when no alert ended (resolved by hand)."""
    ends = [m.ends_at for m in inc.members.values() if m.ends_at is not None]
    return iso(max(ends)) if ends and inc.resolved_at is not None else None


def fact(doc: Mapping[str, Any], *, planned: bool = False,
         nodes: Mapping[tuple[str, str], tuple[str, int]] | None = None,
         default_gpus: int = DEFAULT_GPUS_PER_NODE, ended: str | None = None) -> dict[str, Any]:
    """``doc``: an incident document (Incident.to_dict, members not needed); ``planned``: whether all it
    shows is planned work; ``nodes``: (cluster, node) -> (node type, GPUs) from the fleet samples;
    ``ended``: when its last alert ended (last_end), else its resolution counts."""
    nodes = nodes or {}
    cluster = doc.get("cluster") or ""
    names = [n for n in (doc.get("nodes") or []) if n] if doc.get("fleet") else []
    names = names or ([doc["node"]] if doc.get("node") else [])
    known = [nodes.get((cluster, n)) for n in names]
    gpus_out = sum(k[1] if k else default_gpus for k in known)
    primary = doc.get("primary") or {}
    xids = [int(x) for x in doc.get("xids") or []]
    jobs = Findings.from_annotations(doc.get("annotations") or {}).jobs
    return {
        "id": doc["id"], "cluster": cluster, "node": doc.get("node") or "", "nodes": names,
        "nodeType": next((k[0] for k in known if k), ""),
        "openedAt": doc["openedAt"], "resolvedAt": doc.get("resolvedAt"),
        "endedAt": ended or doc.get("resolvedAt"),
        "kind": kind_of(doc, planned), "category": doc.get("category") or "other",
        "severity": doc.get("severity") or "", "xid": primary.get("xid") or (xids[0] if xids else None),
        "action": primary.get("action") or "", "title": doc.get("title") or "",
        "gpusOut": gpus_out, "gpus": sorted({g["uuid"] for g in doc.get("gpus") or [] if g.get("uuid")}),
        "jobs": [{"namespace": j.namespace, "kind": j.kind, "name": j.name, "gpus": j.gpus,
                  "gpuHoursLost": j.gpu_hours_lost} for j in jobs],
    }


__all__ = ["DEFAULT_GPUS_PER_NODE", "FAILURE_SEVERITIES", "HARDWARE_CATEGORIES", "fact", "kind_of", "last_end"]
