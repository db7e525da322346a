"""The engine's part of the store: each step committed in ONE transaction, the state loaded back.

A step's transaction holds the webhooks it took and their alerts' redelivery keys (the inbox
part writes those), the incidents, members and timeline events it changed, their history rows
(alertd/store/history.py), the outbox items the router queued, the engine's meta and the
router's memory: a crash at any point replays the step, never loses or doubles any of it. It is
fenced (``Database.ftx``): a deposed leader's step is refused.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from alertd.core.model import CLOSED, Incident, iso, parse_instant, parse_iso
from alertd.core.outbox_items import encode_payload
from alertd.engine.correlate import EngineState
from alertd.store import history, sql
from alertd.store.base import ESCALATION, REOPENABLE, SENT, MemoryDelta, RouterMemory, Step
from alertd.store.compact import compact_member
from alertd.store.database import Database
from alertd.store.inbox import Inbox
from alertd.store.reads import assemble_incident

RECENT_EVENTS = 20
# Incidents resolved this long before the newest resolution are loaded with the open ones, so the engine
# can reopen them after a restart or a takeover (it keeps those inside its reopen window, 30m by default).
REOPEN_LOOKBACK = timedelta(hours=6)
REOPEN_LOAD_LIMIT = 20000


class EngineSteps(Inbox):
    """Commits engine steps; loads the engine state and the router memory they left. Over the inbox part:
    a step writes what it took (``write_taken``) in its own transaction."""

    def __init__(self, db: Database):
        super().__init__(db)
        self._facets = history.FacetCache()

    async def commit_step(self, step: Step) -> None:
        """Webhooks taken and their keys, incidents, events, outbox items, engine meta and router memory: one
        transaction."""
        db = self.db

        def build(cur: Any) -> history.Written:
            for change in step.changes:
                inc = change.incident
                cur.execute(db.q(sql.UPSERT_INCIDENT), sql.incident_row(inc, db.stored_doc))
                if change.members:
                    cur.executemany(db.q(sql.UPSERT_MEMBER), [
                        (inc.id, fp, db.stored_doc(compact_member(inc.members[fp].to_dict()))) for fp in change.members if fp in inc.members
                    ])
                cur.executemany(db.q(sql.INSERT_EVENT), [(inc.id, db.stored_event(e.to_dict())) for e in change.events])
            # The history rows name their GPU's id and the payload rows their outbox row's id through SQL
            # (a lookup by UUID, the session's last inserted id): nothing read back is needed to build them.
            written = history.write(cur, db.q, _changed_incidents(step), sql.dumps, self._facets)
            for o in step.outbox:
                cur.execute(db.q(sql.INSERT_OUTBOX), sql.outbox_row(o))
                cur.execute(db.q(sql.INSERT_OUTBOX_PAYLOAD.format(last_id=db.last_id)),
                            (sql.dumps(encode_payload(o.payload)),))
            if step.next_seq:
                cur.execute(db.q(sql.UPSERT_META), ("next_seq", str(step.next_seq)))
            if step.heartbeat_at is not None:
                cur.execute(db.q(sql.UPSERT_META), ("heartbeat_at", iso(step.heartbeat_at)))
            if step.memory:
                self._write_memory(cur, step.memory)
            return written

        def do() -> history.Written:
            # Encoding and packing the documents and building the history rows is CPU work: it is done
            # before the write lock is taken, which is then held only to run the statements, so receivers
            # (other processes on SQLite) wait less.
            batch = StatementBatch()
            written = build(batch)

            def write(cur: Any) -> None:
                if step.inbox:
                    self.write_taken(cur, step.inbox)
                batch.run(cur)
            db.ftx(write)
            return written
        self._facets.remember(await db.run(do))

    def _write_memory(self, cur: Any, delta: MemoryDelta) -> None:
        marks = [m for m in delta.marks if m[0] not in delta.forget]
        if delta.drop:
            cur.executemany(self.db.q(sql.DROP_MARKS), sorted(delta.drop))
        if marks:
            cur.executemany(self.db.q(sql.INSERT_MARK), sorted(marks))
        if delta.forget:
            cur.executemany(self.db.q(sql.FORGET_MARKS), [(i,) for i in sorted(delta.forget)])
        ended = [key for key, cordon in delta.cordons.items() if cordon is None]
        if ended:
            cur.executemany(self.db.q(sql.DELETE_CORDON), ended)
        seen = [(*key, iso(c[0]), c[1]) for key, c in delta.cordons.items() if c is not None]
        if seen:
            cur.executemany(self.db.q(sql.UPSERT_CORDON), seen)

    async def load_router_memory(self) -> RouterMemory:
        """The router's memory as of the last committed step (see MemoryDelta)."""
        def do() -> RouterMemory:
            memory = RouterMemory()
            roles = {SENT: memory.sent, ESCALATION: memory.escalations}
            for inc_id, role, value in self.db.query("SELECT incident_id, role, value FROM router_marks"):
                if role in roles:
                    roles[role].setdefault(inc_id, set()).add(value)
                elif role == REOPENABLE:
                    memory.reopenable[inc_id] = parse_instant(value)
            for cluster, node, since, inc_id in self.db.query(
                    "SELECT cluster, node, since, incident_id FROM router_cordons"):
                memory.cordons[(cluster, node)] = (parse_instant(since), inc_id)  # NOT NULL column
            return memory
        result: RouterMemory = await self.db.run(do)
        return result

    async def load_state(self) -> EngineState:
        db = self.db

        def do() -> EngineState:
            cur = db.cursor()
            cur.execute(db.q("SELECT id, doc FROM incidents WHERE status <> ? ORDER BY seq"), (CLOSED,))
            docs = cur.fetchall()
            incidents = [assemble_incident(db, cur, inc_id, doc, RECENT_EVENTS) for inc_id, doc in docs]
            cur.execute(sql.LAST_BY_KEY)
            last_by_key = dict(cur.fetchall())
            closed = self._recently_closed(cur)
            cur.execute("SELECT key, value FROM meta")
            meta = dict(cur.fetchall())
            cur.execute("SELECT max(seq) FROM incidents")
            top = cur.fetchone()[0] or 0
            db.commit()
            cur.close()
            next_seq = max(int(meta.get("next_seq", "1")), top + 1)
            return EngineState.from_incidents(incidents, last_by_key, next_seq, parse_iso(meta.get("heartbeat_at")),
                                              closed)
        state: EngineState = await db.run(do)
        return state

    def _recently_closed(self, cur: Any) -> list[Incident]:
        cur.execute(self.db.q("SELECT max(resolved_at) FROM incidents WHERE status = ?"), (CLOSED,))
        newest = parse_iso(cur.fetchone()[0])
        if newest is None:
            return []
        cur.execute(self.db.q("SELECT id, doc FROM incidents WHERE status = ? AND resolved_at >= ? ORDER BY seq DESC LIMIT ?"),
                    (CLOSED, iso(newest - REOPEN_LOOKBACK), REOPEN_LOAD_LIMIT))
        return [assemble_incident(self.db, cur, inc_id, doc, RECENT_EVENTS) for inc_id, doc in cur.fetchall()]

    def backfill_history(self) -> None:
        """At open (store thread): incidents stored before the history tables existed get their facets and GPU
        rows once."""
        db = self.db
        if db.query("SELECT value FROM meta WHERE key = 'history_backfilled'"):
            return
        after = -1
        while True:
            rows = db.query("SELECT seq, id, doc FROM incidents WHERE seq > ? ORDER BY seq LIMIT 500", (after,))
            if not rows:
                break
            after = rows[-1][0]

            def fill(cur: Any, rows: list[tuple[Any, ...]] = rows) -> None:
                incidents = [(assemble_incident(db, cur, inc_id, doc, 0), None) for _, inc_id, doc in rows]
                history.write(cur, db.q, incidents, sql.dumps)
            db.tx(fill)
        db.tx(lambda cur: cur.execute(db.q(sql.UPSERT_META), ("history_backfilled", "1")))


class StatementBatch:
    """Stands in for a cursor while a step's statements are built; runs them later on the real one."""

    def __init__(self) -> None:
        self.calls: list[tuple[bool, str, Any]] = []

    def execute(self, statement: str, args: Any = ()) -> None:
        self.calls.append((False, statement, args))

    def executemany(self, statement: str, rows: Any) -> None:
        self.calls.append((True, statement, list(rows)))

    def run(self, cur: Any) -> None:
        for many, statement, args in self.calls:
            (cur.executemany if many else cur.execute)(statement, args)


def _changed_incidents(step: Step) -> list[tuple[Incident, set[str]]]:
    """Each changed incident once (a step can change one several times), with the members it changed."""
    out: dict[str, tuple[Incident, set[str]]] = {}
    for c in step.changes:
        out.setdefault(c.incident.id, (c.incident, set()))[1].update(c.members)
    return list(out.values())
