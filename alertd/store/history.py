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
from enum import StrEnum
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Iterable, TypeVar

from alertd.core.json_types import JSONObject
from alertd.core.model import Incident, Member, iso
from alertd.engine.judge import is_fault
from alertd.engine.response import uncordoned_at
from alertd.rules.owners import OwnerRouting

K = TypeVar("K")
V = TypeVar("V")

MAX_SCANNED_MEMBERS = 256
MAX_NODE_FACETS = 200  # a fleet incident lists thousands of nodes; the first ones are searchable


class Facet(StrEnum):
    """The kind of an ``incident_facets`` row: what the list's filters find an incident by (a GPU filter reads
    gpu_history; an incident's own node, incidents.node) and what the history judge (store/history_snapshot.py)
    reads of a node's own earlier incidents."""

    SIGNAL = "signal"
    XID = "xid"
    TEAM = "team"
    NODE = "node"  # a member node of a fleet incident
    CAUSE = "cause"  # the signal kind of a fault member (judge)
    REPAIRED = "repaired"  # when the node was uncordoned after it (judge)


# gpu_history docs are stored with short keys (and "last" left out when it equals the row's updated_at)
SHORT_KEYS = {"xids": "x", "signals": "s", "alertnames": "a", "index": "i", "serial": "n", "pci_bus_id": "p",
              "first": "f", "last": "l"}
LONG_OF = {short: long for long, short in SHORT_KEYS.items()}

