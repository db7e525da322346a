"""The past of an incident's GPUs and node, read in one go for the history judge (alertd/engine/judge.py).

``HistorySnapshots.history_snapshot(gpus, node, since, exclude)`` reads, on the store's thread:

* the GPUs' rows of gpu_history (GPU UUID across incidents and nodes) opened since ``since``: what each GPU
  showed of each incident (Xids, signals, alert names);
* the node's incidents opened since ``since`` (newest first, at most ``MAX_NODE_INCIDENTS``) through the
  facets their commits wrote (store/history.py ``repair_facets``), not their members: their Xids, their
  faults' kinds (repair symptoms left out) and when their repair ended (the uncordon that ended the
  response, engine/response.py ``uncordoned_at``; or a remediation that ran to its end). The node's own
  view carries no alert names (a node-scoped rule matches on Xids and signals);
* the remediations of those incidents that ran to the end (done), by node.

The answer is an immutable ``HistorySnapshot`` (frozen dataclasses, tuples): the judge's ``History``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import orjson

from alertd.core.json_types import as_array
from alertd.core.model import Incident, iso, parse_iso
from alertd.engine.judge import seen_now
from alertd.engine.response import uncordoned_at
from alertd.store.database import Part
from alertd.store.history import Facet, history_doc

MAX_NODE_INCIDENTS = 64  # a node's incidents in the look-back read with their members, newest first
MAX_GPUS = 256  # a node incident names at most this many GPUs for the read (a node has 8 or 16)
NODE_FACETS = frozenset({Facet.XID, Facet.CAUSE, Facet.REPAIRED})  # what the judge reads of a node's earlier incident
DONE = "done"  # a remediation that ran to its end (alertd/remediation/model.py)


class Fault(NamedTuple):
    """One earlier incident as one GPU (or its node, ``gpu`` "") saw it. Immutable; a tuple because a read of
    256 GPUs' history makes thousands of them."""

    incident: str
    opened_at: datetime
    gpu: str  # "" for the node's own view of the incident
    node: str
    xids: tuple[int, ...] = ()
    signals: tuple[str, ...] = ()
    alertnames: tuple[str, ...] = ()
    repaired_at: datetime | None = None
    repair: str = ""


@dataclass(frozen=True, slots=True)
class Remediated:
    incident: str
    node: str
    action: str
    at: datetime


@dataclass(frozen=True, slots=True)
class HistorySnapshot:
    node: str = ""
    gpus: tuple[str, ...] = ()
    faults: tuple[Fault, ...] = ()
    remediations: tuple[Remediated, ...] = ()


_GPU_ROWS = ("SELECT g.uuid, i.incident_id, i.opened_at, h.node, h.doc FROM gpu_history h "
             "JOIN gpu_incidents i ON i.seq = h.seq JOIN gpus g ON g.id = h.gpu "
             "WHERE g.uuid IN ({marks}) AND i.opened_at >= ? AND i.incident_id <> ?")
_NODE_INCIDENTS = ("SELECT id, opened_at FROM incidents WHERE node = ? AND opened_at >= ? AND id <> ? "
                   "ORDER BY seq DESC LIMIT ?")


class HistorySnapshots(Part):
    """The read of the past behind every verdict (a part of the store)."""

    async def history_snapshot(self, gpus: Sequence[str], node: str, since: datetime,
                               exclude: str = "") -> HistorySnapshot:
        uuids = tuple(dict.fromkeys(g for g in gpus if g))[:MAX_GPUS]

        def do() -> HistorySnapshot:
            cur = self.db.cursor()
            try:
                faults = self._gpu_faults(cur, uuids, since, exclude) if uuids else []
                node_faults, remediated = self._node_past(cur, node, since, exclude) if node else ([], [])
            finally:
                self.db.commit()
                cur.close()
            return HistorySnapshot(node, uuids, tuple(faults + node_faults), tuple(remediated))
        snapshot: HistorySnapshot = await self.db.run(do)
        return snapshot

    def _gpu_faults(self, cur: Any, uuids: tuple[str, ...], since: datetime, exclude: str) -> list[Fault]:
        marks = ", ".join("?" for _ in uuids)
        cur.execute(self.db.q(_GPU_ROWS.format(marks=marks)), (*uuids, iso(since), exclude))
        out = []
        opened_at: dict[str, datetime] = {}  # one parse per incident, not per GPU row
        for uuid, incident, opened, node, raw in cur.fetchall():
            at = opened_at.get(opened) or opened_at.setdefault(opened, _instant(opened))
            out.append(Fault(incident, at, uuid, node, *_gpu_facts(raw)))
        return out

    def _node_past(self, cur: Any, node: str, since: datetime, exclude: str) -> tuple[list[Fault], list[Remediated]]:
        cur.execute(self.db.q(_NODE_INCIDENTS), (node, iso(since), exclude, MAX_NODE_INCIDENTS))
        opened = {inc_id: _instant(at) for inc_id, at in cur.fetchall()}
        if not opened:
            return [], []
        ids = list(opened)
        marks = ", ".join("?" for _ in ids)
        # by incident (incident_facets_incident): a condition on the kind would let the planner walk the
        # primary key's (kind, value, seq) over every incident's Xid facets instead; a node incident has few
        cur.execute(self.db.q(f"SELECT incident_id, kind, value FROM incident_facets WHERE incident_id IN ({marks})"),
                    ids)
        seen: dict[str, dict[str, list[str]]] = {}
        for inc_id, kind, value in cur.fetchall():
            if kind in NODE_FACETS:
                seen.setdefault(inc_id, {}).setdefault(kind, []).append(value)
        # by incident (remediations_incident), the state checked here: the state index would list every done one
        cur.execute(self.db.q(f"SELECT state, doc FROM remediations WHERE incident_id IN ({marks})"), ids)
        remediated = [r for r in (_remediated(json.loads(raw), node) for state, raw in cur.fetchall() if state == DONE)
                      if r is not None]
        ended = {r.incident: r for r in sorted(remediated, key=lambda r: r.at)}
        faults = [_node_row(inc_id, at, node, seen.get(inc_id, {}), ended.get(inc_id)) for inc_id, at in opened.items()]
        return faults, remediated


