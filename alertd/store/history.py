"""Searchable facts about incidents, kept beside them when a step commits.

Two things the list API, the web UI and the RMA policy need and an incident's
JSON document cannot answer fast:

* ``incident_facets``: one row per (incident, kind, value) for the filters that
  are lists on an incident (signal, Xid, GPU UUID, team, member node) and the
  Xid x time heatmap;
* ``gpus`` and ``gpu_history``: GPU identity across incidents. The UUID is the
  key; serial and PCI id are recorded as seen; ``gpu_history`` holds one row per
  GPU per incident with the node it sat in then, so node moves show.

Rows are derived from the engine's Incident objects (pure functions here) and
written in the same transaction as the incident itself.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Iterable, TypeVar

from alertd.model import Incident, iso
from alertd.notify.owners import Owners

K = TypeVar("K")
V = TypeVar("V")

MAX_SCANNED_MEMBERS = 256
MAX_NODE_FACETS = 200  # a fleet incident lists thousands of nodes; the first ones are searchable
FACET_KINDS = ("signal", "xid", "gpu", "team", "node")

MIGRATION = [
    """CREATE TABLE incident_facets (
        incident_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        opened_at TEXT NOT NULL,
        kind TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (kind, value, seq))""",
    "CREATE INDEX incident_facets_incident ON incident_facets (incident_id)",
    "CREATE INDEX incident_facets_time ON incident_facets (kind, opened_at)",
    """CREATE TABLE gpus (
        uuid TEXT PRIMARY KEY,
        serial TEXT NOT NULL DEFAULT '',
        pci_bus_id TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        cluster TEXT NOT NULL DEFAULT '',
        node TEXT NOT NULL DEFAULT '',
        first_seen TEXT NOT NULL,
        last_seen TEXT NOT NULL,
        last_incident TEXT NOT NULL DEFAULT '')""",
    "CREATE INDEX gpus_serial ON gpus (serial)",
    "CREATE INDEX gpus_pci ON gpus (pci_bus_id)",
    "CREATE INDEX gpus_last_seen ON gpus (last_seen, uuid)",
    "CREATE INDEX gpus_node ON gpus (node)",
    """CREATE TABLE gpu_history (
        uuid TEXT NOT NULL,
        incident_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        cluster TEXT NOT NULL,
        node TEXT NOT NULL,
        opened_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        status TEXT NOT NULL,
        severity TEXT NOT NULL,
        title TEXT NOT NULL,
        doc TEXT NOT NULL,
        PRIMARY KEY (uuid, seq))""",
    "CREATE INDEX gpu_history_time ON gpu_history (opened_at)",
    "CREATE INDEX gpu_history_node ON gpu_history (node, seq)",
]

DELETE_FACETS = "DELETE FROM incident_facets WHERE incident_id = ?"
DELETE_FACET = "DELETE FROM incident_facets WHERE kind = ? AND value = ? AND seq = ?"  # the primary key
INSERT_FACET = "INSERT INTO incident_facets (incident_id, seq, opened_at, kind, value) VALUES (?, ?, ?, ?, ?)"
UPSERT_HISTORY = """INSERT INTO gpu_history (uuid, incident_id, seq, cluster, node, opened_at, updated_at, status, severity, title, doc)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (uuid, seq) DO UPDATE SET node = excluded.node, updated_at = excluded.updated_at,
  status = excluded.status, severity = excluded.severity, title = excluded.title, doc = excluded.doc"""
UPSERT_GPU = """INSERT INTO gpus (uuid, serial, pci_bus_id, model, cluster, node, first_seen, last_seen, last_incident)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (uuid) DO UPDATE SET
  serial = CASE WHEN excluded.serial <> '' THEN excluded.serial ELSE gpus.serial END,
  pci_bus_id = CASE WHEN excluded.pci_bus_id <> '' THEN excluded.pci_bus_id ELSE gpus.pci_bus_id END,
  model = CASE WHEN excluded.model <> '' THEN excluded.model ELSE gpus.model END,
  cluster = CASE WHEN excluded.last_seen >= gpus.last_seen THEN excluded.cluster ELSE gpus.cluster END,
  node = CASE WHEN excluded.last_seen >= gpus.last_seen THEN excluded.node ELSE gpus.node END,
  last_incident = CASE WHEN excluded.last_seen >= gpus.last_seen THEN excluded.last_incident ELSE gpus.last_incident END,
  first_seen = CASE WHEN excluded.first_seen < gpus.first_seen THEN excluded.first_seen ELSE gpus.first_seen END,
  last_seen = CASE WHEN excluded.last_seen > gpus.last_seen THEN excluded.last_seen ELSE gpus.last_seen END"""

_OWNERS = Owners()


@dataclass(slots=True)
class Sighting:
    """One GPU as one incident saw it."""

    uuid: str
    serial: str = ""
    pci_bus_id: str = ""
    model: str = ""
    index: str = ""
    node: str = ""
    cluster: str = ""
    first: str = ""
    last: str = ""
    xids: set[int] = field(default_factory=set)
    signals: set[str] = field(default_factory=set)
    alertnames: set[str] = field(default_factory=set)


def history_doc(stored: dict[str, Any]) -> dict[str, Any]:
    """A gpu_history row's doc as write() stores it (empty fields left out) -> every field present."""
    return {"xids": [], "signals": [], "alertnames": [], "index": "", "serial": "", "pci_bus_id": "", "first": "",
            "last": "", **stored}


