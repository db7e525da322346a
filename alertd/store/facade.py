"""The store: its parts over one backend, and one object that is all of them.

Each part (alertd/store/inbox.py, quarantine.py, steps.py, outbox.py, reads.py, audit.py,
retention.py, coordination.py, sessions.py, remediations.py, report_tables.py) has one job and
is a ``Part`` (alertd/store/database.py) over the backend (alertd/store/backend.py: SQLite or
PostgreSQL, the connection, its thread, the transactions, the inbox log). ``SqlStore`` inherits
them all and is the facade.
"""
from __future__ import annotations

from typing import Callable

from alertd.store.audit import AuditTrail, SeenOnce
from alertd.store.backend import SqlBackend
from alertd.store.coordination import Commands, Lease, SharedMeta
from alertd.store.history_snapshot import HistorySnapshots
from alertd.store.outbox import Outbox
from alertd.store.quarantine import Quarantine
from alertd.store.reads import HistoryReads
from alertd.store.remediations import Remediations
from alertd.store.report_tables import ReportTables
from alertd.store.retention import Retention
from alertd.store.sessions import Sessions
from alertd.store.steps import EngineSteps
from alertd.store.tickets import RmaTickets


class SqlStore(EngineSteps, Retention, Quarantine, Outbox, HistoryReads, HistorySnapshots, AuditTrail, SeenOnce,
               Lease, Commands, SharedMeta, Sessions, Remediations, RmaTickets, ReportTables):
    """Every part of the store, as one object over one backend: no logic of its own.

    Why one object: the service hands the store to its consumers (the processor, delivery, the web
    handlers, forwarded actions, the report, the elector, admission), each of which declares the
    Protocol of what it uses (alertd/app, alertd/integrations/base.py ``NotifyStore``,
    alertd/web/host.py ``WebStore``, alertd/ha, alertd/report), and most of those Protocols span
    several parts (delivery reads incidents and writes the outbox; the web reads history, sessions,
    the quarantine, remediations). Inheriting the parts keeps those Protocols flat lists of methods;
    tests/unit/test_store_facade.py keeps any two parts from defining the same name, so no part's
    method hides another's. The inbox part comes in through the engine's steps and retention, which
    build on it (``EngineSteps(Inbox)``, ``Retention(Inbox)``).
    """

    db: SqlBackend

    def __init__(self, db: SqlBackend):
        super().__init__(db)
        # The file's size on disk, where a stat() tells it (SQLite sets it; PostgreSQL has none).
        self.disk_bytes: Callable[[], int] | None = None

    async def size_bytes(self) -> int | None:
        """The database's size as the database reports it (None where it cannot)."""
        return await self.db.size_bytes()

    async def open(self) -> None:
        """Open the backend; the parts' one-time upgrades run once it is migrated, before any step."""
        await self.db.open(self.backfill_history, self.adopt_legacy)

    async def close(self) -> None:
        await self.db.close()