def _node_row(inc_id: str, opened: datetime, node: str, facets: dict[str, list[str]],
              remediation: Remediated | None) -> Fault:
    """A node's earlier incident from its facets (store/history.py ``repair_facets``): its Xids, its faults'
    kinds, and when its repair ended (the later of the uncordon and its last remediation that ran)."""
    uncordon = max((t for t in map(parse_iso, facets.get(Facet.REPAIRED, ())) if t is not None), default=None)
    return _with_repair(Fault(inc_id, opened, "", node, tuple(sorted(int(x) for x in facets.get(Facet.XID, ()))),
                              tuple(sorted(facets.get(Facet.CAUSE, ())))), uncordon, remediation)


def _with_repair(fault: Fault, uncordon: datetime | None, remediation: Remediated | None) -> Fault:
    """``fault`` with the later of its uncordon and its remediation's end as its repair."""
    repairs = [(uncordon, "uncordon")] if uncordon is not None else []
    if remediation is not None:
        repairs.append((remediation.at, remediation.action))
    if not repairs:
        return fault
    at, what = max(repairs, key=lambda r: r[0])
    return fault._replace(repaired_at=at, repair=what)


def _gpu_facts(raw: str | bytes) -> tuple[tuple[int, ...], tuple[str, ...], tuple[str, ...]]:
    """(Xids, signals, alert names) of a gpu_history doc, short keys (store/history.py history_row_doc) or the
    long keys of earlier versions (history_doc), without building the whole doc: a 256-GPU read has thousands."""
    doc = orjson.loads(raw)
    if "x" in doc or "s" in doc or "a" in doc or not any(k in doc for k in ("xids", "signals", "alertnames")):
        return tuple(doc.get("x", ())), tuple(doc.get("s", ())), tuple(doc.get("a", ()))
    full = history_doc(doc)
    return (tuple(x for x in as_array(full["xids"]) if isinstance(x, int)),
            tuple(x for x in as_array(full["signals"]) if isinstance(x, str)),
            tuple(x for x in as_array(full["alertnames"]) if isinstance(x, str)))


def _remediated(doc: Mapping[str, object], node: str) -> Remediated | None:
    """A stored remediation (Remediation.to_dict()) that acted on ``node``: not a dry run."""
    at = parse_iso(str(doc.get("updatedAt") or ""))
    nodes = doc.get("nodes")
    if at is None or doc.get("dryRun", True) or not isinstance(nodes, list) or node not in nodes:
        return None
    return Remediated(str(doc.get("incident") or ""), node, str(doc.get("action") or ""), at)


def _instant(text: str) -> datetime:
    found = parse_iso(text)
    assert found is not None
    return found


def snapshot_of(incidents: Iterable[Incident], gpus: Sequence[str], node: str, since: datetime,
                exclude: str = "") -> HistorySnapshot:
    """The same snapshot from incidents in memory (``alertd test`` and ``alertd replay`` keep no store): each
    incident's GPU views (as gpu_history holds them) and its node's view, with the uncordon as its repair."""
    uuids = tuple(dict.fromkeys(g for g in gpus if g))
    faults: list[Fault] = []
    for inc in incidents:
        if inc.id == exclude or inc.opened_at < since or inc.fleet:
            continue
        views = seen_now(inc)  # the node's view first: what the node showed of the incident
        if node and inc.node == node:
            own = views[0]
            faults.append(_with_repair(Fault(inc.id, inc.opened_at, "", inc.node, own.xids, own.signals,
                                             own.alertnames), uncordoned_at(inc), None))
        for view in views[1:]:
            if view.gpu in uuids:
                faults.append(Fault(inc.id, inc.opened_at, view.gpu, inc.node, view.xids, view.signals,
                                    view.alertnames))
    return HistorySnapshot(node, uuids, tuple(faults), ())
