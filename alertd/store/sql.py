"""SQL shared by the SQLite and PostgreSQL backends: schema migrations and row codecs.

Placeholders are written as ``?`` and rewritten for drivers that want ``%s``.
"""
from __future__ import annotations

import json

import orjson
from typing import Any, Callable, Iterable

from alertd.core.json_types import JSONObject, obj
from alertd.core.outbox_items import LEGACY_KINDS, OutboxItem
from alertd.core.model import Event, Incident, Member, iso, parse_iso
from alertd.store import compact, history, remediations, report_tables, sessions, tickets
from alertd.store.compact import expand_member

# Each migration runs once, in order; the applied count lives in schema_version.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE inbox (
            seq {serial} PRIMARY KEY,
            dedup TEXT NOT NULL UNIQUE,
            received_at TEXT NOT NULL,
            alert TEXT NOT NULL,
            processed INTEGER NOT NULL DEFAULT 0)""",
        "CREATE INDEX inbox_pending ON inbox (processed, seq)",
        """CREATE TABLE incidents (
            id TEXT PRIMARY KEY,
            seq BIGINT NOT NULL,
            key TEXT NOT NULL,
            status TEXT NOT NULL,
            severity TEXT NOT NULL,
            cluster TEXT NOT NULL,
            node TEXT NOT NULL,
            opened_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            resolved_at TEXT,
            doc TEXT NOT NULL)""",
        "CREATE INDEX incidents_status ON incidents (status, seq)",
        "CREATE INDEX incidents_node ON incidents (node, seq)",
        "CREATE INDEX incidents_key ON incidents (key, seq)",
        """CREATE TABLE members (
            incident_id TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            doc TEXT NOT NULL,
            PRIMARY KEY (incident_id, fingerprint))""",
        """CREATE TABLE events (
            id {serial} PRIMARY KEY,
            incident_id TEXT NOT NULL,
            doc TEXT NOT NULL)""",
        "CREATE INDEX events_incident ON events (incident_id, id)",
        """CREATE TABLE outbox (
            id {serial} PRIMARY KEY,
            incident_id TEXT NOT NULL,
            target TEXT NOT NULL,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at TEXT NOT NULL,
            due_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL DEFAULT 'pending',
            last_error TEXT NOT NULL DEFAULT '',
            done_at TEXT)""",
        "CREATE INDEX outbox_due ON outbox (state, due_at, id)",
        "CREATE INDEX outbox_incident ON outbox (incident_id, target, state, id)",
        """CREATE TABLE notify_refs (
            incident_id TEXT NOT NULL,
            target TEXT NOT NULL,
            ref TEXT NOT NULL,
            PRIMARY KEY (incident_id, target))""",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ],
    [  # the router's memory, committed with each engine step (RouterMemory)
        """CREATE TABLE router_marks (
            incident_id TEXT NOT NULL,
            role TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (incident_id, role, value))""",
        """CREATE TABLE router_cordons (
            cluster TEXT NOT NULL,
            node TEXT NOT NULL,
            since TEXT NOT NULL,
            incident_id TEXT NOT NULL,
            PRIMARY KEY (cluster, node))""",
    ],
    [  # who did what (alertd audit), and signed requests already seen (Slack replays)
        """CREATE TABLE audit (
            id {serial} PRIMARY KEY,
            at TEXT NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            via TEXT NOT NULL,
            outcome TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '')""",
        "CREATE INDEX audit_at ON audit (at)",
        "CREATE TABLE seen_once (key TEXT PRIMARY KEY, seen_at TEXT NOT NULL)",
        "CREATE INDEX seen_once_at ON seen_once (seen_at)",
    ],
    [   # several replicas: the engine lease (fencing token) and actions forwarded to the leader
        """CREATE TABLE leases (
            name TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            token BIGINT NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            address TEXT NOT NULL DEFAULT '')""",
        """CREATE TABLE commands (
            id {serial} PRIMARY KEY,
            kind TEXT NOT NULL,
            incident_id TEXT NOT NULL,
            args TEXT NOT NULL,
            created_at TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending',
            result TEXT NOT NULL DEFAULT '')""",
        "CREATE INDEX commands_pending ON commands (state, id)",
    ],
    history.MIGRATION,  # incident facets and GPU identity (alertd/store/history.py)
    ["CREATE INDEX incidents_seq ON incidents (seq)"],  # newest-first pages of the unfiltered list
    [  # an alert's body is kept apart until the engine has taken it, then deleted (its pages are reused):
       # the inbox row stays only as the redelivery dedup key, the body lives on in the incident's member
        "CREATE TABLE inbox_bodies (seq BIGINT PRIMARY KEY, alert TEXT NOT NULL)",
        "INSERT INTO inbox_bodies (seq, alert) SELECT seq, alert FROM inbox WHERE processed <> 1",
        "UPDATE inbox SET alert = ''",
    ],
    [  # outbox items name an intent (show, timeline, page, escalate, resolve), not a notifier's verb
        *(f"UPDATE outbox SET kind = '{intent.value}' WHERE kind = '{old}'" for old, intent in LEGACY_KINDS.items()),
    ],
    [  # a webhook's body is stored once, as received; its alerts' inbox rows point at it (hook, pos) and it is
       # deleted when the engine has taken the last of them (pending counts down). Rows stored before keep their
       # bodies in inbox_bodies, and alerts alertd makes itself (reconciliation) still go there.
        "CREATE TABLE inbox_hooks (id {serial} PRIMARY KEY, received_at TEXT NOT NULL, pending INTEGER NOT NULL, "
        "body TEXT NOT NULL)",
        "ALTER TABLE inbox ADD COLUMN hook BIGINT",
        "ALTER TABLE inbox ADD COLUMN pos INTEGER NOT NULL DEFAULT 0",
    ],
    [  # fewer and smaller rows per alert (docs/performance.md, "Disk use under an alert storm")
        *history.SLIM_MIGRATION,
        # an outbox payload is kept apart until delivered, then deleted (its pages are reused); the row stays
        # for the incident page (state, attempts, times)
        "CREATE TABLE outbox_payloads (id {int_key} PRIMARY KEY, payload TEXT NOT NULL)",
        "INSERT INTO outbox_payloads (id, payload) SELECT id, payload FROM outbox WHERE state <> 'done'",
        "UPDATE outbox SET payload = ''",
        # only the rows the engine has not taken yet are looked up by state
        "DROP INDEX inbox_pending",
        "CREATE INDEX inbox_pending ON inbox (processed, seq) WHERE processed = 0",
    ],
    [  # the receive side appends each webhook, as received, to a log; the engine records its alerts' keys in inbox
       # when it takes them (alertd/store/inbox.py). SQLite keeps the log in a database file of its own.
        "{inbox_log}",
    ],
    [  # redelivery keys lead with the start time (alertd.receive.payload.delivery_key): fingerprint|start|status
       # becomes start|status|fingerprint. Only keys whose first part has no "." (a start time always has one).
        "UPDATE inbox SET dedup = substr(dedup, {strpos}(dedup, '|') + 1) || '|' || "
        "substr(dedup, 1, {strpos}(dedup, '|') - 1) "
        "WHERE {strpos}(dedup, '|') > 0 AND {strpos}(substr(dedup, 1, {strpos}(dedup, '|')), '.') = 0",
    ],
    sessions.MIGRATION,  # browser sessions: revocable, seen by every process (alertd/store/sessions.py)
    [  # poison webhooks (alertd/store/quarantine.py): attempts counted before the engine runs a webhook, and
       # the set-aside rows (processed 2, replayed 3) listed newest first
        "CREATE TABLE inbox_attempts (hook BIGINT PRIMARY KEY, attempts INTEGER NOT NULL, last_at TEXT NOT NULL)",
        "CREATE INDEX inbox_set_aside ON inbox (seq) WHERE processed >= 2",
    ],
    report_tables.MIGRATION,  # fleet size samples, report facts, the weekly digest's claim (store/report_tables.py)
    remediations.MIGRATION,  # cordon / drain proposals and their results (alertd/store/remediations.py)
    tickets.MIGRATION,  # RMA tickets: one per incident, GPU and target, claimed before opening (store/tickets.py)
    [  # the incident list, the worst first (alertd/web/triage.py): one range per status and severity, newest first
        "CREATE INDEX incidents_triage ON incidents (status, severity, seq)",
    ],
]
INBOX_LOG = ("CREATE TABLE inbox_log (id {serial} PRIMARY KEY, received_at TEXT NOT NULL, alerts INTEGER NOT NULL, "
             "body {blob} NOT NULL)")

UPSERT_INCIDENT = """INSERT INTO incidents (id, seq, key, status, severity, cluster, node, opened_at, updated_at, resolved_at, doc)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, severity = excluded.severity, node = excluded.node,
  updated_at = excluded.updated_at, resolved_at = excluded.resolved_at, doc = excluded.doc"""
UPSERT_MEMBER = """INSERT INTO members (incident_id, fingerprint, doc) VALUES (?, ?, ?)
ON CONFLICT (incident_id, fingerprint) DO UPDATE SET doc = excluded.doc"""
INSERT_EVENT = "INSERT INTO events (incident_id, doc) VALUES (?, ?)"
INSERT_OUTBOX = """INSERT INTO outbox (incident_id, target, kind, payload, created_at, due_at)
VALUES (?, ?, ?, '', ?, ?)"""
# Right after INSERT_OUTBOX, in the same session: {last_id} is the backend's id of the row just inserted
# (statements are built before the transaction runs them, so the id cannot be read back in between).
INSERT_OUTBOX_PAYLOAD = "INSERT INTO outbox_payloads (id, payload) VALUES ({last_id}, ?)"
UPSERT_META = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
UPSERT_REF = """INSERT INTO notify_refs (incident_id, target, ref) VALUES (?, ?, ?)
ON CONFLICT (incident_id, target) DO UPDATE SET ref = excluded.ref"""
# The oldest pending item of each incident+target, if due: delivery stays in order per incident.
# The payload is in outbox_payloads until delivered (rows written before that table: in outbox.payload).
OUTBOX_SELECT = """SELECT o.id, o.incident_id, o.target, o.kind, COALESCE(b.payload, o.payload), o.due_at, o.attempts,
  o.last_error FROM outbox o LEFT JOIN outbox_payloads b ON b.id = o.id"""
DUE_OUTBOX = OUTBOX_SELECT + """
WHERE o.state = 'pending' AND o.due_at <= ?
  AND o.id = (SELECT min(p.id) FROM outbox p WHERE p.incident_id = o.incident_id AND p.target = o.target AND p.state = 'pending')
