"""PostgreSQL backend (psycopg 3), for deployments that already run a database."""
from __future__ import annotations

from typing import Any

import psycopg

from alertd.store.dbapi import SqlStore


class PostgresStore(SqlStore):
    serial = "BIGSERIAL"
    placeholder = "%s"
    unavailable = (psycopg.OperationalError, psycopg.errors.DiskFull, psycopg.errors.ReadOnlySqlTransaction)

    def __init__(self, dsn: str, password: str = ""):
        super().__init__()
        self.dsn = dsn
        self.password = password  # from storage.postgres_password(_file): kept out of the DSN and the logs

    def _connect(self) -> Any:
        extra = {"password": self.password} if self.password else {}
        return psycopg.connect(self.dsn, autocommit=False, **extra)

    def _begin(self, cur: Any) -> None:
        pass  # psycopg opens a transaction on the first statement

    def _lost(self, conn: Any) -> bool:
        return conn.closed or conn.broken
