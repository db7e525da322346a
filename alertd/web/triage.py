"""The incident list as a triage view: the worst first, and a fleet incident as one row over its node incidents.

The order is every list's (alertd/web/worst_first.py: open before acknowledged before resolved, critical
down to info, the newest first), as the API and the CLI list.

A node incident folded into a fleet (``parentId``) is shown inside its fleet's row instead of on its own
when the fleet is listed at least as high (a status and severity as bad or worse, within the status and
severity filters) and the query does not look for a node, a GPU or a team (a node search wants the node's
own incidents; a fleet holds no alerts, so no team): a node incident that a verdict made worse than its
fleet is listed on its own as well, where its severity puts it. A fleet row counts its node incidents by
status and severity and says what they share (rack, jobs, namespace, driver, GPU model); the worst
``CHILDREN_SHOWN`` are in the row, all of them on the fleet's node page, a hundred a page.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Protocol

from alertd.core.findings import JOBS, Job
from alertd.core.json_types import JSONObject, as_object, each, objects, strings, text
from alertd.core.model import INCIDENT_STATES, SEVERITIES
from alertd.store.reads import IncidentQuery
from alertd.web.api import resolve_gpu_filter
from alertd.web.fleet_views import FleetReads
from alertd.web.params import BadParam, decode_cursor, encode_cursor, incident_query
from alertd.web.worst_first import cursor_of, rank, worst_first, worst_first_page

CHILDREN_SHOWN = 20
NODES_PAGE = 100
SHOWS_CHILDREN = ("node", "gpu", "team")  # filters that list a fleet's node incidents on their own
# What a fleet's node incidents may share, read from their alerts' labels (dcgm-exporter's and the site's own)
SHARED_LABELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rack", ("rack",)),
    ("driver", ("DCGM_FI_DRIVER_VERSION", "driver_version")),
    ("GPU model", ("modelName",)),
)


class TriageReads(FleetReads, Protocol):
    async def incident_docs(self, ids: list[str]) -> list[JSONObject]: ...

    async def member_labels(self, ids: list[str]) -> list[tuple[str, dict[str, str]]]: ...


@dataclass(slots=True)
class Shared:
    """One fact of a fleet's node incidents: its values, the most common first, with how many nodes show each."""

    name: str
    values: list[tuple[str, int]]
    nodes: int  # node incidents in the fleet

    @property
    def line(self) -> str:
        head = self.values[:3]
        if len(head) == 1 and head[0][1] == self.nodes:
            return f"{self.name} {head[0][0]} (all {self.nodes})"
        shown = ", ".join(f"{v} ({n} of {self.nodes})" if i == 0 else f"{v} ({n})" for i, (v, n) in enumerate(head))
        more = len(self.values) - len(head)
        return f"{self.name} {shown}" + (f" +{more} more" if more else "")


@dataclass(slots=True)
class Fleet:
    """A fleet row's contents: its node incidents, worst first, their counts and what they share."""

    children: list[JSONObject]
    by_status: list[tuple[str, int]]
    by_severity: list[tuple[str, int]]
    shared: list[Shared] = field(default_factory=list)

    @property
    def shown(self) -> list[JSONObject]:
        return self.children[:CHILDREN_SHOWN]

    @property
    def more(self) -> int:
        return max(0, len(self.children) - CHILDREN_SHOWN)


@dataclass(slots=True)
class Row:
    doc: JSONObject
    fleet: Fleet | None = None


async def triage_page(store: TriageReads, query: Mapping[str, str]) -> tuple[list[Row], str | None]:
    """One page of the list for these query parameters, the worst first (raises BadParam)."""
    cursor = cursor_of(query)
    q, ident = incident_query({k: v for k, v in query.items() if k != "cursor"})
    if not await resolve_gpu_filter(store, q, ident):
        return [], None
    parents, inside = dict[str, JSONObject](), dict[str, JSONObject]()  # inside: read, shown in a fleet's row

    async def fold(rows: list[tuple[int, JSONObject]], bucket: int) -> set[str]:
        """The rows inside their fleet's, and every node incident of a fleet listed in this range or before:
        those not read yet rank here or lower, so they fold too, and are read once, with their fleet's row."""
        parents.update((text(doc, "id"), doc) for _, doc in rows if doc.get("fleet"))
        await _load_parents(store, parents, rows)
        inside.update((text(doc, "id"), doc) for _, doc in rows if _folded(doc, parents, q))
        ahead = {c for p in parents.values() if rank(p) <= bucket and _listed(p, q) for c in strings(p.get("children"))}
        return ahead | {text(doc, "id") for _, doc in rows if text(doc, "id") in inside}

    folds = not any(query.get(name, "").strip() for name in SHOWS_CHILDREN)
    page, nxt = await worst_first_page(store, q, cursor, fold if folds else None)
    return await _rows(store, [doc for _, doc in page], inside), nxt


