"""The storage interface every backend implements, and the records it trades in.

The receiver appends each webhook, as received, to the inbox log and answers only
after that commit; the engine takes webhooks from the log in order, drops alerts
whose redelivery key it has seen, and commits what it took (with the new keys),
the resulting incidents, timeline events, outbox work and engine metadata in ONE
transaction, so a crash at any point replays, never loses.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from alertd.core.outbox_items import OutboxItem
from alertd.core.router_memory import ESCALATION, SENT, Cordon, MemoryDelta, RouterMemory
from alertd.engine.correlate import EngineState
from alertd.core.model import Change, Incident

__all__ = ["Cordon", "ESCALATION", "EngineState", "Hook", "InboxKey", "MemoryDelta", "OutboxItem", "RouterMemory", "SENT",
           "SetAside", "Step", "Store", "StoreUnavailable", "Taken"]


BODY_SHOWN = 16_384  # characters of a set-aside body a listing carries (a webhook may be megabytes)


class StoreUnavailable(RuntimeError):
    """The store cannot take writes (disk full, read-only, database down): answer 503."""


@dataclass(slots=True)
class Hook:
    """A webhook in the inbox log, as received: what the engine takes, in id order."""

    id: int
    received_at: str
    alerts: int
    body: bytes


@dataclass(slots=True)
class InboxKey:
    """An alert's redelivery key, recorded when the engine takes it: a later copy with the same key is dropped.
    ``processed`` 2 sets it aside (the engine could not take it); ``note`` then says why, with the alert."""

    dedup: str
    received_at: datetime
    processed: int = 1
    note: str = ""


@dataclass(slots=True)
class Taken:
    """What an engine step took from the inbox: the webhooks (log ids) and its alerts' keys."""

    hooks: list[int] = field(default_factory=list)
    keys: list[InboxKey] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.hooks or self.keys)


@dataclass(slots=True)
class AuditEntry:
    """Who did what to which incident (or the rules), through which door, and how it ended."""

    at: datetime
    actor: str
    action: str  # ack, resolve, silence, unsilence, reload
    target: str  # an incident id, or "rules"
    via: str  # api, slack, ui, signal
    outcome: str = "ok"  # "ok", or why nothing happened
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at.isoformat().replace("+00:00", "Z"), "actor": self.actor, "action": self.action,
                "target": self.target, "via": self.via, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class SetAside:
    """One set-aside webhook or alert, as the quarantine API lists it."""

    id: int
    key: str
    received_at: str
    reason: str
    body: str
    replayed: bool
    size: int = -1  # characters of the whole body (a listing reads only its start); -1: ``body`` is whole

    @property
    def kind(self) -> str:
        return "webhook" if self.key.startswith("webhook:") else "alert"

    def to_dict(self, body_chars: int = BODY_SHOWN) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "kind": self.kind, "received_at": self.received_at,
                "reason": self.reason, "state": "replayed" if self.replayed else "set aside",
                "body_chars": len(self.body) if self.size < 0 else self.size, "body": self.body[:body_chars]}


@dataclass(slots=True)
class Step:
    """The result of one engine step, committed atomically."""

    inbox: Taken = field(default_factory=Taken)  # what the step took from the inbox
    changes: list[Change] = field(default_factory=list)
    outbox: list[OutboxItem] = field(default_factory=list)
    next_seq: int = 0
    heartbeat_at: datetime | None = None
    memory: MemoryDelta = field(default_factory=MemoryDelta)  # the router's, in the same transaction


