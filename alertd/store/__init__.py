"""The store: parts with one job each over a shared SQLite or PostgreSQL backend (alertd/store/facade.py)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # both backends' stores are SqlStores; importing one loads its database driver
    from alertd.store.facade import SqlStore


def open_store(backend: str, *, data_dir: Path, sqlite_path: str = "", synchronous: str = "FULL", dsn: str = "",
               password: str = "", checkpoints: bool = True) -> SqlStore:
    """The store on the configured backend. Its users each declare the Protocol of what they use (alertd/app,
    alertd/ha, alertd/web, alertd/notify, alertd/report), which ``SqlStore`` is checked against."""
    if backend == "postgres":
        from alertd.store.postgres import PostgresStore

        return PostgresStore(dsn, password)
    from alertd.store.sqlite import SqliteStore

    return SqliteStore(Path(sqlite_path) if sqlite_path else data_dir / "alertd.sqlite3", synchronous=synchronous,
                       checkpoints=checkpoints)

__all__ = ["open_store"]
