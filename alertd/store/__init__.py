"""Storage backends behind one interface (alertd.store.base.Store)."""
from __future__ import annotations

from pathlib import Path

from alertd.store.base import Store


def open_store(backend: str, *, data_dir: Path, sqlite_path: str = "", synchronous: str = "FULL", dsn: str = "",
               password: str = "", checkpoints: bool = True) -> Store:
    if backend == "postgres":
        from alertd.store.postgres import PostgresStore

        return PostgresStore(dsn, password)
    from alertd.store.sqlite import SqliteStore

    return SqliteStore(Path(sqlite_path) if sqlite_path else data_dir / "alertd.sqlite3", synchronous=synchronous,
                       checkpoints=checkpoints)
