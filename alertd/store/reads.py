"""Read side of the store for the API and the web UI: filtered incident pages, GPUs, nodes, the fleet.

Every list is keyset-paginated (``before``: the last seq or key of the previous
page), so page N costs what page 1 costs even with 50,000 incidents.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Collection

from alertd.core.json_types import JSONObject, integer, obj, string_map
from alertd.core.model import ACKNOWLEDGED, OPEN, Incident, iso
from alertd.store.database import Database, Part
from alertd.store.history import Facet, history_doc
from alertd.store.sql import assemble, incident_doc, unpacked


IDS_PER_QUERY = 4000  # ids or nodes in one IN list: two of them stay under SQLite's 32,766 parameters


@dataclass(slots=True)
class IncidentQuery:
    status: str = ""
    severity: str = ""
    cluster: str = ""
    node: str = ""
    gpus: list[str] = field(default_factory=list)  # UUIDs (an identifier resolved to them beforehand)
    signal: str = ""
    xid: str = ""
    team: str = ""
    since: datetime | None = None  # updated at or after
    until: datetime | None = None  # opened at or before
    before: int | None = None  # keyset cursor: seq of the last row of the previous page
    limit: int = 100
    leave_out: frozenset[str] = frozenset()  # ids not to read (shown inside another row, read with it)


def incident_sql(q: IncidentQuery) -> tuple[str, list[Any]]:
    where: list[str] = []
    args: list[Any] = []
    for column in ("status", "severity", "cluster"):
        if getattr(q, column):
            where.append(f"{column} = ?")
            args.append(getattr(q, column))
    if q.node:
        where.append("(node = ? OR seq IN (SELECT seq FROM incident_facets WHERE kind = 'node' AND value = ?))")
        args += [q.node, q.node]
    for kind, value in ((Facet.SIGNAL, q.signal), (Facet.XID, q.xid), (Facet.TEAM, q.team)):
        if value:
            where.append("seq IN (SELECT seq FROM incident_facets WHERE kind = ? AND value = ?)")
            args += [kind, value]
    if q.gpus:
        marks = ", ".join("?" for _ in q.gpus)
        where.append(f"seq IN (SELECT h.seq FROM gpus g JOIN gpu_history h ON h.gpu = g.id WHERE g.uuid IN ({marks}))")
        args += q.gpus
    if q.since:
        where.append("updated_at >= ?")
        args.append(iso(q.since))
    if q.until:
        where.append("opened_at <= ?")
        args.append(iso(q.until))
    if q.before is not None:
        where.append("seq < ?")
        args.append(q.before)
    if q.leave_out:
        left = sorted(q.leave_out)[:IDS_PER_QUERY]  # past that many, the rest are read and skipped by the caller
        where.append(f"id NOT IN ({', '.join('?' for _ in left)})")
        args += left
    statement = "SELECT seq, doc FROM incidents" + (" WHERE " + " AND ".join(where) if where else "")
    return statement + " ORDER BY seq DESC LIMIT ?", args + [q.limit]


GPU_COLUMNS = ("uuid", "serial", "pci_bus_id", "model", "cluster", "node", "first_seen", "last_seen", "last_incident")
_GPU_SELECT = "SELECT " + ", ".join(GPU_COLUMNS) + " FROM gpus"


def _gpu(row: tuple[Any, ...]) -> JSONObject:
    return dict(zip(GPU_COLUMNS, row))


def _history(row: tuple[Any, ...]) -> JSONObject:
    doc = history_doc(json.loads(row[10]), row[6])
    return {"uuid": row[0], "incident": row[1], "seq": row[2], "cluster": row[3], "node": row[4], "openedAt": row[5],
            "updatedAt": row[6], "status": row[7], "severity": row[8], "title": row[9], **doc}


# A GPU's row per incident, with what it showed of the incident (kept once per incident in gpu_incidents)
HISTORY_FROM = " FROM gpu_history h JOIN gpu_incidents i ON i.seq = h.seq JOIN gpus g ON g.id = h.gpu"
HISTORY_SELECT = ("SELECT g.uuid, i.incident_id, h.seq, h.cluster, h.node, i.opened_at, h.updated_at, i.status, "
                  "i.severity, i.title, h.doc" + HISTORY_FROM)


def assemble_incident(db: Database, cur: Any, inc_id: str, doc: str | bytes, recent: int | None = None) -> Incident:
    """An incident from its rows (store thread): its members, and its timeline (``recent``: only the newest)."""
    cur.execute(db.q("SELECT fingerprint, doc FROM members WHERE incident_id = ?"), (inc_id,))
    members = [(r[0], r[1]) for r in cur.fetchall()]
    if recent is None:
        cur.execute(db.q("SELECT doc FROM events WHERE incident_id = ? ORDER BY id"), (inc_id,))
        events = [r[0] for r in cur.fetchall()]
    else:
        cur.execute(db.q("SELECT doc FROM events WHERE incident_id = ? ORDER BY id DESC LIMIT ?"), (inc_id, recent))
        events = [r[0] for r in reversed(cur.fetchall())]
    return assemble(doc, members, events)


class HistoryReads(Part):
    """Incident, GPU and node history for the API and the web UI (a part of the store)."""

    async def list_incidents(self, *, status: str | None = None, node: str | None = None,
                             since: datetime | None = None, limit: int = 100) -> list[JSONObject]:
        rows = await self.query_incidents(IncidentQuery(status=status or "", node=node or "", since=since, limit=limit))
        return [doc for _, doc in rows]

    async def get_incident(self, incident_id: str) -> Incident | None:
        """An incident with its members and whole timeline."""
        def do() -> Incident | None:
            cur = self.db.cursor()
            cur.execute(self.db.q("SELECT doc FROM incidents WHERE id = ?"), (incident_id,))
            row = cur.fetchone()
            inc = assemble_incident(self.db, cur, incident_id, row[0]) if row else None
            self.db.commit()
            cur.close()
            return inc
        found: Incident | None = await self.db.run(do)
        return found

    async def incidents_with_members(self, ids: list[str]) -> list[Incident]:
        """These incidents with their members and no timeline (what a silence is scoped and matched by): one
        query for up to ``IDS_PER_QUERY`` of them."""
        out: list[Incident] = []
        for start in range(0, len(ids), IDS_PER_QUERY):
            chunk = ids[start:start + IDS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            out += await self._with_members(f"SELECT id, doc FROM incidents WHERE id IN ({marks})", chunk)
        return out

    async def open_incidents_on(self, nodes: list[str], limit: int, known: Collection[str] = ()) -> list[Incident]:
        """The open and acknowledged incidents on these nodes (their node, or one of a fleet's nodes), the newest
        ``limit`` per ``IDS_PER_QUERY`` nodes, with their members and no timeline, but for those in ``known``
        (read already: not decoded again): one query for up to that many nodes. A union of two index lookups
        (``incidents_node`` and the facets' key), not an OR the planner answers with a scan."""
        out: list[Incident] = []
        for start in range(0, len(nodes), IDS_PER_QUERY):
            chunk = nodes[start:start + IDS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            statement = (f"SELECT id, doc FROM incidents WHERE status IN (?, ?) AND seq IN ("
                         f"SELECT seq FROM incidents WHERE node IN ({marks}) UNION "
                         f"SELECT seq FROM incident_facets WHERE kind = 'node' AND value IN ({marks})) "
                         "ORDER BY seq DESC LIMIT ?")
            out += await self._with_members(statement, [OPEN, ACKNOWLEDGED, *chunk, *chunk, limit], known)
        return out

    async def _with_members(self, incidents: str, args: list[Any], known: Collection[str] = ()) -> list[Incident]:
        """The incidents ``incidents`` selects (id, doc), each with its members, but for the ``known`` ones: one
        query, a row per member."""
        statement = (f"SELECT i.id, i.doc, m.fingerprint, m.doc FROM ({incidents}) i "
                     "LEFT JOIN members m ON m.incident_id = i.id")
        docs: dict[str, str | bytes] = {}
        members: dict[str, list[tuple[str, str | bytes]]] = {}
        for inc_id, doc, fingerprint, member in await self.db.run(self.db.query, statement, args):
            if inc_id in known:
                continue
            docs[inc_id] = doc
            if fingerprint is not None:
                members.setdefault(inc_id, []).append((fingerprint, member))
        return [assemble(doc, members.get(inc_id, ()), ()) for inc_id, doc in docs.items()]

    async def query_incidents(self, q: IncidentQuery) -> list[tuple[int, JSONObject]]:
        statement, args = incident_sql(q)
        return [(seq, incident_doc(doc)) for seq, doc in await self.db.run(self.db.query, statement, args)]

    async def incident_docs(self, ids: list[str]) -> list[JSONObject]:
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        rows = await self.db.run(self.db.query, f"SELECT doc FROM incidents WHERE id IN ({marks}) ORDER BY seq", ids)
        return [incident_doc(r[0]) for r in rows]

    async def member_labels(self, ids: list[str]) -> list[tuple[str, dict[str, str]]]:
        """(incident id, labels) of every member of these incidents: what a fleet's node incidents share."""
        out: list[tuple[str, dict[str, str]]] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = await self.db.run(self.db.query, f"SELECT incident_id, doc FROM members WHERE incident_id IN ({marks})",
                                     chunk)
            out += [(r[0], string_map(obj(json.loads(unpacked(r[1])), "a member document").get("labels")))
                    for r in rows]
        return out

    async def find_gpus(self, ident: str) -> list[JSONObject]:
        """GPUs known by this UUID, serial or (normalised) PCI id; a PCI id can name a GPU on many nodes."""
        from alertd.gpu.pci import normalize_pci

        pci = normalize_pci(ident) if ":" in ident else ""
        # "serial <> ''" lets the lookup use the partial index of the GPUs that have a serial
        rows = await self.db.run(self.db.query, _GPU_SELECT + " WHERE uuid = ? OR (serial = ? AND serial <> '') "
                               "OR pci_bus_id = ? ORDER BY last_seen DESC", (ident, ident, pci or ident))
        return [_gpu(r) for r in rows]

    async def list_gpus(self, *, node: str = "", before: tuple[str, str] | None = None,
                        limit: int = 100) -> list[JSONObject]:
        where, args = [], []
        if node:  # the GPUs that ever sat in the node (gpu_history_node), then where each is now
            where.append("node = ? AND id IN (SELECT gpu FROM gpu_history WHERE node = ?)")
            args += [node, node]
        if before is not None:
            where.append("last_seen <= ? AND (last_seen < ? OR uuid < ?)")  # a range of the last_seen index
            args += [before[0], before[0], before[1]]
        statement = _GPU_SELECT + (" WHERE " + " AND ".join(where) if where else "")
        rows = await self.db.run(self.db.query, statement + " ORDER BY last_seen DESC, uuid DESC LIMIT ?", [*args, limit])
        return [_gpu(r) for r in rows]

    async def gpu_history(self, uuid: str) -> list[JSONObject]:
        rows = await self.db.run(self.db.query, HISTORY_SELECT + " WHERE g.uuid = ? ORDER BY h.seq", (uuid,))
        return [_history(r) for r in rows]

    async def gpu_history_since(self, since: datetime) -> list[JSONObject]:
        # the incidents opened since (gpu_incidents_time), then their rows (gpu_history_seq), in seq order
        rows = await self.db.run(self.db.query, HISTORY_SELECT + " WHERE h.seq IN (SELECT seq FROM gpu_incidents "
                               "WHERE opened_at >= ?) ORDER BY h.seq", (iso(since),))
        return [_history(r) for r in rows]

    async def gpus_by_uuid(self, uuids: list[str]) -> dict[str, JSONObject]:
        out: dict[str, JSONObject] = {}
        for start in range(0, len(uuids), 500):
            chunk = uuids[start:start + 500]
            marks = ", ".join("?" for _ in chunk)
            for r in await self.db.run(self.db.query, _GPU_SELECT + f" WHERE uuid IN ({marks})", chunk):
                out[r[0]] = _gpu(r)
        return out

    async def node_gpus(self, node: str) -> list[JSONObject]:
        """Every GPU ever seen in this node, with the incidents it had there."""
        rows = await self.db.run(self.db.query, "SELECT g.uuid, count(*), min(i.opened_at), max(h.updated_at)" + HISTORY_FROM
                               + " WHERE h.node = ? GROUP BY g.uuid ORDER BY g.uuid", (node,))
        return [{"uuid": r[0], "incidents": r[1], "first": r[2], "last": r[3]} for r in rows]

    async def ranking(self, since: datetime, limit: int = 20) -> dict[str, list[JSONObject]]:
        """GPUs and nodes with the most incidents opened since ``since``."""
        gpus = await self.db.run(self.db.query, "SELECT g.uuid, count(*) AS n, max(h.node)" + HISTORY_FROM
                               + " WHERE i.opened_at >= ? GROUP BY g.uuid ORDER BY n DESC, g.uuid LIMIT ?", (iso(since), limit))
        nodes = await self.db.run(self.db.query, "SELECT node, count(*) AS n FROM incidents WHERE opened_at >= ? AND node <> '' "
                                "GROUP BY node ORDER BY n DESC, node LIMIT ?", (iso(since), limit))
        return {"gpus": [{"uuid": u, "incidents": n, "node": node} for u, n, node in gpus],
                "nodes": [{"node": node, "incidents": n} for node, n in nodes]}

    async def xid_heatmap(self, since: datetime) -> list[tuple[int, str, int]]:
        """(Xid, day, incidents opened that day with that Xid). A storm counts once per node: its fleet
        incident (key ``fleet|...``) carries its node incidents' Xids and is left out, or it counted twice."""
        rows = await self.db.run(self.db.query, "SELECT f.value, substr(f.opened_at, 1, 10), count(*) FROM incident_facets f "
                               "JOIN incidents i ON i.id = f.incident_id WHERE f.kind = 'xid' AND f.opened_at >= ? "
                               "AND i.key NOT LIKE ? GROUP BY f.value, substr(f.opened_at, 1, 10)",
                               (iso(since), "fleet|%"))
        return [(int(x), day, n) for x, day, n in rows]

    async def notification_state(self, incident_id: str) -> dict[str, JSONObject]:
        """Per notification target: the saved external reference and the newest outbox row."""
        refs = await self.db.run(self.db.query, "SELECT target, ref FROM notify_refs WHERE incident_id = ?", (incident_id,))
        rows = await self.db.run(self.db.query, "SELECT target, kind, state, attempts, last_error, created_at, done_at "
                               "FROM outbox WHERE incident_id = ? ORDER BY id", (incident_id,))
        out: dict[str, JSONObject] = {t: {"target": t, "ref": ref} for t, ref in refs}
        for target, kind, state, attempts, error, created, done in rows:
            entry = out.setdefault(target, {"target": target, "ref": ""})
            entry.update(kind=kind, state=state, attempts=attempts, error=error, queued=created, done=done)
            entry["pending"] = integer(entry, "pending") + (state == "pending")
        return out