def seq_of(inc: Incident) -> int:
    return int(inc.id.rsplit("-", 1)[-1])


def sightings(inc: Incident, changed: Iterable[str] | None = None) -> list[Sighting]:
    """Per GPU UUID: where it sat and what its alerts said, from the incident's members.

    A storm incident holds thousands of members: there only the members that changed in this step are
    read (their GPUs' rows are rewritten from them), so a step costs what it changed, not the storm's size.
    """
    seen: dict[str, Sighting] = {}
    members = inc.members.values()
    if changed is not None and len(inc.members) > MAX_SCANNED_MEMBERS:
        members = [inc.members[fp] for fp in changed if fp in inc.members]  # type: ignore[assignment]
    for m in members:
        gpu = m.subject.gpu
        if gpu is None or not gpu.uuid:
            continue
        s = seen.get(gpu.uuid)
        if s is None:
            s = seen[gpu.uuid] = Sighting(gpu.uuid)
        s.serial, s.pci_bus_id = gpu.serial or s.serial, gpu.pci_bus_id or s.pci_bus_id
        s.model, s.index = gpu.model or s.model, gpu.index or s.index
        s.node, s.cluster = m.subject.node or s.node or inc.node, m.subject.cluster or s.cluster or inc.cluster
        starts, last = iso(m.starts_at) or "", iso(m.last_seen or m.ends_at or m.starts_at) or ""
        s.first = min(s.first, starts) if s.first else starts
        s.last = max(s.last, last)
        if m.signal.xid:
            s.xids.add(m.signal.xid)
        s.signals.add(m.signal.kind)
        s.alertnames.add(m.alertname)
    return list(seen.values())


def facets(inc: Incident, cache: "FacetCache | None" = None) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = {("signal", s) for s in inc.signals}
    out |= {("xid", str(x)) for x in inc.xids}
    out |= {("gpu", g["uuid"]) for g in inc.gpus if g.get("uuid")}
    out |= node_facets(inc, cache)
    if inc.node:
        out.add(("node", inc.node))
    # The owning team is read from the members: a storm incident's thousands of members (whose jobs belong
    # to many teams anyway) would cost a full scan on every step, so only smaller incidents get one.
    team = _OWNERS.team_for(inc) if len(inc.members) <= MAX_SCANNED_MEMBERS else ""
    if team:
        out.add(("team", team))
    return out


def node_facets(inc: Incident, cache: "FacetCache | None" = None) -> frozenset[tuple[str, str]]:
    """The first nodes of a fleet incident: its node list only grows at the end, so once it is past
    MAX_NODE_FACETS the set is final (kept in the cache instead of rebuilt on every step)."""
    shown = min(len(inc.nodes), MAX_NODE_FACETS)
    memo = cache.nodes.get(inc.id) if cache is not None else None
    if memo is not None and memo[0] == shown:
        return memo[1]
    if memo is not None and memo[0] < shown:  # appended since: add only the new ones
        value = memo[1] | {("node", n) for n in islice(inc.nodes, memo[0], shown) if n}
    else:
        value = frozenset(("node", n) for n in islice(inc.nodes, MAX_NODE_FACETS) if n)
    if cache is not None and shown:
        cache.nodes[inc.id] = (shown, value)
        if len(cache.nodes) > cache.size:
            cache.nodes.pop(next(iter(cache.nodes)))
    return value


@dataclass(slots=True)
class Written:
    facets: dict[str, frozenset[tuple[str, str]]]
    sightings: dict[tuple[str, int], tuple[Any, ...]]


