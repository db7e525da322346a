"""What every part of the store shares: one database reached through a DB-API driver, on one thread.

The backend owns the connection and the dedicated thread that serialises the engine's database
work (SQLite allows one writer anyway, and it keeps PostgreSQL transactions simple), the one write
transaction (alertd/store/transaction.py) and its fenced form, the schema migrations, the dialect
(placeholders, types, how documents are stored) and the inbox log (alertd/store/inbox_log.py),
whose appends run on their own connection and thread so an acknowledgement never waits behind an
engine commit. ``SqliteBackend`` (alertd/store/sqlite.py) and ``PostgresBackend``
(alertd/store/postgres.py) only connect, name their errors and keep the log their way. The parts of
the store (alertd/store/facade.py lists them) each get the backend at construction, and see it as
``Database`` (alertd/store/database.py).
"""
from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, cast

from alertd.core.json_types import JSONObject
from alertd.store import sql
from alertd.store.base import StoreUnavailable
from alertd.store.inbox_log import InboxLog, InboxLogDatabase
from alertd.store.lease import ENGINE, Fenced
from alertd.store.transaction import transaction

log = logging.getLogger(__name__)


class SqlBackend:
    serial = "INTEGER"
    int_key = "BIGINT"  # an integer primary key given by the writer (SQLite: INTEGER, which is the rowid)
    strpos = "strpos"  # the position of a substring (SQLite: instr)
    last_id = "last_insert_rowid()"  # the id of the row this session inserted last
    placeholder = "?"
    for_update = ""  # PostgreSQL locks the lease row; SQLite's BEGIN IMMEDIATE locks the database
    unavailable: tuple[type[BaseException], ...] = ()

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"alertd-{type(self).__name__}")
        self._conn: Any = None
        self.log = InboxLog(self._inbox_log_database())
        self._fence: tuple[str, int] | None = None

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

    def stored_doc(self, doc: JSONObject) -> str | bytes:
        """How a member or incident document is stored (backend hook): JSON text here, compressed by SQLite."""
        return sql.dumps(doc)

    def stored_event(self, doc: JSONObject) -> str | bytes:
        """How a timeline event is stored (backend hook): JSON text here, compressed by SQLite."""
        return sql.dumps(doc)

    def _after_write(self) -> None:
        """Called on the store thread after each committed write transaction, before other writers may start
        (backend hook)."""

    def _end(self) -> None:
        """Called on the store thread when a write transaction ended, committed or not (backend hook)."""

    def _lost(self, conn: Any) -> bool:
        """Whether the connection is gone for good (backend hook)."""
        return False

    def _lock_migrations(self, locked: bool) -> None:
        """Backend hook: keep replicas that start together from migrating at the same time."""

    def db_now(self, cur: Any) -> float:
        """The database's clock (backend hook): replicas with skewed clocks agree on lease expiry."""
        return time.time()

    def lease_round_begins(self, cur: Any, token: int) -> None:
        """Backend hook, at the start of a lease round's transaction (``token`` 0: a follower's)."""

    def lock_refused(self, exc: StoreUnavailable) -> bool:
        """Whether a write failed only because a row lock was not granted in time (backend hook)."""
        return False

    async def size_bytes(self) -> int | None:
        """Bytes on disk (alertd_store_bytes), None when the backend cannot tell."""
        return None

    # ----- the inbox log, as the engine reads it (backend hooks) -----

    def log_query(self, statement: str, args: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        """A read of the log on the store thread (SQLite: the log's own database file)."""
        return self.query(statement, args)

    def taken_upto(self) -> int:
        """Log ids up to this one are taken (SQLite); 0 where taken rows are deleted in the step (PostgreSQL)."""
        return 0

    def take_hooks(self, cur: Any, ids: list[int]) -> None:
        """In the step's transaction: these webhooks are taken."""
        raise NotImplementedError

    def log_idle(self) -> None:
        """The engine found nothing to take: a moment for the log's housekeeping (backend hook)."""

    def backlog_hooks(self) -> int:
        """Webhooks appended and not taken (store thread; backend hook). Where a step deletes what it takes
        (PostgreSQL) that is the span of ids left in the log: two index lookups whatever its size, where a
        count(*) would read every row. An upper bound: ids skipped by rolled-back appends, and rows taken past
        one another replica had not committed yet, count too."""
        rows = self.log_query("SELECT coalesce(max(id) - min(id) + 1, 0) FROM inbox_log")
        return int(rows[0][0])

    def attempt_tx(self, fn: Callable[[Any], Any]) -> Any:
        """The transaction an attempt is counted in (backend hook: SQLite spares it an fsync)."""
        return self.tx(fn)

    # ----- plumbing -----

    def q(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the store thread."""
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

    def tx(self, fn: Callable[[Any], Any]) -> Any:
        """``fn(cursor)`` in one write transaction (on the store thread)."""
        return transaction(self._conn, fn, begin=self._begin, end=self._end, unavailable=self.unavailable,
                           after=self._after_write)

    def query(self, statement: str, args: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        """A read on the store thread; ends its implicit transaction so snapshots stay fresh."""
        cur = self._conn.cursor()
        try:
            cur.execute(self.q(statement), args)
            return cast(list[tuple[Any, ...]], cur.fetchall())
        finally:
            cur.close()
            self._conn.commit()

    def cursor(self) -> Any:
        """A cursor for several reads in one snapshot (store thread); the caller commits and closes it."""
        return self._conn.cursor()

    def commit(self) -> None:
        self._conn.commit()

    # ----- fencing: the engine's writes need its lease (alertd/store/coordination.py) -----

    def set_fence(self, holder: str | None, token: int = 0) -> None:
        """From now on every engine write checks, in its own transaction, that this token still holds the lease."""
        self._fence = (holder, token) if holder else None

    def _check_fence(self, cur: Any) -> None:
        if self._fence is None:
            return
        holder, token = self._fence
        # Row-locks the lease until commit: a takeover waits for this transaction or makes it fail here.
        cur.execute(self.q("UPDATE leases SET token = token WHERE name = ? AND holder = ? AND token = ?"),
                    (ENGINE, holder, token))
        if cur.rowcount != 1:
            raise Fenced(f"engine lease token {token} of {holder} is no longer valid: write refused")

    def ftx(self, fn: Callable[[Any], Any]) -> Any:
        """A fenced engine transaction (on the store thread)."""
        def fenced(cur: Any) -> Any:
            self._check_fence(cur)
            return fn(cur)
        return self.tx(fenced)

    # ----- schema -----

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
                c.execute(self.q("INSERT INTO schema_version (version) VALUES (?)"), (number,))
            self.tx(apply)
            applied = number
        if applied:  # one line for the lot: a new store applies every migration at its first start
            log.info("store schema %s version %d", "created at" if current == 0 else f"migrated from {current} to",
                     applied)

    # ----- life -----

    async def open(self, *upgrades: Callable[[], None]) -> None:
        """Connect, migrate, then run the parts' one-time ``upgrades`` (store thread, in order)."""
        def do() -> None:
            self._conn = self._connect()
            self._migrate()
            for upgrade in upgrades:
                upgrade()
        await self.log.open()
        await self.run(do)

    async def close(self) -> None:
        def do() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        await asyncio.get_running_loop().run_in_executor(self._executor, do)  # no reconnect just to close
        self._executor.shutdown(wait=True)
        await self.log.close()