# What the gpus table knows of a GPU besides its UUID (the same in both of its versions)
_GPU_FIELDS = """
        serial TEXT NOT NULL DEFAULT '',
        pci_bus_id TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        cluster TEXT NOT NULL DEFAULT '',
        node TEXT NOT NULL DEFAULT '',
        first_seen TEXT NOT NULL,
        last_seen TEXT NOT NULL,
        last_incident TEXT NOT NULL DEFAULT '')"""

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
        uuid TEXT PRIMARY KEY,""" + _GPU_FIELDS,
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

# The search facets and GPU rows made smaller (every storm alert pays for them). {int_key} is the backend's
# integer primary key that needs no index of its own (SQLite: INTEGER, the rowid).
SLIM_MIGRATION = [
    # the GPU filter reads gpu_history's (gpu, seq) key, which lists every GPU of an incident already
    "DELETE FROM incident_facets WHERE kind = 'gpu'",
    # an incident's own node is its node column, which the node filter reads too
    "DELETE FROM incident_facets WHERE kind = 'node' AND value = "
    "(SELECT i.node FROM incidents i WHERE i.id = incident_facets.incident_id)",
    # only the Xid heatmap reads a facet's opening time (through incident_facets_time)
    "UPDATE incident_facets SET opened_at = '' WHERE kind <> 'xid'",
    # GPUs get an integer id, which gpu_history rows name instead of the 40-character UUID
    """CREATE TABLE gpus_v2 (
        id {serial} PRIMARY KEY,
        uuid TEXT NOT NULL UNIQUE,""" + _GPU_FIELDS,
    """INSERT INTO gpus_v2 (uuid, serial, pci_bus_id, model, cluster, node, first_seen, last_seen, last_incident)
    SELECT uuid, serial, pci_bus_id, model, cluster, node, first_seen, last_seen, last_incident FROM gpus
    ORDER BY first_seen, uuid""",
    # what a history row showed of its incident is kept once per incident (the newest row's values)
    """CREATE TABLE gpu_incidents (
        seq {int_key} PRIMARY KEY,
        incident_id TEXT NOT NULL,
        opened_at TEXT NOT NULL,
        status TEXT NOT NULL,
        severity TEXT NOT NULL,
        title TEXT NOT NULL)""",
    "CREATE INDEX gpu_history_upgrade ON gpu_history (seq, updated_at, uuid)",
    """INSERT INTO gpu_incidents (seq, incident_id, opened_at, status, severity, title)
    SELECT h.seq, h.incident_id, h.opened_at, h.status, h.severity, h.title FROM gpu_history h
    WHERE NOT EXISTS (SELECT 1 FROM gpu_history n WHERE n.seq = h.seq
                      AND (n.updated_at > h.updated_at OR (n.updated_at = h.updated_at AND n.uuid > h.uuid)))""",
    """CREATE TABLE gpu_history_v2 (
        gpu BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        cluster TEXT NOT NULL,
        node TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        doc TEXT NOT NULL,
        PRIMARY KEY (gpu, seq))""",
    """INSERT INTO gpu_history_v2 (gpu, seq, cluster, node, updated_at, doc)
    SELECT g.id, h.seq, h.cluster, h.node, h.updated_at, h.doc FROM gpu_history h JOIN gpus_v2 g ON g.uuid = h.uuid""",
    "DROP TABLE gpu_history",
    "DROP TABLE gpus",
    "ALTER TABLE gpu_history_v2 RENAME TO gpu_history",
    "ALTER TABLE gpus_v2 RENAME TO gpus",
    # GPUs by node: through gpu_history_node (every node a GPU sat in), then its current node
    "CREATE INDEX gpu_history_node ON gpu_history (node, seq)",
    "CREATE INDEX gpu_history_seq ON gpu_history (seq)",
    "CREATE INDEX gpu_incidents_time ON gpu_incidents (opened_at)",
    "CREATE INDEX gpus_pci ON gpus (pci_bus_id)",
    # the list's keyset order needs last_seen; ties are few and sorted on the spot
    "CREATE INDEX gpus_last_seen ON gpus (last_seen)",
    # most GPUs alert without a serial: only the ones with one are looked up by it
    "CREATE INDEX gpus_serial ON gpus (serial) WHERE serial <> ''",
]

DELETE_FACETS = "DELETE FROM incident_facets WHERE incident_id = ?"
DELETE_FACET = "DELETE FROM incident_facets WHERE kind = ? AND value = ? AND seq = ?"  # the primary key
INSERT_FACET = "INSERT INTO incident_facets (incident_id, seq, opened_at, kind, value) VALUES (?, ?, ?, ?, ?)"
# The GPU's id is looked up by UUID in the statement (its gpus row is upserted just before): a step's
# statements are built before its transaction, so nothing read inside it can be needed to build them.
UPSERT_HISTORY = """INSERT INTO gpu_history (gpu, seq, cluster, node, updated_at, doc)
VALUES ((SELECT g.id FROM gpus g WHERE g.uuid = ?), ?, ?, ?, ?, ?)
ON CONFLICT (gpu, seq) DO UPDATE SET node = excluded.node, updated_at = excluded.updated_at, doc = excluded.doc"""
UPSERT_GPU_INCIDENT = """INSERT INTO gpu_incidents (seq, incident_id, opened_at, status, severity, title)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (seq) DO UPDATE SET status = excluded.status, severity = excluded.severity, title = excluded.title"""
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

_OWNERS = OwnerRouting()


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


def history_doc(stored: JSONObject, updated_at: str = "") -> JSONObject:
    """A gpu_history row's doc as any version stored it -> every field present.

    Short keys (history_row_doc): empty fields left out, a missing "last" is the row's updated_at. Long keys
    (earlier versions): all fields, or the non-empty ones."""
    doc: JSONObject = {"xids": [], "signals": [], "alertnames": [], "index": "", "serial": "", "pci_bus_id": "",
                       "first": "", "last": ""}
    if any(k in stored for k in LONG_OF):
        doc["last"] = updated_at
        doc.update((LONG_OF[k], v) for k, v in stored.items() if k in LONG_OF)
    else:
        doc.update(stored)
    return doc


def history_row_doc(s: "Sighting", updated_at: str) -> JSONObject:
    """What a gpu_history row's doc stores of a sighting: short keys, no empty fields, no "last" equal to
    updated_at (one row per GPU and incident: every byte counts once per alert)."""
    doc: JSONObject = {"x": [*sorted(s.xids)], "s": [*sorted(s.signals)],
                       "a": [*sorted(s.alertnames)], "i": s.index, "n": s.serial, "p": s.pci_bus_id,
                       "f": s.first}
    out: JSONObject = {k: v for k, v in doc.items() if v}
    if s.last != updated_at:
        out["l"] = s.last
    elif not out:  # an empty doc reads as a long-key one: keep one short key
        out["l"] = s.last
    return out


def seq_of(inc: Incident) -> int:
    return int(inc.id.rsplit("-", 1)[-1])


def sightings(inc: Incident, changed: Iterable[str] | None = None) -> list[Sighting]:
    """Per GPU UUID: where it sat and what its alerts said, from the incident's members.

    A storm incident holds thousands of members: there only the members that changed in this step are
    read (their GPUs' rows are rewritten from them), so a step costs what it changed, not the storm's size.
    """
    seen: dict[str, Sighting] = {}
    members: Iterable[Member] = inc.members.values()
    if changed is not None and len(inc.members) > MAX_SCANNED_MEMBERS:
        members = [inc.members[fp] for fp in changed if fp in inc.members]
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
    out: set[tuple[str, str]] = {(Facet.SIGNAL, s) for s in inc.signals}
    out |= {(Facet.XID, str(x)) for x in inc.xids}
    out |= node_facets(inc, cache) - {(Facet.NODE, inc.node)}
    # The owning team is read from the members: a storm incident's thousands of members (whose jobs belong
    # to many teams anyway) would cost a full scan on every step, so only smaller incidents get one.
    team = _OWNERS.team_for(inc) if len(inc.members) <= MAX_SCANNED_MEMBERS else ""
    if team:
        out.add((Facet.TEAM, team))
    if inc.node and not inc.fleet and len(inc.members) <= MAX_SCANNED_MEMBERS:
        out |= repair_facets(inc)
    return out


def repair_facets(inc: Incident) -> set[tuple[str, str]]:
    """What the history judge reads of a node's earlier incident without its members: the kinds of its
    faults (``cause``: repair symptoms left out) and when its repair ended (``repaired``: the uncordon that
    ended its response, engine/response.py)."""
    out: set[tuple[str, str]] = {(Facet.CAUSE, m.signal.kind) for m in inc.members.values() if is_fault(m)}
    repaired = uncordoned_at(inc)
    if repaired is not None:
        out.add((Facet.REPAIRED, iso(repaired)))
    return out


def node_facets(inc: Incident, cache: "FacetCache | None" = None) -> frozenset[tuple[str, str]]:
    """The first nodes of a fleet incident: its node list only grows at the end, so once it is past
    MAX_NODE_FACETS the set is final (kept in the cache instead of rebuilt on every step)."""
    shown = min(len(inc.nodes), MAX_NODE_FACETS)
    memo = cache.nodes.get(inc.id) if cache is not None else None
    if memo is not None and memo[0] == shown:
        return memo[1]
    if memo is not None and memo[0] < shown:  # appended since: add only the new ones
        value = memo[1] | {(Facet.NODE, n) for n in islice(inc.nodes, memo[0], shown) if n}
    else:
        value = frozenset((Facet.NODE, n) for n in islice(inc.nodes, MAX_NODE_FACETS) if n)
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
    incident_rows: dict[int, tuple[Any, ...]] = {}
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
            facet_rows += [(inc.id, seq, opened if kind == Facet.XID else "", kind, value) for kind, value in sorted(current)]
        elif before != current:  # a growing storm adds a few nodes per step: write only the difference
            gone += [(kind, value, seq) for kind, value in sorted(before - current)]
            facet_rows += [(inc.id, seq, opened if kind == Facet.XID else "", kind, value)
                           for kind, value in sorted(current - before)]
        if before != current:
            written[inc.id] = current
        for s in sightings(inc, changed):
            what = (s.node, inc.status, inc.severity, inc.title, frozenset(s.xids), frozenset(s.signals),
                    frozenset(s.alertnames), s.serial, s.pci_bus_id)
            if cache is not None and cache.same_sighting((s.uuid, seq), what):
                continue  # an alert re-fired: nothing the history shows changed (last seen moves on change)
            seen[(s.uuid, seq)] = what
            history_rows.append((s.uuid, seq, s.cluster, s.node, updated, dumps(history_row_doc(s, updated))))
            incident_rows[seq] = (seq, inc.id, opened, inc.status, inc.severity, inc.title)
            gpu_rows.append((s.uuid, s.serial, s.pci_bus_id, s.model, s.cluster, s.node, s.first or opened,
                             max(s.last, opened), inc.id))
    if ids:
        cur.executemany(q(DELETE_FACETS), ids)
    if gone:
        cur.executemany(q(DELETE_FACET), gone)
    if facet_rows:
        cur.executemany(q(INSERT_FACET), facet_rows)
    if gpu_rows:
        cur.executemany(q(UPSERT_GPU), gpu_rows)
    if incident_rows:
        cur.executemany(q(UPSERT_GPU_INCIDENT), list(incident_rows.values()))
    if history_rows:
        cur.executemany(q(UPSERT_HISTORY), history_rows)
    return Written(written, seen)
