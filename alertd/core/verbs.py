"""What a person can do to an incident, by any door (Slack, the web UI, the API, the CLI through the API).

Each verb is declared once, in ``VERBS``: its name, the audit trail's name for it, the word the API, the UI
and the CLI use where it is not the name, whether Slack offers it, and what it runs: the incident command it
builds (an engine step on the leader, forwarded through the store by a follower: alertd/ha/commands.py) or
the service's handler it calls (``VerbHandlers``). alertd/app/incident_actions.py carries every verb out
through this table; each adapter only reads its own input into a name here, deriving its wire values from
the declaration: Slack's button ``alertd_<word>`` (alertd/integrations/slack/clicks.py), the API's segment
and the UI's form action ``<word>`` (alertd/web/incidents.py), the CLI's ``alertd incidents <word>``
(alertd/cli/api_client.py). A remediation verb's word goes under its own prefix at every door.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Awaitable, Callable, Protocol

from alertd.core.actor import Actor
from alertd.core.incident_commands import Acknowledge, IncidentCommand, Resolve


class Verb(StrEnum):
    """The names the code refers to; what each does is its declaration in VERBS."""

    ACKNOWLEDGE = "acknowledge"
    RESOLVE = "resolve"
    SILENCE = "silence"  # an Alertmanager silence scoped to the incident's alerts, nodes and cluster
    UNSILENCE = "unsilence"
    APPROVE = "approve"  # the remediation verbs: decided by alertd/app/remediate.py
    OVERRIDE = "override"
    CANCEL = "cancel"
    STOP = "stop"
    RMA_HANDOFF = "rma_handoff"  # tickets per GPU with their evidence, once approved


@dataclass(frozen=True, slots=True)
class VerbCall:
    """One verb asked of one incident, with everything any door can say about it."""

    verb: str
    incident_id: str
    who: Actor
    via: str  # the door: slack, web, api
    duration: str = ""  # a verb that takes a duration: how long (Slack's 1h/4h/24h, the API's any)
    kind: str = ""  # a remediation verb: which remediation (quarantine, uncordon, rma), "" for the current one
    force: bool = False  # silence: even when it would mute another open incident


class VerbHandlers(Protocol):
    """What the service carries out itself, beyond an engine command (alertd/app/incident_actions.py)."""

    async def silence(self, call: VerbCall) -> str: ...

    async def unsilence(self, call: VerbCall) -> str: ...

    async def remediate(self, call: VerbCall) -> str: ...

    async def rma_handoff(self, call: VerbCall) -> str: ...


CommandFor = Callable[[str, str], IncidentCommand]  # (incident id, actor shown) -> the engine command
Handler = Callable[[VerbHandlers, VerbCall], Awaitable[str]]  # "" when done, else why not


@dataclass(frozen=True, slots=True)
class Declared:
    """One verb: exactly one of ``command`` and ``handler`` says what it runs."""

    name: str
    command: CommandFor | None = None
    handler: Handler | None = None
    audit: str = ""  # the audit trail's action where it is not the name; "{duration}" is replaced
    audits_itself: bool = False  # the handler audits with its own record (remediation)
    word: str = ""  # the API's segment, the UI's form action and the CLI's word where it is not the name
    slack: bool = True  # Slack may ask for it (a button alertd_<word>)
    duration: bool = False  # it takes a duration (Slack: alertd_<word>_<duration>; the API: ?duration=)
    remediation: bool = False  # at every door under the remediation prefix, with the remediation's kind

    def __post_init__(self) -> None:
        if (self.command is None) == (self.handler is None):
            raise ValueError(f"verb {self.name!r} must declare exactly one of command and handler")

    @property
    def wire(self) -> str:
        """The word the doors put on the wire."""
        return self.word or self.name

    def audit_name(self, duration: str) -> str:
        return (self.audit or self.name).replace("{duration}", duration)


def _remediation(name: str) -> Declared:
    return Declared(name, handler=lambda h, call: h.remediate(call), audits_itself=True, remediation=True)


VERBS: dict[str, Declared] = {d.name: d for d in (
    Declared(Verb.ACKNOWLEDGE, command=Acknowledge, audit="ack", word="ack"),
    Declared(Verb.RESOLVE, command=Resolve),
    Declared(Verb.SILENCE, handler=lambda h, call: h.silence(call), audit="silence {duration}", duration=True),
    Declared(Verb.UNSILENCE, handler=lambda h, call: h.unsilence(call)),
    *(_remediation(v) for v in (Verb.APPROVE, Verb.OVERRIDE, Verb.CANCEL, Verb.STOP)),
    # a proposal with this principal's approval, audited with its record; not from Slack
    Declared(Verb.RMA_HANDOFF, handler=lambda h, call: h.rma_handoff(call), audits_itself=True, word="rma", slack=False),
)}


def declared(name: str) -> Declared | None:
    """The verb of that name, or None."""
    return VERBS.get(name)


def by_word(word: str, *, remediation: bool = False) -> Declared | None:
    """The verb a door's word names (a URL segment, a form action, a CLI word, a Slack button's suffix)."""
    return next((d for d in VERBS.values() if d.wire == word and d.remediation == remediation), None)


def words(*, remediation: bool = False) -> list[str]:
    """The words a door accepts, in declaration order."""
    return [d.wire for d in VERBS.values() if d.remediation == remediation]


def remediation_verbs() -> list[str]:
    return [d.name for d in VERBS.values() if d.remediation]


__all__ = ["VERBS", "CommandFor", "Declared", "Handler", "Verb", "VerbCall", "VerbHandlers", "by_word", "declared",
           "remediation_verbs", "words"]
