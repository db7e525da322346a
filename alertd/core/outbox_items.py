"""What routing hands to the integrations through the outbox: a target, an intent and a payload.

Neutral on purpose: the router says WHAT should happen (show the incident, add
to its timeline, page, escalate, resolve) and WHERE (an integration and an
address on it); each integration decides HOW (post or edit a Slack message,
send a PagerDuty event, call a webhook).

The payload has one type per intent (``Show``, ``Timeline``, ``Page``, ``Resolve``,
``Escalate``; ``Payload`` is their union): each carries what its intent needs and a
consumer reads typed fields. A PAGE names the ``routing_key`` paged and the
``severity`` routed with, an ESCALATE the seconds ``after`` opening too, a TIMELINE
the ``events`` to add, SHOW and TIMELINE the route, receiver and team that chose
the target; every one has what changed (``kinds``) and the routing decision around
it (``note``, ``muted``, ...).

Stored as a flat JSON object with the item (``encode_payload``) and read back by
``decode_payload``, which also reads what earlier versions stored: one mapping whose
keys depended on the intent, where a console item had no route and only ``kinds``
and the keys its intent needs were always there. A key the intent needs that is
missing, or a key of the wrong JSON type, is refused with a ``PayloadError`` naming
it; keys no intent knows are left alone (a later version may add some). A stored
item whose payload is refused is read with ``unreadable`` set: the outbox gives it
up alone, with that reason, and delivers the rest.
"""
from __future__ import annotations

import enum
from dataclasses import MISSING, dataclass, fields
from datetime import datetime
from typing import Any, ClassVar, Mapping

from alertd.core.json_types import JSONObject


class Intent(enum.StrEnum):
    SHOW = "show"  # show the incident as it is now (post, or edit what was posted)
    TIMELINE = "timeline"  # add timeline events to the incident's conversation (a thread, a comment)
    PAGE = "page"  # page for the incident, or raise the page to its new severity
    ESCALATE = "escalate"  # due later: escalate unless acknowledged or resolved meanwhile
    RESOLVE = "resolve"  # acknowledged or resolved: bring what was paged along


# Item kinds written by earlier versions, read as intents (stored rows survive an upgrade).
LEGACY_KINDS = {"update": Intent.SHOW, "log": Intent.SHOW, "thread": Intent.TIMELINE, "sync": Intent.PAGE,
                "escalate": Intent.ESCALATE}


class Target(str):
    """Where an item goes: an integration (``kind``), an address on it and an optional lane.

    A value type whose text (``slack:#gpu-oncall``, ``slack:#gpu-oncall|escalation``) is its identity in
    the store: items are delivered in order per incident and target, and the ref an integration saves
    (a Slack ts, what PagerDuty was last sent) is kept per incident and target. Build it with
    ``Target.of``; read ``kind``/``address``/``lane``; code never takes the text apart itself.
    A lane gives one kind of work its own order and ref (the escalation note under a Slack message).
    """

    __slots__ = ()

    @classmethod
    def of(cls, kind: str, address: str = "", lane: str = "") -> "Target":
        if not kind or ":" in kind or "|" in kind:
            raise ValueError(f"bad integration name {kind!r}")
        if "|" in address:
            raise ValueError(f"a target address cannot contain '|': {address!r}")
        return cls(kind + (f":{address}" if address else "") + (f"|{lane}" if lane else ""))

    @property
    def kind(self) -> str:
        return self.partition(":")[0].partition("|")[0]

    @property
    def address(self) -> str:
        head = self.partition("|")[0]
        return head.partition(":")[2]

    @property
    def lane(self) -> str:
        return self.partition("|")[2]

    def in_lane(self, lane: str) -> "Target":
        return Target.of(self.kind, self.address, lane)

    @property
    def main(self) -> "Target":
        """The target without its lane (where the incident's message lives)."""
        return Target.of(self.kind, self.address)


JsonDoc = JSONObject  # a JSON object (an incident summary, a timeline event: Event.to_dict)