class Store(Protocol):
    """What the service uses of the store (alertd/store/facade.py ``SqlStore``, built of parts)."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def append_hook(self, body: bytes, received_at: datetime, alerts: int) -> int:
        """Durably append a webhook as received (``alerts``: how many it holds); return its log id only after
        commit. Raise StoreUnavailable if impossible."""

    async def pending_hooks(self, limit: int) -> list[Hook]:
        """Webhooks the engine has not taken, oldest first, about ``limit`` alerts' worth (at least one)."""

    async def count_pending_inbox(self) -> int:
        """Alerts in webhooks the engine has not taken yet (the alertd_inbox_pending gauge)."""

    async def count_backlog_hooks(self) -> int:
        """Webhooks appended and not yet taken by the engine, as the store holds them now (another process's
        engine included), at the cost of a few index lookups whatever the backlog (receiver.max_backlog)."""

    async def known_keys(self, keys: list[str]) -> set[str]:
        """Which of these redelivery keys the engine has taken (or set aside) already."""

    async def count_attempt(self, ids: list[int], now: datetime) -> tuple[list[int], int]:
        """Count an attempt at webhooks about to be run, committed first (alertd/store/quarantine.py): the ones
        to take (only the first once any was tried before) and the most tries any of them had."""

    async def uncount_attempt(self, ids: list[int]) -> None:
        """Take back an attempt the store itself made fail."""

    async def list_set_aside(self, *, limit: int = 100, before: int | None = None) -> list[SetAside]:
        """Set-aside webhooks and alerts (``inbox.processed`` 2, replayed 3), newest first."""

    async def take_for_replay(self, item_id: int) -> SetAside | None:
        """Mark a set-aside row replayed under a renamed key and return it, for the caller to append again."""

    async def commit_step(self, step: Step) -> None:
        """Webhooks taken and their keys, incidents, events, outbox items, engine meta and router memory: one
        transaction."""

    async def load_state(self) -> EngineState: ...

    async def load_router_memory(self) -> RouterMemory:
        """The router's memory as of the last committed step (see MemoryDelta)."""

    async def list_incidents(self, *, status: str | None = None, node: str | None = None,
                             since: datetime | None = None, limit: int = 100) -> list[dict[str, Any]]: ...

    async def get_incident(self, incident_id: str) -> Incident | None: ...

    async def due_outbox(self, now: datetime, limit: int) -> list[OutboxItem]:
        """Pending work that is due, oldest first; at most one (the oldest) per incident+target."""

    async def finish_outbox(self, item_id: int, *, ref: tuple[str, str, str] | None = None) -> None:
        """Mark delivered; ``ref`` (incident, target, external id such as a Slack ts) is saved in the same commit."""

    async def finish_outbox_batch(self, done: list[tuple[int, tuple[str, str, str] | None]]) -> None:
        """Mark pending items done, saving their refs, in one commit (one fsync per delivery round).

        Also how a notifier marks queued items that one delivery covered (coalesced updates)."""

    async def save_ref(self, incident_id: str, target: str, ref: str) -> None:
        """Save an external id before the rest of a delivery, so a crash cannot post twice."""

    async def pending_outbox_for(self, incident_id: str, target: str, *, after_id: int,
                                 kinds: tuple[str, ...]) -> list[OutboxItem]:
        """Pending items of these intents for one incident+target queued after ``after_id``, oldest first."""

    async def retry_outbox(self, item_id: int, due_at: datetime, error: str, *, give_up: bool = False) -> None: ...

    async def notify_ref(self, incident_id: str, target: str) -> str | None: ...

    async def any_ref(self, target: str, like: str) -> str | None:
        """One saved ref of ``target`` (any incident) matching the SQL pattern ``like``, or None."""

    async def prune(self, before: datetime, *, resolved_before: datetime | None = None) -> int:
        """Drop processed inbox rows and delivered outbox rows older than ``before`` and, when given, resolved
        incidents (members, timeline) resolved before ``resolved_before``; in small batches."""

    async def stats(self) -> dict[str, int]: ...

    async def size_bytes(self) -> int | None:
        """Bytes on disk (alertd_store_bytes), None when the backend cannot tell."""

    async def record_audit(self, entry: AuditEntry) -> None: ...

    async def list_audit(self, *, since: datetime | None = None, actor: str | None = None,
                         action: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """Newest first."""

    async def remember_once(self, key: str, now: datetime, forget_before: datetime) -> bool:
        """True the first time ``key`` is seen (kept until ``forget_before`` passes it): a durable replay cache."""

    async def create_session(self, key: str, name: str, token: str, now: float, expires_at: float) -> None:
        """A browser session (alertd/store/sessions.py): ``key`` hashes its id, ``token`` fingerprints its token."""

    async def find_session(self, key: str, now: float) -> tuple[str, str] | None:
        """(name, token fingerprint) of a live session, or None."""

    async def end_session(self, key: str) -> bool:
        """Delete a session; False when there was none."""
