"""A Store over any DB-API connection, run on one dedicated thread.

One thread serialises the engine's database work (SQLite allows one writer
anyway, and it keeps PostgreSQL transactions simple). The inbox log's appends
run on their own connection and thread (alertd/store/inbox_log.py), so an
acknowledgement never waits behind an engine commit.
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, cast

from alertd.core.outbox_items import LEGACY_KINDS, encode_payload
from alertd.engine.correlate import EngineState
from alertd.core.model import CLOSED, Incident, iso, parse_instant, parse_iso
from alertd.store import history, sql
from alertd.store.base import (ESCALATION, SENT, AuditEntry, MemoryDelta, OutboxItem,
                               RouterMemory, Step, Store, StoreUnavailable)
from alertd.store.compact import compact_member
from alertd.store.coordination import CoordinationMixin
from alertd.store.inbox import InboxMixin
from alertd.store.quarantine import QuarantineMixin
from alertd.store.inbox_log import InboxLog, InboxLogDatabase
from alertd.store.transaction import transaction
from alertd.store.reads import HistoryReads, IncidentQuery
from alertd.store.remediations import RemediationsMixin
from alertd.store.sessions import SessionsMixin
from alertd.store.report_tables import ReportTablesMixin

log = logging.getLogger(__name__)
RECENT_EVENTS = 20
# Incidents resolved this long before the newest resolution are loaded with the open ones, so the engine
# can reopen them after a restart or a takeover (it keeps those inside its reopen window, 30m by default).
REOPEN_LOOKBACK = timedelta(hours=6)
REOPEN_LOAD_LIMIT = 20000
PRUNE_BATCH = 500  # rows per pruning transaction
PRUNE_MAX_BATCHES = 200  # per table and housekeeping round (the rest waits for the next round)  # rows per INSERT statement (3 parameters each; SQLite allows 32766)


class SqlStore(InboxMixin, QuarantineMixin, HistoryReads, CoordinationMixin, SessionsMixin, ReportTablesMixin,
               RemediationsMixin, Store):
    serial = "INTEGER"
    int_key = "BIGINT"  # an integer primary key given by the writer (SQLite: INTEGER, which is the rowid)
    strpos = "strpos"  # the position of a substring (SQLite: instr)
    last_id = "last_insert_rowid()"  # the id of the row this session inserted last
    placeholder = "?"
    unavailable: tuple[type[BaseException], ...] = ()

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"alertd-{type(self).__name__}")
        self._conn: Any = None
        self._log = InboxLog(self._inbox_log_database())
        self._facets = history.FacetCache()

    # ----- backend hooks -----

    def _connect(self) -> Any:
        raise NotImplementedError

    def _inbox_log_database(self) -> InboxLogDatabase:
        """Where and how the inbox log is appended to (backend hook)."""
        raise NotImplementedError

    def _schema_vars(self) -> dict[str, str]:
        """Names the migrations' statements use for backend-specific types and tables (backend hook)."""
        return {"serial": self.serial, "int_key": self.int_key, "strpos": self.strpos}

    def _begin(self, cur: Any) -> None:
        cur.execute("BEGIN")

    def _stored_doc(self, doc: dict[str, Any]) -> Any:
        """How a member or incident document is stored (backend hook): JSON text here, compressed by SQLite."""
        return sql.dumps(doc)

    def _stored_event(self, doc: dict[str, Any]) -> Any:
        """How a timeline event is stored (backend hook): JSON text here, compressed by SQLite."""
        return sql.dumps(doc)

    def _after_write(self) -> None:
        """Called on the store thread after each committed write transaction, before other writers may start
        (backend hook)."""

    def _end(self) -> None:
        """Called on the store thread when a write transaction ended, committed or not (backend hook)."""

    # ----- plumbing -----

    def _q(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._on_thread, fn, args)

    def _on_thread(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        if self._conn is not None and self._lost(self._conn):  # e.g. the database restarted: connect again
            try:
                conn = self._connect()
            except self.unavailable as exc:
                raise StoreUnavailable(f"reconnecting: {type(exc).__name__}: {exc}") from exc
            self._conn = conn
            log.warning("store connection was lost; reconnected")
        return fn(*args)

    def _lost(self, conn: Any) -> bool:
        """Whether the connection is gone for good (backend hook)."""
        return False

    def _tx(self, fn: Callable[[Any], Any]) -> Any:
        return transaction(self._conn, fn, begin=self._begin, end=self._end, unavailable=self.unavailable,
                           after=self._after_write)

    def _query(self, statement: str, args: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        """A read on the store thread; ends its implicit transaction so snapshots stay fresh."""
        cur = self._conn.cursor()
        try:
            cur.execute(self._q(statement), args)
            return cast(list[tuple[Any, ...]], cur.fetchall())
        finally:
            cur.close()
            self._conn.commit()

    def _lock_migrations(self, locked: bool) -> None:
        """Backend hook: keep replicas that start together from migrating at the same time."""

    def _migrate(self) -> None:
        self._lock_migrations(True)
        try:
            self._migrate_locked()
        finally:
            self._lock_migrations(False)

    def _migrate_locked(self) -> None:
        cur = self._conn.cursor()
        cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        self._conn.commit()
        cur.execute("SELECT version FROM schema_version")
        row = cur.fetchone()
        current = row[0] if row else 0
        cur.close()
        applied = 0
        for number, statements in enumerate(sql.MIGRATIONS[current:], start=current + 1):
            def apply(c: Any, statements: list[str] = statements, number: int = number) -> None:
                for statement in statements:
                    c.execute(statement.format(**self._schema_vars()))
                c.execute("DELETE FROM schema_version")
                c.execute(self._q("INSERT INTO schema_version (version) VALUES (?)"), (number,))
            self._tx(apply)
            applied = number
        if applied:  # one line for the lot: a new store applies every migration at its first start
            log.info("store schema %s version %d", "created at" if current == 0 else f"migrated from {current} to",
                     applied)

    async def open(self) -> None:
        def do() -> None:
            self._conn = self._connect()
            self._migrate()
            self._backfill_history()
            self._adopt_legacy_inbox()
        await self._log.open()
        await self._run(do)

    def _backfill_history(self) -> None:
        """Incidents stored before the history tables existed get their facets and GPU rows once."""
        if self._query("SELECT value FROM meta WHERE key = 'history_backfilled'"):
            return
        after = -1
        while True:
            rows = self._query("SELECT seq, id, doc FROM incidents WHERE seq > ? ORDER BY seq LIMIT 500", (after,))
            if not rows:
                break
            after = rows[-1][0]

            def fill(cur: Any, rows: list[tuple[Any, ...]] = rows) -> None:
                incidents = [(self._assemble(cur, inc_id, doc, 0), None) for _, inc_id, doc in rows]
                history.write(cur, self._q, incidents, sql.dumps)
            self._tx(fill)
        self._tx(lambda cur: cur.execute(self._q(sql.UPSERT_META), ("history_backfilled", "1")))

    async def close(self) -> None:
        def do() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        await asyncio.get_running_loop().run_in_executor(self._executor, do)  # no reconnect just to close
        self._executor.shutdown(wait=True)
        await self._log.close()

    # ----- engine steps -----

    async def commit_step(self, step: Step) -> None:
        def build(cur: Any) -> history.Written:
            for change in step.changes:
                inc = change.incident
                cur.execute(self._q(sql.UPSERT_INCIDENT), sql.incident_row(inc, self._stored_doc))
                if change.members:
                    cur.executemany(self._q(sql.UPSERT_MEMBER), [
                        (inc.id, fp, self._stored_doc(compact_member(inc.members[fp].to_dict()))) for fp in change.members if fp in inc.members
                    ])
                cur.executemany(self._q(sql.INSERT_EVENT), [(inc.id, self._stored_event(e.to_dict())) for e in change.events])
            # The history rows name their GPU's id and the payload rows their outbox row's id through SQL
            # (a lookup by UUID, the session's last inserted id): nothing read back is needed to build them.
            written = history.write(cur, self._q, _changed_incidents(step), sql.dumps, self._facets)
            for o in step.outbox:
                cur.execute(self._q(sql.INSERT_OUTBOX), sql.outbox_row(o))
                cur.execute(self._q(sql.INSERT_OUTBOX_PAYLOAD.format(last_id=self.last_id)), (sql.dumps(encode_payload(o.payload)),))
            if step.next_seq:
                cur.execute(self._q(sql.UPSERT_META), ("next_seq", str(step.next_seq)))
            if step.heartbeat_at is not None:
                cur.execute(self._q(sql.UPSERT_META), ("heartbeat_at", iso(step.heartbeat_at)))
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
                    self._write_taken(cur, step.inbox)
                batch.run(cur)
            self._ftx(write)
            return written
        self._facets.remember(await self._run(do))

    def _write_memory(self, cur: Any, delta: MemoryDelta) -> None:
        marks = [m for m in delta.marks if m[0] not in delta.forget]
        if marks:
            cur.executemany(self._q(sql.INSERT_MARK), sorted(marks))
        if delta.forget:
            cur.executemany(self._q(sql.FORGET_MARKS), [(i,) for i in sorted(delta.forget)])
        ended = [key for key, cordon in delta.cordons.items() if cordon is None]
        if ended:
            cur.executemany(self._q(sql.DELETE_CORDON), ended)
        seen = [(*key, iso(c[0]), c[1]) for key, c in delta.cordons.items() if c is not None]
        if seen:
            cur.executemany(self._q(sql.UPSERT_CORDON), seen)

    async def load_router_memory(self) -> RouterMemory:
        def do() -> RouterMemory:
            memory = RouterMemory()
            roles = {SENT: memory.sent, ESCALATION: memory.escalations}
            for inc_id, role, value in self._query("SELECT incident_id, role, value FROM router_marks"):
                if role in roles:
                    roles[role].setdefault(inc_id, set()).add(value)
            for cluster, node, since, inc_id in self._query(
                    "SELECT cluster, node, since, incident_id FROM router_cordons"):
                memory.cordons[(cluster, node)] = (parse_instant(since), inc_id)  # NOT NULL column
            return memory
        result: RouterMemory = await self._run(do)
        return result

    async def load_state(self) -> EngineState:
        def do() -> EngineState:
            cur = self._conn.cursor()
            cur.execute(self._q("SELECT id, doc FROM incidents WHERE status <> ? ORDER BY seq"), (CLOSED,))
            docs = cur.fetchall()
            incidents = [self._assemble(cur, inc_id, doc, RECENT_EVENTS) for inc_id, doc in docs]
            cur.execute(sql.LAST_BY_KEY)
            last_by_key = dict(cur.fetchall())
            closed = self._recently_closed(cur)
            cur.execute("SELECT key, value FROM meta")
            meta = dict(cur.fetchall())
            cur.execute("SELECT max(seq) FROM incidents")
            top = cur.fetchone()[0] or 0
            self._conn.commit()
            cur.close()
            next_seq = max(int(meta.get("next_seq", "1")), top + 1)
            return EngineState.from_incidents(incidents, last_by_key, next_seq, parse_iso(meta.get("heartbeat_at")),
                                              closed)
        state: EngineState = await self._run(do)
        return state

    def _recently_closed(self, cur: Any) -> list[Incident]:
        cur.execute(self._q("SELECT max(resolved_at) FROM incidents WHERE status = ?"), (CLOSED,))
        newest = parse_iso(cur.fetchone()[0])
        if newest is None:
            return []
        cur.execute(self._q("SELECT id, doc FROM incidents WHERE status = ? AND resolved_at >= ? ORDER BY seq DESC LIMIT ?"),
                    (CLOSED, iso(newest - REOPEN_LOOKBACK), REOPEN_LOAD_LIMIT))
        return [self._assemble(cur, inc_id, doc, RECENT_EVENTS) for inc_id, doc in cur.fetchall()]

    def _assemble(self, cur: Any, inc_id: str, doc: str | bytes, recent: int | None = None) -> Incident:
        cur.execute(self._q("SELECT fingerprint, doc FROM members WHERE incident_id = ?"), (inc_id,))
        members = [(r[0], r[1]) for r in cur.fetchall()]
        if recent is None:
            cur.execute(self._q("SELECT doc FROM events WHERE incident_id = ? ORDER BY id"), (inc_id,))
            events = [r[0] for r in cur.fetchall()]
        else:
            cur.execute(self._q("SELECT doc FROM events WHERE incident_id = ? ORDER BY id DESC LIMIT ?"), (inc_id, recent))
            events = [r[0] for r in reversed(cur.fetchall())]
        return sql.assemble(doc, members, events)

    # ----- reads -----

    async def list_incidents(self, *, status: str | None = None, node: str | None = None,
                             since: datetime | None = None, limit: int = 100) -> list[dict[str, Any]]:
        rows = await self.query_incidents(IncidentQuery(status=status or "", node=node or "", since=since, limit=limit))
        return [doc for _, doc in rows]

    async def get_incident(self, incident_id: str) -> Incident | None:
        def do() -> Incident | None:
            cur = self._conn.cursor()
            cur.execute(self._q("SELECT doc FROM incidents WHERE id = ?"), (incident_id,))
            row = cur.fetchone()
            inc = self._assemble(cur, incident_id, row[0]) if row else None
            self._conn.commit()
            cur.close()
            return inc
        found: Incident | None = await self._run(do)
        return found

    # ----- outbox -----

    async def due_outbox(self, now: datetime, limit: int) -> list[OutboxItem]:
        return [sql.outbox_item(r) for r in await self._run(self._query, sql.DUE_OUTBOX, (iso(now), limit))]

    async def finish_outbox_batch(self, done: list[tuple[int, tuple[str, str, str] | None]]) -> None:
        if not done:
            return
        now = iso(datetime.now(timezone.utc))

        def do(cur: Any) -> None:
            refs = [ref for _, ref in done if ref is not None]
            if refs:
                cur.executemany(self._q(sql.UPSERT_REF), refs)
            cur.executemany(self._q("UPDATE outbox SET state = 'done', done_at = ? WHERE id = ? AND state = 'pending'"),
                            [(now, item_id) for item_id, _ in done])
            # Delivered: the row stays for the incident page (state, attempts, times), the payload is not read again.
            cur.executemany(self._q("DELETE FROM outbox_payloads WHERE id = ? AND "
                                    "(SELECT o.state FROM outbox o WHERE o.id = outbox_payloads.id) = 'done'"),
                            [(item_id,) for item_id, _ in done])
        await self._run(self._ftx, do)

    async def save_ref(self, incident_id: str, target: str, ref: str) -> None:
        await self._run(self._ftx, lambda cur: cur.execute(self._q(sql.UPSERT_REF), (incident_id, target, ref)))

    async def pending_outbox_for(self, incident_id: str, target: str, *, after_id: int,
                                 kinds: tuple[str, ...]) -> list[OutboxItem]:
        marks = ", ".join("?" for _ in kinds)
        rows = await self._run(self._query, (
            f"{sql.OUTBOX_SELECT} WHERE o.incident_id = ? AND o.target = ? AND o.state = 'pending' "
            f"AND o.id > ? AND o.kind IN ({marks}) ORDER BY o.id"), (incident_id, str(target), after_id, *(str(LEGACY_KINDS.get(k) or k) for k in kinds)))
        return [sql.outbox_item(r) for r in rows]

    async def retry_outbox(self, item_id: int, due_at: datetime, error: str, *, give_up: bool = False) -> None:
        state = "failed" if give_up else "pending"
        await self._run(self._ftx, lambda cur: cur.execute(
            self._q("UPDATE outbox SET attempts = attempts + 1, due_at = ?, last_error = ?, state = ? WHERE id = ?"),
            (iso(due_at), error[:1000], state, item_id)))

    async def notify_ref(self, incident_id: str, target: str) -> str | None:
        rows = await self._run(self._query, "SELECT ref FROM notify_refs WHERE incident_id = ? AND target = ?",
                               (incident_id, target))
        return rows[0][0] if rows else None

    async def any_ref(self, target: str, like: str) -> str | None:
        rows = await self._run(self._query, "SELECT ref FROM notify_refs WHERE target = ? AND ref LIKE ? LIMIT 1",
                               (target, like))
        return rows[0][0] if rows else None

    async def prune(self, before: datetime, *, resolved_before: datetime | None = None) -> int:
        """In small transactions (PRUNE_BATCH rows each), so the writer is never held long and the WAL stays small."""
        cutoff = iso(before)
        statements = [
            # redelivery keys (set-aside alerts, processed = 2, are kept for inspection)
            ("DELETE FROM inbox WHERE seq IN (SELECT seq FROM inbox WHERE processed = 1 AND received_at < ? LIMIT ?)",
             cutoff),
            ("DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE state = 'done' AND done_at < ? LIMIT ?)",
             cutoff),
            ("DELETE FROM commands WHERE id IN (SELECT id FROM commands WHERE state = 'done' AND created_at < ? LIMIT ?)",
             cutoff),
        ]
        total = 0
        for statement, arg in statements:
            def one(cur: Any, st: str = statement, a: str = arg) -> int:
                return self._delete(cur, st, (a, PRUNE_BATCH))
            total += await self._prune_batches(one)
        if resolved_before is not None:
            resolved_cutoff = iso(resolved_before)
            total += await self._prune_batches(lambda cur: self._prune_incidents(cur, resolved_cutoff))
        return total

    async def _prune_batches(self, one: Callable[[Any], int]) -> int:
        total = 0
        for _ in range(PRUNE_MAX_BATCHES):
            n: int = await self._run(self._ftx, one)
            total += n
            if n < PRUNE_BATCH:
                break
        return total

    def _delete(self, cur: Any, statement: str, args: tuple[Any, ...]) -> int:
        cur.execute(self._q(statement), args)
        return max(cast(int, cur.rowcount), 0)

    def _prune_incidents(self, cur: Any, cutoff: str) -> int:
        """Resolved incidents older than the cutoff, with their members, timeline and search facets."""
        cur.execute(self._q("SELECT id FROM incidents WHERE status = 'resolved' AND resolved_at < ? LIMIT ?"),
                    (cutoff, PRUNE_BATCH))
        ids = [(r[0],) for r in cur.fetchall()]
        for table in ("members", "events", "incident_facets", "notify_refs", "router_marks"):
            cur.executemany(self._q(f"DELETE FROM {table} WHERE incident_id = ?"), ids)
        cur.executemany(self._q("DELETE FROM incidents WHERE id = ?"), ids)
        return len(ids)

    async def stats(self) -> dict[str, int]:
        def do() -> dict[str, int]:
            out = {f"incidents_{s}": n for s, n in self._query("SELECT status, count(*) FROM incidents GROUP BY status")}
            out["inbox_pending"] = self._pending_alerts()
            out.update({f"outbox_{s}": n for s, n in self._query("SELECT state, count(*) FROM outbox GROUP BY state")})
            return out
        counts: dict[str, int] = await self._run(do)
        return counts

    # ----- audit trail and replay cache -----

    async def record_audit(self, entry: AuditEntry) -> None:
        await self._run(self._tx, lambda cur: cur.execute(
            self._q("INSERT INTO audit (at, actor, action, target, via, outcome, detail) VALUES (?, ?, ?, ?, ?, ?, ?)"),
            (iso(entry.at), entry.actor, entry.action, entry.target, entry.via, entry.outcome, entry.detail[:2000])))

    async def list_audit(self, *, since: datetime | None = None, actor: str | None = None,
                         action: str | None = None, limit: int = 100) -> list[AuditEntry]:
        where, args = [], []
        for column, value in (("at >= ", iso(since) if since else None), ("actor = ", actor), ("action = ", action)):
            if value:
                where.append(column + "?")
                args.append(value)
        statement = ("SELECT at, actor, action, target, via, outcome, detail FROM audit"
                     + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC LIMIT ?")
        rows = await self._run(self._query, statement, [*args, limit])
        return [AuditEntry(parse_instant(r[0]), *r[1:]) for r in rows]

    async def remember_once(self, key: str, now: datetime, forget_before: datetime) -> bool:
        def do(cur: Any) -> bool:
            cur.execute(self._q("DELETE FROM seen_once WHERE seen_at < ?"), (iso(forget_before),))
            cur.execute(self._q("INSERT INTO seen_once (key, seen_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING "
                                "RETURNING key"), (key, iso(now)))
            return bool(cur.fetchall())
        first: bool = await self._run(self._tx, do)
        return first

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
