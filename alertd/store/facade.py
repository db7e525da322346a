"""The store: its parts over one backend, and one object that hands out their methods.

Each part (alertd/store/inbox.py, quarantine.py, steps.py, outbox.py, reads.py, audit.py,
retention.py, coordination.py, sessions.py, remediations.py, report_tables.py) has one job and
gets the backend (alertd/store/backend.py: SQLite or PostgreSQL, the connection, its thread,
the transactions, the inbox log) at construction. ``SqlStore`` builds them and is the facade.
"""
from __future__ import annotations

from typing import Callable

from alertd.store.audit import AuditTrail, SeenOnce
from alertd.store.backend import SqlBackend
from alertd.store.coordination import Commands, Lease, SharedMeta
from alertd.store.inbox import Inbox
from alertd.store.outbox import Outbox
from alertd.store.quarantine import Quarantine
from alertd.store.history_snapshot import HistorySnapshots
from alertd.store.reads import HistoryReads
from alertd.store.remediations import Remediations
from alertd.store.tickets import RmaTickets
from alertd.store.report_tables import ReportTables
from alertd.store.retention import Retention
from alertd.store.sessions import Sessions
from alertd.store.steps import EngineSteps


class SqlStore:
    """The parts of the store, and their methods under one name each: thin delegation, no logic.

    Why a facade: the service hands the store to its consumers (the processor, delivery, the web
    handlers, forwarded actions, the report), each of which declares the Protocol of what it uses
    (alertd/app, alertd/integrations/base.py ``NotifyStore``, alertd/web/host.py ``WebStore``,
    alertd/ha, alertd/report), and most of those Protocols span several parts (delivery reads
    incidents and writes the outbox; the web reads history, sessions, the quarantine, remediations).
    One object that satisfies them all keeps the assembly from wiring a bundle of parts per consumer.
    Each name below IS the part's bound method; a consumer that needs one part is given that part
    (the elector ``engine_lease``, admission ``inbox``).
    """

    def __init__(self, db: SqlBackend):
        self.db = db
        # The file's size on disk, where a stat() tells it (SQLite sets it; PostgreSQL has none).
        self.disk_bytes: Callable[[], int] | None = None
        self.inbox = Inbox(db)
        self.quarantine = Quarantine(db)
        self.steps = EngineSteps(db, self.inbox)
        self.outbox = Outbox(db)
        self.history = HistoryReads(db)
        self.snapshots = HistorySnapshots(db)
        self.audit = AuditTrail(db)
        self.seen_once = SeenOnce(db)
        self.retention = Retention(db, self.inbox)
        self.engine_lease = Lease(db)
        self.commands = Commands(db)
        self.shared_meta = SharedMeta(db)
        self.sessions = Sessions(db)
        self.remediations = Remediations(db)
        self.rma_tickets = RmaTickets(db)
        self.report_tables = ReportTables(db)
        self._bind()

    def _bind(self) -> None:
        inbox, quarantine, steps, outbox, reads = self.inbox, self.quarantine, self.steps, self.outbox, self.history
        self.size_bytes = self.db.size_bytes
        # the receive side and the engine's intake
        self.append_hook = inbox.append_hook
        self.pending_hooks = inbox.pending_hooks
        self.count_pending_inbox = inbox.count_pending_inbox
        self.count_backlog_hooks = inbox.count_backlog_hooks
        self.known_keys = inbox.known_keys
        self.count_attempt = quarantine.count_attempt
        self.uncount_attempt = quarantine.uncount_attempt
        self.list_set_aside = quarantine.list_set_aside
        self.take_for_replay = quarantine.take_for_replay
        # engine steps
        self.commit_step = steps.commit_step
        self.load_state = steps.load_state
        self.load_router_memory = steps.load_router_memory
        # delivery
        self.due_outbox = outbox.due_outbox
        self.finish_outbox = outbox.finish_outbox
        self.finish_outbox_batch = outbox.finish_outbox_batch
        self.save_ref = outbox.save_ref
        self.pending_outbox_for = outbox.pending_outbox_for
        self.retry_outbox = outbox.retry_outbox
        self.notify_ref = outbox.notify_ref
        self.any_ref = outbox.any_ref
        # history reads
        self.list_incidents = reads.list_incidents
        self.get_incident = reads.get_incident
        self.query_incidents = reads.query_incidents
        self.incident_docs = reads.incident_docs
        self.incidents_with_members = reads.incidents_with_members
        self.open_incidents_on = reads.open_incidents_on
        self.member_labels = reads.member_labels
        self.find_gpus = reads.find_gpus
        self.list_gpus = reads.list_gpus
        self.gpu_history = reads.gpu_history
        self.gpu_history_since = reads.gpu_history_since
        self.gpus_by_uuid = reads.gpus_by_uuid
        self.node_gpus = reads.node_gpus
        self.ranking = reads.ranking
        self.xid_heatmap = reads.xid_heatmap
        self.notification_state = reads.notification_state
        self.history_snapshot = self.snapshots.history_snapshot  # the past of a GPU and node, for the judge
        # audit, replay cache, retention
        self.record_audit = self.audit.record_audit
        self.list_audit = self.audit.list_audit
        self.remember_once = self.seen_once.remember_once
        self.prune = self.retention.prune
        self.stats = self.retention.stats
        self._bind_shared()

    def _bind_shared(self) -> None:
        """What several processes share: the lease, forwarded actions, settings, sessions, remediations, the
        report's tables."""
        lease, commands, report = self.engine_lease, self.commands, self.report_tables
        self.acquire_lease = lease.acquire_lease
        self.release_lease = lease.release_lease
        self.lease = lease.lease
        self.set_fence = lease.set_fence
        self.submit_command = commands.submit_command
        self.command_result = commands.command_result
        self.pending_commands = commands.pending_commands
        self.finish_command = commands.finish_command
        self.meta_setdefault = self.shared_meta.meta_setdefault
        self.create_session = self.sessions.create_session
        self.find_session = self.sessions.find_session
        self.end_session = self.sessions.end_session
        self.put_remediation = self.remediations.put_remediation
        self.get_remediation = self.remediations.get_remediation
        self.list_remediations = self.remediations.list_remediations
        self.claim_ticket = self.rma_tickets.claim_ticket
        self.record_ticket = self.rma_tickets.record_ticket
        self.release_ticket = self.rma_tickets.release_ticket
        self.incident_tickets = self.rma_tickets.incident_tickets
        self.record_fleet_sample = report.record_fleet_sample
        self.fleet_days = report.fleet_days
        self.fleet_nodes = report.fleet_nodes
        self.upsert_report_facts = report.upsert_report_facts
        self.report_watermark = report.report_watermark
        self.report_facts = report.report_facts
        self.claim_digest = report.claim_digest
        self.finish_digest = report.finish_digest

    async def open(self) -> None:
        """Open the backend; the parts' one-time upgrades run once it is migrated, before any step."""
        await self.db.open(self.steps.backfill_history, self.inbox.adopt_legacy)

    async def close(self) -> None:
        await self.db.close()