ORDER BY o.due_at, o.id LIMIT ?"""
INSERT_MARK = "INSERT INTO router_marks (incident_id, role, value) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
FORGET_MARKS = "DELETE FROM router_marks WHERE incident_id = ?"
DROP_MARKS = "DELETE FROM router_marks WHERE incident_id = ? AND role = ?"
UPSERT_CORDON = """INSERT INTO router_cordons (cluster, node, since, incident_id) VALUES (?, ?, ?, ?)
ON CONFLICT (cluster, node) DO UPDATE SET since = excluded.since, incident_id = excluded.incident_id"""
DELETE_CORDON = "DELETE FROM router_cordons WHERE cluster = ? AND node = ?"
LAST_BY_KEY = """SELECT i.key, i.id FROM incidents i
JOIN (SELECT key, max(seq) AS seq FROM incidents WHERE status = 'resolved' GROUP BY key) last
  ON last.key = i.key AND last.seq = i.seq"""


def dumps(value: Any) -> str:
    """Every stored row is encoded here, on the store thread: orjson is several times faster than json."""
    return orjson.dumps(value).decode()


def incident_row(inc: Incident, encode: Callable[[Any], Any] = dumps) -> tuple[Any, ...]:
    """The values of UPSERT_INCIDENT; ``encode`` is the backend's way to store a document (text or packed)."""
    doc = inc.to_dict(with_members=False)
    stored = compact.compact_incident(dict(doc))
    return (inc.id, int(inc.id.rsplit("-", 1)[-1]), inc.key, inc.status, inc.severity, inc.cluster, inc.node,
            doc["openedAt"], doc["updatedAt"], doc["resolvedAt"], encode(stored))


