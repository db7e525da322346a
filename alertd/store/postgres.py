"""PostgreSQL backend (psycopg 3), for deployments that already run a database."""
from __future__ import annotations

from typing import Any, cast

import psycopg

from alertd.store.dbapi import SqlStore


IDLE_IN_TRANSACTION_MS = 5000


class PostgresStore(SqlStore):
    serial = "BIGSERIAL"
    last_id = "lastval()"  # the outbox id sequence's value this session took last
    placeholder = "%s"
    unavailable = (psycopg.OperationalError, psycopg.errors.DiskFull, psycopg.errors.ReadOnlySqlTransaction)

    def __init__(self, dsn: str, password: str = ""):
        super().__init__()
        self.dsn = dsn
        self.password = password  # from storage.postgres_password(_file): kept out of the DSN and the logs

    def _connect(self) -> Any:
        extra: dict[str, Any] = {"password": self.password} if self.password else {}
        # A partitioned or dead server must fail calls within seconds, not hang them: the engine lease
        # (and the 503 that makes Alertmanager retry) depend on noticing.
        conn = psycopg.connect(self.dsn, autocommit=False, connect_timeout=5, keepalives=1, keepalives_idle=5,
                               keepalives_interval=2, keepalives_count=2, tcp_user_timeout=5000, **extra)
        # The server ends a session left inside a transaction: a leader cut off between its fence check and
        # its commit would otherwise keep the lease row locked (and every takeover waiting) until the
        # server's own TCP timeouts, minutes or hours. alertd never waits on anything else inside one.
        conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_MS}ms'")
        conn.commit()
        return conn

    for_update = " FOR UPDATE"

    def _db_now(self, cur: Any) -> float:
        cur.execute("SELECT extract(epoch FROM clock_timestamp())")
        return float(cur.fetchone()[0])

    def _lock_migrations(self, locked: bool) -> None:
        self._conn.execute("SELECT pg_advisory_lock(4242)" if locked else "SELECT pg_advisory_unlock(4242)")
        self._conn.commit()

    def _begin(self, cur: Any) -> None:
        pass  # psycopg opens a transaction on the first statement

    def _lost(self, conn: Any) -> bool:
        return cast(bool, conn.closed or conn.broken)

    async def size_bytes(self) -> int | None:
        rows: list[tuple[Any, ...]] = await self._run(self._query, "SELECT pg_database_size(current_database())")
        return cast(int | None, rows[0][0])
