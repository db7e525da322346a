"""Remediations kept in the store (alertd/remediation/model.py), one row each, seen by every replica.

Every write is a compare-and-set on the row's ``version``: a proposal is inserted once (its id is the
incident's id and its kind), and each transition (approve, claim to run, finish) succeeds only against the
version it read, so two clicks, two replicas, or a new leader retrying after a crash never both win. The
timeline event that tells of a transition is written in the same transaction, on the incident's timeline,
open or resolved.
"""
from __future__ import annotations

import json
from typing import Any

import orjson

from alertd.core.json_types import JSONObject, obj
from alertd.store.database import Part

MIGRATION = [
    """CREATE TABLE remediations (
        id TEXT PRIMARY KEY,
        incident_id TEXT NOT NULL,
        cluster TEXT NOT NULL,
        state TEXT NOT NULL,
        version INTEGER NOT NULL,
        updated_at TEXT NOT NULL,
        doc TEXT NOT NULL)""",
    "CREATE INDEX remediations_incident ON remediations (incident_id)",
    "CREATE INDEX remediations_state ON remediations (state)",
]


class Remediations(Part):
    """Remediation rows (a part of the store). Docs are Remediation.to_dict() dicts; ``version`` in the doc
    is the version being written."""

    async def put_remediation(self, doc: JSONObject, expect: int | None, event: JSONObject | None = None,
                              *, fenced: bool = False) -> bool:
        """Insert (``expect`` None) or update the row still at version ``expect``; False when another writer
        got there first. ``event``: a timeline event for the incident, written only with the row.
        ``fenced``: the engine's own writes (claiming and finishing an action) also need its lease, so a
        deposed leader cannot record an action as its own (alertd/store/coordination.py)."""
        def do(cur: Any) -> bool:
            row = (doc["incident"], doc.get("cluster", ""), doc["state"], doc["version"], doc["updatedAt"],
                   orjson.dumps(doc).decode())
            if expect is None:
                cur.execute(self.db.q("INSERT INTO remediations (id, incident_id, cluster, state, version, updated_at, "
                                    "doc) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"), (doc["id"], *row))
            else:
                cur.execute(self.db.q("UPDATE remediations SET incident_id = ?, cluster = ?, state = ?, version = ?, "
                                    "updated_at = ?, doc = ? WHERE id = ? AND version = ?"), (*row, doc["id"], expect))
            if cur.rowcount != 1:
                return False
            if event is not None:
                cur.execute(self.db.q("INSERT INTO events (incident_id, doc) VALUES (?, ?)"),
                            (doc["incident"], self.db.stored_event(event)))
            return True
        written: bool = await self.db.run(self.db.ftx if fenced else self.db.tx, do)
        return written

    async def get_remediation(self, rem_id: str) -> JSONObject | None:
        """The Remediation.to_dict() document stored, or None."""
        rows = await self.db.run(self.db.query, "SELECT doc FROM remediations WHERE id = ?", (rem_id,))
        return obj(json.loads(rows[0][0]), "a remediation") if rows else None

    async def list_remediations(self, *, incident_id: str | None = None, states: tuple[str, ...] = (),
                                cluster: str | None = None, limit: int = 500) -> list[JSONObject]:
        where, args = [], []
        if incident_id is not None:
            where.append("incident_id = ?")
            args.append(incident_id)
        if cluster is not None:
            where.append("cluster = ?")
            args.append(cluster)
        if states:
            where.append("state IN (" + ", ".join("?" for _ in states) + ")")
            args.extend(states)
        statement = ("SELECT doc FROM remediations" + (" WHERE " + " AND ".join(where) if where else "")
                     + " ORDER BY updated_at DESC LIMIT ?")
        rows = await self.db.run(self.db.query, statement, [*args, limit])
        return [json.loads(r[0]) for r in rows]