class FacetCache:
    """What was last committed per incident (facets) and per GPU and incident (what the history shows),
    so a step that changed neither writes nothing: most steps only re-fire alerts."""

    def __init__(self, size: int = 20_000):
        self.size = size
        self._known: OrderedDict[str, frozenset[tuple[str, str]]] = OrderedDict()
        self._sightings: OrderedDict[tuple[str, int], tuple[Any, ...]] = OrderedDict()
        self.nodes: dict[str, tuple[int, frozenset[tuple[str, str]]]] = {}  # node_facets memo

    def same_sighting(self, key: tuple[str, int], what: tuple[Any, ...]) -> bool:
        return self._sightings.get(key) == what

    def known(self, incident_id: str) -> frozenset[tuple[str, str]] | None:
        return self._known.get(incident_id)

    def remember(self, written: Written) -> None:
        """Called after the commit succeeded (a rolled-back write must be redone next time)."""
        _remember_into(self._known, written.facets, self.size * 8)
        _remember_into(self._sightings, written.sightings, self.size * 8)


def _remember_into(table: OrderedDict[K, V], items: dict[K, V], limit: int) -> None:
    """Newest last; the oldest entries go once there are more than ``limit``."""
    for key, value in items.items():
        table[key] = value
        table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)


def write(cur: Any, q: Any, incidents: Iterable[tuple[Incident, Iterable[str] | None]], dumps: Any,
          cache: FacetCache | None = None) -> "Written":
    """Rewrite the facets and GPU rows of these incidents (same transaction as the incidents).

    ``incidents``: (incident, fingerprints changed in this step, or None for all). Returns what was
    written, for FacetCache.remember once the transaction committed."""
    facet_rows: list[tuple[Any, ...]] = []
    history_rows: list[tuple[Any, ...]] = []
    gpu_rows: list[tuple[Any, ...]] = []
    ids = []
    gone: list[tuple[str, str, int]] = []
    written: dict[str, frozenset[tuple[str, str]]] = {}
    seen: dict[tuple[str, int], tuple[Any, ...]] = {}
    for inc, changed in incidents:
        seq, opened, updated = seq_of(inc), iso(inc.opened_at) or "", iso(inc.updated_at) or ""
        current = frozenset(facets(inc, cache))
        before = cache.known(inc.id) if cache is not None else None
        if before is None:  # not known since the store opened: rewrite them all
            ids.append((inc.id,))
            facet_rows += [(inc.id, seq, opened, kind, value) for kind, value in sorted(current)]
        elif before != current:  # a growing storm adds a few nodes per step: write only the difference
            gone += [(kind, value, seq) for kind, value in sorted(before - current)]
            facet_rows += [(inc.id, seq, opened, kind, value) for kind, value in sorted(current - before)]
        if before != current:
            written[inc.id] = current
        for s in sightings(inc, changed):
            what = (s.node, inc.status, inc.severity, inc.title, frozenset(s.xids), frozenset(s.signals),
                    frozenset(s.alertnames), s.serial, s.pci_bus_id)
            if cache is not None and cache.same_sighting((s.uuid, seq), what):
                continue  # an alert re-fired: nothing the history shows changed (last seen moves on change)
            seen[(s.uuid, seq)] = what
            doc = {"xids": sorted(s.xids), "signals": sorted(s.signals), "alertnames": sorted(s.alertnames),
                   "index": s.index, "serial": s.serial, "pci_bus_id": s.pci_bus_id, "first": s.first, "last": s.last}
            doc = {k: v for k, v in doc.items() if v}  # one row per GPU and incident: empty fields cost bytes
            history_rows.append((s.uuid, inc.id, seq, s.cluster, s.node, opened, updated, inc.status, inc.severity,
                                 inc.title, dumps(doc)))
            gpu_rows.append((s.uuid, s.serial, s.pci_bus_id, s.model, s.cluster, s.node, s.first or opened,
                             max(s.last, opened), inc.id))
    if ids:
        cur.executemany(q(DELETE_FACETS), ids)
    if gone:
        cur.executemany(q(DELETE_FACET), gone)
    if facet_rows:
        cur.executemany(q(INSERT_FACET), facet_rows)
    if history_rows:
        cur.executemany(q(UPSERT_HISTORY), history_rows)
    if gpu_rows:
        cur.executemany(q(UPSERT_GPU), gpu_rows)
    return Written(written, seen)
