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

from datetime import timedelta

from typing import Mapping

from alertd.core.findings import Findings
from alertd.core.json_types import JSONObject, JSONValue, as_array, member, objects
from alertd.core.model import Incident, Severity, iso
from alertd.core.vocabulary import FAILURE_CATEGORIES, Category
from alertd.report.shapes import Fact, FactKind, JobHit

HARDWARE_CATEGORIES = FAILURE_CATEGORIES
FAILURE_SEVERITIES = frozenset({Severity.ERROR, Severity.CRITICAL})
DEFAULT_GPUS_PER_NODE = 8


def kind_of(doc: JSONObject, planned: bool) -> str:
    category, severity = doc.get("category") or Category.OTHER, doc.get("severity") or ""
    if doc.get("parentId"):
        return FactKind.FOLDED.value
    if category == Category.APPLICATION:
        return FactKind.APPLICATION.value
    if planned:
        return FactKind.MAINTENANCE.value
    if category in HARDWARE_CATEGORIES and severity in FAILURE_SEVERITIES:
        return FactKind.FAILURE.value
    return FactKind.OTHER.value


def last_end(inc: Incident) -> str | None:
    """When a resolved incident's trouble ended: its last alert's end (the alerts' own clock, before the
    hold-down that resolution waits), or None when no alert ended (resolved by hand)."""
    ends = [m.ends_at for m in inc.members.values() if m.ends_at is not None]
    if not ends or inc.resolved_at is None:
        return None
    end = max(ends)
    if end < inc.opened_at:  # its alerts reached alertd after they ended (alertd was down, a late redelivery):
        # the trouble lasted what its alerts did, counted from the opening, never a negative time to repair
        end = inc.opened_at + max(end - min(m.starts_at for m in inc.members.values()), timedelta(0))
    return iso(end)


def _text(v: JSONValue) -> str:
    return str(v) if v else ""


def _time(v: JSONValue) -> str | None:
    return v if isinstance(v, str) else None


def fact(doc: JSONObject, *, planned: bool = False,
         nodes: Mapping[tuple[str, str], tuple[str, int]] | None = None,
         default_gpus: int = DEFAULT_GPUS_PER_NODE, ended: str | None = None) -> Fact:
    """``doc``: an incident document (Incident.to_dict, members not needed); ``planned``: whether all it
    shows is planned work; ``nodes``: (cluster, node) -> (node type, GPUs) from the fleet samples;
    ``ended``: when its last alert ended (last_end), else its resolution counts."""
    nodes = nodes or {}
    cluster = _text(doc.get("cluster"))
    names = [str(n) for n in as_array(doc.get("nodes")) if n] if doc.get("fleet") else []
    names = names or ([str(doc["node"])] if doc.get("node") else [])
    known = [nodes.get((cluster, n)) for n in names]
    gpus_out = sum(k[1] if k else default_gpus for k in known)
    primary = member(doc, "primary")
    xids = [int(str(x)) for x in as_array(doc.get("xids"))]
    jobs = Findings.from_annotations(member(doc, "annotations")).jobs
    code = primary.get("xid")
    hits: list[JobHit] = [{"namespace": j.namespace, "kind": j.kind, "name": j.name, "gpus": j.gpus,
                           "gpuHoursLost": j.gpu_hours_lost} for j in jobs]
    return {
        "id": str(doc["id"]), "cluster": cluster, "node": _text(doc.get("node")), "nodes": names,
        "nodeType": next((k[0] for k in known if k), ""),
        "openedAt": str(doc["openedAt"]), "resolvedAt": _time(doc.get("resolvedAt")),
        "endedAt": ended or _time(doc.get("resolvedAt")),
        "kind": kind_of(doc, planned), "category": _text(doc.get("category")) or Category.OTHER.value,
        "severity": _text(doc.get("severity")), "xid": code if isinstance(code, int) and code else (xids[0] if xids else None),
        "action": _text(primary.get("action")), "title": _text(doc.get("title")),
        "gpusOut": gpus_out, "gpus": sorted({str(g["uuid"]) for g in objects(doc.get("gpus")) if g.get("uuid")}),
        "jobs": hits,
    }


__all__ = ["DEFAULT_GPUS_PER_NODE", "FAILURE_SEVERITIES", "HARDWARE_CATEGORIES", "fact", "kind_of", "last_end"]
