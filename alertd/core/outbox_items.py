"""What routing hands to the integrations through the outbox: a target, an intent and a payload.

Neutral on purpose: the router says WHAT should happen (show the incident, add
to its timeline, page, escalate, resolve) and WHERE (an integration and an
address on it); each integration decides HOW (post or edit a Slack message,
send a PagerDuty event, call a webhook).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict


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


class Payload(TypedDict, total=False):
    """What the router tells an integration beside the intent (stored as JSON with the item). Which keys an
    item carries depends on its intent: every one has ``kinds``; SHOW and TIMELINE the route that chose the
    target; PAGE and RESOLVE ``routing_key`` and ``severity``; ESCALATE ``after`` too."""

    kinds: list[str]  # what changed (Change.kinds): opened, escalated, acknowledged, ...
    urgent: bool  # acknowledge or resolve: delivered before debounced updates
    incident: dict[str, Any]  # a summary of the incident, for log lines (router.change_payload)
    events: list[dict[str, Any]]  # timeline events to add (Event.to_dict)
    only_if_posted: bool  # deliver only where the incident was already posted (a quiet or moved route)
    note: str  # the routing decision's note (why this severity, this receiver)
    muted: str  # why the route is quiet now (a mute window), or ""
    route: str  # the route, receiver and team that chose this target
    receiver: str
    team: str
    adopt: str  # an earlier incident whose page or message this one takes over
    routing_key: str  # PagerDuty: the key (name) paged
    severity: str  # the severity routed with
    escalation: bool  # part of an escalation (ESCALATE, and the RESOLVE that follows it)
    after: float  # ESCALATE: seconds after opening, unless acknowledged or resolved by then


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

    def __post_init__(self) -> None:
        if not isinstance(self.target, Target) and isinstance(self.target, str):
            self.target = Target(self.target)
        if not isinstance(self.intent, Intent) and isinstance(self.intent, str):
            self.intent = LEGACY_KINDS.get(self.intent) or Intent(self.intent)
