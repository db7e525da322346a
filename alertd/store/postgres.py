"""PostgreSQL backend (psycopg 3), for deployments that already run a database."""
from __future__ import annotations

from typing import Any, Callable, cast

import psycopg

from alertd.store import sql
from alertd.store.base import StoreUnavailable
from alertd.store.backend import SqlBackend
from alertd.store.facade import SqlStore
from alertd.store.inbox_log import InboxLogDatabase
from alertd.store.pg_watchdog import RoundTrip, Watchdog, timed_cursor

IDLE_IN_TRANSACTION_MS = 5000
STATEMENT_TIMEOUT_S = 25  # the server cancels a statement running longer (migrations at start excepted)
FOLLOWER_LOCK_WAIT_MS = 200
ANSWER_DEADLINE_S = 30.0  # no answer this long after a statement was sent: the path to the server is dead


class PostgresBackend(SqlBackend):
    serial = "BIGSERIAL"
    last_id = "lastval()"  # the outbox id sequence's value this session took last
    placeholder = "%s"
    unavailable = (psycopg.OperationalError, psycopg.errors.DiskFull, psycopg.errors.ReadOnlySqlTransaction)

    def __init__(self, dsn: str, password: str = "", *, answer_deadline: float = ANSWER_DEADLINE_S):
        super().__init__()
        self.dsn = dsn
        self.password = password  # from storage.postgres_password(_file): kept out of the DSN and the logs
        self._trip = RoundTrip()
        self._watchdog = Watchdog(self._trip, lambda: self._conn, answer_deadline)

    def _connect(self, watched: bool = True) -> Any:
        """``watched``: the store thread's connection, whose calls the watchdog times; the inbox log's own
        connection is not (its appends fail on the same timeouts, and a stamp from its thread would look like
        an unanswered call of the store's)."""
        # A partitioned or dead server must fail calls within seconds, not hang them: the engine lease
        # (and the 503 that makes Alertmanager retry) depend on noticing. (A None parameter is left out.)
        conn = psycopg.connect(self.dsn, autocommit=False, connect_timeout=5, keepalives=1, keepalives_idle=5,
                               keepalives_interval=2, keepalives_count=2, tcp_user_timeout=5000,
                               password=self.password or None,
                               cursor_factory=timed_cursor(self._trip) if watched else None)
        # The server ends a session left inside a transaction: a leader cut off between its fence check and
        # its commit would otherwise keep the lease row locked (and every takeover waiting) until the
        # server's own TCP timeouts, minutes or hours. alertd never waits on anything else inside one.
        conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_MS}ms'")
        # ... and bounds every statement, so one unanswered for longer is behind a dead link (pg_watchdog.py).
        conn.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT_S}s'")
        conn.commit()
        return conn

    def _on_thread(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        self._trip.stamp()  # a commit is stamped by its call's last statement
        try:
            return super()._on_thread(fn, args)
        finally:
            self._trip.done()

    async def open(self, *upgrades: Callable[[], None]) -> None:
        await super().open(*upgrades)  # migrations may take long on a large database: watched only once started
        self._watchdog.start()

    async def close(self) -> None:
        self._watchdog.stop()
        await super().close()

    for_update = " FOR UPDATE"

    def lease_round_begins(self, cur: Any, token: int) -> None:
        if not token:  # a follower does not wait for the lease row (alertd/store/coordination.py, Lease.acquire_lease)
            cur.execute(f"SET LOCAL lock_timeout = '{FOLLOWER_LOCK_WAIT_MS}ms'")

    def lock_refused(self, exc: StoreUnavailable) -> bool:
        return isinstance(exc.__cause__, psycopg.errors.LockNotAvailable)

    def _inbox_log_database(self) -> InboxLogDatabase:
        """The log is a table of the same database, on a connection of its own: every replica appends, and
        PostgreSQL's row locks let appends and the engine's commits run side by side."""
        return InboxLogDatabase(connect=lambda: self._connect(watched=False), begin=lambda cur: None, end=lambda: None,
                          unavailable=self.unavailable, lost=self._lost, placeholder=self.placeholder)

    def _schema_vars(self) -> dict[str, str]:
        return {**super()._schema_vars(), "inbox_log": sql.INBOX_LOG.format(serial=self.serial, blob="BYTEA")}

    def take_hooks(self, cur: Any, ids: list[int]) -> None:
        """Ids are not committed in order here (replicas append side by side): each taken row goes, in the step."""
        cur.execute(self.q("DELETE FROM inbox_log WHERE id IN (" + ", ".join(["?"] * len(ids)) + ")"), ids)

    def db_now(self, cur: Any) -> float:
        cur.execute("SELECT extract(epoch FROM clock_timestamp())")
        return float(cur.fetchone()[0])

    def _lock_migrations(self, locked: bool) -> None:
        # Migrations (and waiting for another replica's) may take long: no statement timeout meanwhile.
        if locked:
            self._conn.execute("SET statement_timeout = 0")
            self._conn.execute("SELECT pg_advisory_lock(4242)")
        else:
            self._conn.execute("SELECT pg_advisory_unlock(4242)")
            self._conn.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT_S}s'")
        self._conn.commit()

    def _begin(self, cur: Any) -> None:
        pass  # psycopg opens a transaction on the first statement

    def _lost(self, conn: Any) -> bool:
        return cast(bool, conn.closed or conn.broken)

    async def size_bytes(self) -> int | None:
        rows: list[tuple[Any, ...]] = await self.run(self.query, "SELECT pg_database_size(current_database())")
        return cast(int | None, rows[0][0])


class PostgresStore(SqlStore):
    """The store on PostgreSQL: builds its backend."""

    def __init__(self, dsn: str, password: str = "", *, answer_deadline: float = ANSWER_DEADLINE_S):
        super().__init__(PostgresBackend(dsn, password, answer_deadline=answer_deadline))