def packed(value: Any, tag: int = compact.PACK_WITH) -> bytes:
    """A member, incident or timeline document compressed (SQLite stores it as a BLOB) with a preset dictionary."""
    return compact.pack(orjson.dumps(value), tag)


def unpacked(raw: str | bytes) -> str | bytes:
    """A member, incident or timeline document as stored: JSON text (PostgreSQL, older SQLite rows) or packed()."""
    return compact.unpack(bytes(raw)) if isinstance(raw, (bytes, memoryview)) else raw


def incident_doc(raw: str | bytes) -> JSONObject:
    """A stored incident document, as written by any version -> Incident.to_dict() shape."""
    return compact.expand_incident(obj(json.loads(unpacked(raw)), "an incident document"))


def assemble(doc: str | bytes, members: Iterable[tuple[str, str | bytes]], events: Iterable[str | bytes]) -> Incident:
    """An incident from its stored rows: its document, (fingerprint, document) per member, its timeline."""
    inc = Incident.from_dict(incident_doc(doc))
    for m in sorted((Member.from_dict(expand_member(obj(json.loads(unpacked(raw)), "a member document"), fp)) for fp, raw in members),
                    key=lambda m: (m.starts_at, m.fingerprint)):
        inc.members[m.fingerprint] = m
    inc.count_firing()
    inc.timeline = [Event.from_dict(json.loads(unpacked(raw))) for raw in events]
    return inc


def outbox_row(o: OutboxItem) -> tuple[str, str, str, str | None, str | None]:
    """OutboxItem -> the values of INSERT_OUTBOX (created_at is the due time the router gave it)."""
    return (o.incident_id, o.target, str(o.intent), iso(o.due_at), iso(o.due_at))


def outbox_item(row: tuple[Any, ...]) -> OutboxItem:
    """A row selected as OUTBOX_SELECT (or DUE_OUTBOX) -> OutboxItem."""
    due = parse_iso(row[5])
    assert due is not None  # NOT NULL column
    return OutboxItem.stored(row[1], row[2], row[3], json.loads(row[4]), due, id=row[0], attempts=row[6],
                             last_error=row[7])