class PayloadError(ValueError):
    """A stored payload that is not the shape its intent needs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Common:
    """What every intent carries."""

    intent: ClassVar[Intent]
    kinds: tuple[str, ...]  # what changed (Change.kinds): opened, escalated, acknowledged, ...
    urgent: bool = False  # acknowledge or resolve: delivered before debounced updates
    only_if_posted: bool = False  # deliver only where the incident was already posted (a quiet or moved route)
    note: str = ""  # the routing decision's note (why this severity, this receiver)
    muted: str = ""  # why the route is quiet now (a mute window), or ""
    adopt: str = ""  # an earlier incident whose page or message this one takes over


@dataclass(frozen=True, slots=True, kw_only=True)
class Show(Common):
    """Show the incident as it is now (post, or edit what was posted)."""

    intent: ClassVar[Intent] = Intent.SHOW
    route: str  # the route, receiver and team that chose this target ("" for the console's own log line)
    receiver: str
    team: str
    incident: JsonDoc | None = None  # a summary of the incident, for log lines (router.change_payload)
    events: tuple[JsonDoc, ...] = ()  # the change's timeline events, for log lines


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline(Common):
    """Add timeline events to the incident's conversation (a thread, a comment)."""

    intent: ClassVar[Intent] = Intent.TIMELINE
    route: str
    receiver: str
    team: str
    events: tuple[JsonDoc, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Paging(Common):
    """What every intent a pager takes carries (PAGE, RESOLVE, ESCALATE)."""

    routing_key: str  # the key (name) paged
    severity: str  # the severity routed with
    escalation: bool = False  # part of an escalation (ESCALATE, and the RESOLVE that follows it)
    route: str = ""
    receiver: str = ""
    team: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Page(Paging):
    """Page for the incident, or raise the page to its new severity."""

    intent: ClassVar[Intent] = Intent.PAGE


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolve(Paging):
    """Acknowledged or resolved: bring what was paged along."""

    intent: ClassVar[Intent] = Intent.RESOLVE


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalate(Paging):
    """Due later: escalate unless acknowledged or resolved meanwhile."""

    intent: ClassVar[Intent] = Intent.ESCALATE
    after: float  # seconds after opening


Payload = Show | Timeline | Page | Resolve | Escalate
BY_INTENT: dict[Intent, type[Payload]] = {t.intent: t for t in (Show, Timeline, Page, Resolve, Escalate)}

# What an earlier version may have left out of a payload its intent now requires: read as empty.
_ONCE_OPTIONAL = frozenset({"route", "receiver", "team"})
# The JSON type of each key, by name (a key means the same in every intent that has it).
_STRINGS = frozenset({"note", "muted", "adopt", "route", "receiver", "team", "routing_key", "severity"})
_BOOLS = frozenset({"urgent", "only_if_posted", "escalation"})


def encode_payload(payload: Payload) -> JsonDoc:
    """The payload as the flat JSON object stored with its item (the keys earlier versions wrote)."""
    out: JsonDoc = {}
    for f in fields(payload):
        value = getattr(payload, f.name)
        if value is not None:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def decode_payload(intent: Intent, doc: object) -> Payload:
    """A stored payload (this version's or an earlier one's) as its intent's type; ``PayloadError`` naming the
    key when it is not the shape the intent needs."""
    cls = BY_INTENT[intent]
    if not isinstance(doc, Mapping):
        raise PayloadError(f"{intent} payload: a JSON object, not {_json_type(doc)}")
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in doc:
            values[f.name] = _read(intent, f.name, doc[f.name])
        elif f.name in _ONCE_OPTIONAL:
            values[f.name] = ""
        elif f.default is MISSING and f.default_factory is MISSING:
            raise PayloadError(f"{intent} payload: no {f.name!r}")
    return cls(**values)


def _read(intent: Intent, key: str, value: object) -> object:
    if key in _STRINGS:
        ok, want = isinstance(value, str), "a string"
    elif key in _BOOLS:
        ok, want = isinstance(value, bool), "true or false"
    elif key == "after":
        ok, want = isinstance(value, (int, float)) and not isinstance(value, bool), "a number of seconds"
    elif key == "kinds":
        ok, want = isinstance(value, list) and all(isinstance(v, str) for v in value), "a list of strings"
    elif key == "events":
        ok, want = isinstance(value, list) and all(isinstance(v, dict) for v in value), "a list of objects"
    else:  # incident
        ok, want = value is None or isinstance(value, dict), "an object"
    if not ok:
        raise PayloadError(f"{intent} payload: {key!r} must be {want}, not {_json_type(value)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return tuple(value) if isinstance(value, list) else value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


@dataclass(slots=True)
class OutboxItem:
    incident_id: str
    target: Target
    intent: Intent
    payload: Payload
    due_at: datetime
    id: int = 0
    attempts: int = 0
    last_error: str = ""
    unreadable: str = ""  # a stored item whose payload did not decode: why (its payload is then UNREADABLE)

    def __post_init__(self) -> None:
        if not isinstance(self.target, Target) and isinstance(self.target, str):
            self.target = Target(self.target)
        if not isinstance(self.intent, Intent) and isinstance(self.intent, str):
            self.intent = LEGACY_KINDS.get(self.intent) or Intent(self.intent)
        if self.payload.intent is not self.intent and not self.unreadable:
            raise PayloadError(f"a {self.intent} item cannot carry a {self.payload.intent} payload")

    @classmethod
    def stored(cls, incident_id: str, target: str, kind: str, payload: object, due_at: datetime, *, id: int,
               attempts: int, last_error: str) -> "OutboxItem":
        """An item as the store keeps it: its kind as written (earlier versions' names too) and its payload
        as decoded JSON. A payload that does not decode leaves the item ``unreadable`` instead of raising,
        so one bad row does not stop the delivery of the others."""
        intent = LEGACY_KINDS.get(kind) or Intent(kind)
        try:
            decoded, unreadable = decode_payload(intent, payload), ""
        except PayloadError as exc:
            decoded, unreadable = UNREADABLE, str(exc)
        return cls(incident_id, Target(target), intent, decoded, due_at, id=id, attempts=attempts,
                   last_error=last_error, unreadable=unreadable)


# What an unreadable stored item carries: nothing to deliver anywhere (its item is given up, never delivered).
UNREADABLE = Show(kinds=(), only_if_posted=True, route="", receiver="", team="")
