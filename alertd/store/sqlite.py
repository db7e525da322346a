"""The embedded default: SQLite in WAL mode, synchronous=FULL (an acknowledged batch survives power loss)."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from alertd.store.dbapi import SqlStore


class SqliteStore(SqlStore):
    serial = "INTEGER"
    placeholder = "?"
    unavailable = (sqlite3.OperationalError, sqlite3.DatabaseError)

    def __init__(self, path: Path | str, *, synchronous: str = "FULL", max_pages: int = 0):
        super().__init__()
        self.path = Path(path)
        self.synchronous = synchronous
        self.max_pages = max_pages  # a hard size cap; 0 = none (tests use it to simulate a full disk)

    def _connect(self) -> Any:
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=10)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        if self.max_pages:
            conn.execute(f"PRAGMA max_page_count={int(self.max_pages)}")
        return conn

    def _begin(self, cur: Any) -> None:
        cur.execute("BEGIN IMMEDIATE")

    def set_max_pages(self, pages: int) -> None:
        """Cap the database size from now on (simulates a full disk in tests)."""
        self._executor.submit(lambda: self._conn.execute(f"PRAGMA max_page_count={int(pages)}")).result()
