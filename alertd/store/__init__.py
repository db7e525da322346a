"""Storage backends behind one interface (alertd.store.base.Store)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from alertd.store.base import Store

if TYPE_CHECKING:  # both backends are SqlStores; importing one loads its database driver
    from alertd.store.facade import SqlStore


def open_store(backend: str, *, data_dir: Path, sqlite_path: str = "", synchronous: str = "FULL", dsn: str = "",
               password: str = "", checkpoints: bool = True) -> SqlStore:
    """The configured backend. Typed as the one implementation rather than ``Store``: its users each declare
    the part they need (alertd/ha, alertd/web, alertd/notify Protocols), and ``Store`` holds only the engine's part."""
    if backend == "postgres":
        from alertd.store.postgres import PostgresStore

        return PostgresStore(dsn, password)
    from alertd.store.sqlite import SqliteStore

    return SqliteStore(Path(sqlite_path) if sqlite_path else data_dir / "alertd.sqlite3", synchronous=synchronous,
                       checkpoints=checkpoints)

__all__ = ["Store", "open_store"]
