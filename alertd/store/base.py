"""The records the store trades in (its parts: alertd/store/facade.py).

The receiver appends each webhook, as received, to the inbox log and answers only
after that commit; the engine takes webhooks from the log in order, drops alerts
whose redelivery key it has seen, and commits what it took (with the new keys),
the resulting incidents, timeline events, outbox work and engine metadata in ONE
transaction, so a crash at any point replays, never loses.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from alertd.core.json_types import JSONObject
from alertd.core.outbox_items import OutboxItem
from alertd.core.router_memory import ESCALATION, REOPENABLE, SENT, Cordon, MemoryDelta, RouterMemory
from alertd.engine.correlate import EngineState
from alertd.core.model import Change

__all__ = ["Cordon", "ESCALATION", "EngineState", "Hook", "InboxKey", "MemoryDelta", "OutboxItem", "REOPENABLE", "RouterMemory", "SENT",
           "SetAside", "Step", "StoreUnavailable", "Taken"]


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

    def to_dict(self) -> JSONObject:
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

    def to_dict(self, body_chars: int = BODY_SHOWN) -> JSONObject:
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
