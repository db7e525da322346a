"""Incident commands and verbs are declared once (alertd/core/incident_commands.py, alertd/core/verbs.py): a
forwarded command reads back as the command sent, and every door's parser maps onto the declared verbs."""
from __future__ import annotations

import json

import pytest

from alertd.core.incident_commands import (COMMANDS, Acknowledge, Annotate, LinkTicket, Resolve, UnknownCommand,
                                           command_from)
from alertd.core.tickets import TicketLink
from alertd.core.verbs import VERBS, Declared, Verb, by_word, declared, remediation_verbs, words

SAMPLES = [
    Acknowledge("INC-1", "ana"),
    Resolve("INC-2", "bo"),
    Annotate("INC-3", "silence", {"id": "s1", "endsAt": "2026-12-07T10:00:00Z"}, "silenced", "silenced for 1h", "ana"),
    Annotate("INC-3", "silence", None, "silence_removed"),
    LinkTicket("INC-4", TicketLink("jira", "jira", "HW-9", "https://jira.example/browse/HW-9", "3", "now"), "rma"),
]


@pytest.mark.parametrize("command", SAMPLES, ids=lambda c: c.kind)
def test_a_forwarded_command_reads_back_as_sent(command) -> None:
    row = json.loads(json.dumps(command.args()))  # as the commands table stores it
    assert command_from(command.kind, command.incident_id, row) == command


def test_every_command_kind_has_a_sample() -> None:
    assert {c.kind for c in SAMPLES} == set(COMMANDS)


def test_an_unknown_forwarded_kind_is_named() -> None:
    with pytest.raises(UnknownCommand, match="'reopen'.*acknowledge"):
        command_from("reopen", "INC-1", {})


class Editor:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def acknowledge(self, incident_id, actor, now):
        self.calls.append(("acknowledge", incident_id, actor))
        return []

    def resolve(self, incident_id, actor, now):
        self.calls.append(("resolve", incident_id, actor))
        return []

    def annotate(self, incident_id, key, value, now, kind, text="", actor=""):
        self.calls.append(("annotate", incident_id, key, kind, actor))
        return []

    def link_ticket(self, incident_id, ticket, now, actor=""):
        self.calls.append(("link_ticket", incident_id, ticket.key, actor))
        return []


def test_each_command_calls_its_engine_method() -> None:
    editor = Editor()
    for command in SAMPLES:
        command.apply(editor, None)
    assert [c[0] for c in editor.calls] == [c.kind for c in SAMPLES]


def test_every_verb_named_in_code_is_declared_and_words_are_unique() -> None:
    assert set(Verb) == set(VERBS)
    assert declared("acknowledge") is VERBS[Verb.ACKNOWLEDGE] and declared("ack") is None
    assert by_word("ack") is VERBS[Verb.ACKNOWLEDGE] and by_word("rma") is VERBS[Verb.RMA_HANDOFF]
    assert len(set(words())) == len(words()) and by_word("approve") is None
    assert remediation_verbs() == ["approve", "override", "cancel", "stop"] == words(remediation=True)


def test_a_verb_declares_exactly_one_thing_to_run() -> None:
    with pytest.raises(ValueError, match="'snooze'.*exactly one"):
        Declared("snooze")
    with pytest.raises(ValueError, match="'snooze'.*exactly one"):
        Declared("snooze", command=Acknowledge, handler=lambda h, call: h.silence(call))
