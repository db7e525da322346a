"""What people and integrations change on an incident through the engine, one class per command.

A command is declared once here: its name (the ``kind`` a follower forwards through the store's ``commands``
table), its arguments and how they travel as JSON, and what it asks of the engine (``apply``). The engine's
side runs it in one step (alertd/app/actions.py); a process that does not run the engine forwards it and the
leader decodes it with ``command_from`` (alertd/ha/commands.py). So a new command is one class here plus the
engine method it calls, and every door (Slack, the UI, the API, the CLI through the API) reaches it the same
way, leader or follower.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Protocol, Self

from alertd.core.json_types import JSONObject, JSONValue, as_text, obj
from alertd.core.model import Change
from alertd.core.tickets import TicketLink


class IncidentEditor(Protocol):
    """The engine's correlator, as the commands use it (alertd/engine/correlate.py)."""

    def acknowledge(self, incident_id: str, actor: str, now: datetime) -> list[Change]: ...

    def resolve(self, incident_id: str, actor: str, now: datetime) -> list[Change]: ...

    def annotate(self, incident_id: str, key: str, value: object, now: datetime, kind: str, text: str = "",
                 actor: str = "") -> list[Change]: ...

    def link_ticket(self, incident_id: str, ticket: TicketLink, now: datetime, actor: str = "") -> list[Change]: ...


@dataclass(frozen=True, slots=True)
class _ByActor:
    """A command that names only its incident and who gave it."""

    incident_id: str
    actor: str = ""

    def args(self) -> JSONObject:
        return {"actor": self.actor}

    @classmethod
    def from_args(cls, incident_id: str, args: JSONObject) -> Self:
        return cls(incident_id, as_text(args.get("actor")))


@dataclass(frozen=True, slots=True)
class Acknowledge(_ByActor):
    """Someone is on it: the incident (and a fleet's open nodes) stop re-notifying."""

    kind: ClassVar[str] = "acknowledge"

    def apply(self, editor: IncidentEditor, now: datetime) -> list[Change]:
        return editor.acknowledge(self.incident_id, self.actor, now)


@dataclass(frozen=True, slots=True)
class Resolve(_ByActor):
    """Closed by a person (a fleet closes with its nodes)."""

    kind: ClassVar[str] = "resolve"

    def apply(self, editor: IncidentEditor, now: datetime) -> list[Change]:
        return editor.resolve(self.incident_id, self.actor, now)


@dataclass(frozen=True, slots=True)
class Annotate:
    """Data on the incident (a silence, a remediation's state, evidence), with its timeline event."""

    kind: ClassVar[str] = "annotate"
    incident_id: str
    key: str
    value: JSONValue
    event: str = "annotated"  # the timeline event's kind
    text: str = ""
    actor: str = ""

    def args(self) -> JSONObject:
        return {"key": self.key, "value": self.value, "kind": self.event, "text": self.text, "actor": self.actor}

    @classmethod
    def from_args(cls, incident_id: str, args: JSONObject) -> "Annotate":
        return cls(incident_id, as_text(args.get("key")), args.get("value"), as_text(args.get("kind"), "annotated"),
                   as_text(args.get("text")), as_text(args.get("actor")))

    def apply(self, editor: IncidentEditor, now: datetime) -> list[Change]:
        return editor.annotate(self.incident_id, self.key, self.value, now, self.event, self.text, self.actor)


@dataclass(frozen=True, slots=True)
class LinkTicket:
    """A ticket opened for the incident (an RMA handoff), once per target and GPU."""

    kind: ClassVar[str] = "link_ticket"
    incident_id: str
    ticket: TicketLink
    actor: str = ""

    def args(self) -> JSONObject:
        return {"ticket": obj(dict(self.ticket.to_json()), "ticket"), "actor": self.actor}

    @classmethod
    def from_args(cls, incident_id: str, args: JSONObject) -> "LinkTicket":
        return cls(incident_id, TicketLink.from_json(obj(args.get("ticket") or {}, "ticket")),
                   as_text(args.get("actor")))

    def apply(self, editor: IncidentEditor, now: datetime) -> list[Change]:
        return editor.link_ticket(self.incident_id, self.ticket, now, self.actor)


IncidentCommand = Acknowledge | Resolve | Annotate | LinkTicket
COMMANDS: dict[str, type[IncidentCommand]] = {c.kind: c for c in (Acknowledge, Resolve, Annotate, LinkTicket)}


class UnknownCommand(ValueError):
    """A forwarded command of a kind this version does not know (a newer replica during an upgrade)."""


def command_from(kind: str, incident_id: str, args: JSONObject) -> IncidentCommand:
    """The command a follower forwarded, from its row in the ``commands`` table."""
    declared = COMMANDS.get(kind)
    if declared is None:
        raise UnknownCommand(f"unknown incident command {kind!r}; one of {', '.join(COMMANDS)}")
    return declared.from_args(incident_id, args)


__all__ = ["Acknowledge", "Annotate", "COMMANDS", "IncidentCommand", "IncidentEditor", "LinkTicket", "Resolve",
           "UnknownCommand", "command_from"]