async def _load_parents(store: TriageReads, parents: dict[str, JSONObject], rows: list[tuple[int, JSONObject]]) -> None:
    wanted = sorted({text(d, "parentId") for _, d in rows if text(d, "parentId")} - parents.keys())
    for doc in await store.incident_docs(wanted):
        parents[text(doc, "id")] = doc


def _folded(doc: JSONObject, parents: Mapping[str, JSONObject], q: IncidentQuery) -> bool:
    """Shown inside its fleet's row: the fleet is listed too, at least as high as this node incident."""
    parent = parents.get(text(doc, "parentId"))
    return parent is not None and _listed(parent, q) and rank(parent) <= rank(doc)


def _listed(fleet: JSONObject, q: IncidentQuery) -> bool:
    """The fleet passes the status and severity filters, so its row is on the list."""
    return not (q.status and text(fleet, "status") != q.status) and not (q.severity and text(fleet, "severity") != q.severity)


async def _rows(store: TriageReads, docs: list[JSONObject], known: Mapping[str, JSONObject]) -> list[Row]:
    """The page's rows; a fleet's with its node incidents (``known``: those read already)."""
    fleets = [d for d in docs if d.get("fleet")]
    ids = [c for d in fleets for c in strings(d.get("children"))]
    missing = [c for c in ids if c not in known]
    children = {**known, **{text(c, "id"): c for c in await store.incident_docs(missing)}} if missing else dict(known)
    labels = await labels_of(store, ids)
    out: list[Row] = []
    for doc in docs:
        if not doc.get("fleet"):
            out.append(Row(doc))
            continue
        kids = [children[c] for c in strings(doc.get("children")) if c in children]
        out.append(Row(doc, fleet_of(kids, labels)))
    return out


async def labels_of(store: TriageReads, ids: list[str]) -> dict[str, list[dict[str, str]]]:
    """The alerts' labels of these incidents, by incident."""
    labels: dict[str, list[dict[str, str]]] = {}
    for incident_id, member_labels in await store.member_labels(ids) if ids else []:
        labels.setdefault(incident_id, []).append(member_labels)
    return labels


def fleet_of(children: list[JSONObject], labels: Mapping[str, list[dict[str, str]]]) -> Fleet:
    statuses = Counter(text(c, "status") for c in children)
    severities = Counter(text(c, "severity") for c in children)
    return Fleet(children=worst_first(children),
                 by_status=[(s, statuses[s]) for s in INCIDENT_STATES if statuses[s]],
                 by_severity=[(s, severities[s]) for s in reversed(SEVERITIES) if severities[s]],
                 shared=shared_facts(children, labels))


def shared_facts(children: list[JSONObject], labels: Mapping[str, list[dict[str, str]]]) -> list[Shared]:
    """Per fact, how many node incidents show each value (a node counts once per value)."""
    seen: dict[str, Counter[str]] = {}
    for child in children:
        members = labels.get(text(child, "id"), [])
        facts = {name: {m.get(k, "") for m in members for k in keys} for name, keys in SHARED_LABELS}
        jobs = each(Job.from_json, as_object(child.get("annotations")).get(JOBS))
        facts["job"] = {f"{j.namespace}/{j.name}" if j.namespace else j.name for j in jobs}
        if text(child, "pod"):  # a workload's namespace, not an exporter's
            facts["namespace"] = {text(child, "namespace")}
        facts["GPU model"] |= {text(g, "model") for g in objects(child.get("gpus"))}
        for name, values in facts.items():
            seen.setdefault(name, Counter()).update(v for v in values if v)
    order = ("rack", "job", "namespace", "driver", "GPU model")
    return [Shared(name, seen[name].most_common(), len(children)) for name in order if seen.get(name)]


def fleet_nodes(children: list[JSONObject], query: Mapping[str, str]) -> tuple[list[JSONObject], str | None, int]:
    """One page of a fleet's node incidents, the worst first: (rows, next cursor, offset of the first)."""
    parts = decode_cursor(query, 1)
    offset = int(parts[0]) if parts and parts[0].isdigit() else 0
    if parts and not parts[0].isdigit():
        raise BadParam("cursor", "cursor is not one this server handed out (use the link to the next page)")
    ordered = worst_first(children)
    nxt = encode_cursor(offset + NODES_PAGE) if offset + NODES_PAGE < len(ordered) else None
    return ordered[offset:offset + NODES_PAGE], nxt, offset
