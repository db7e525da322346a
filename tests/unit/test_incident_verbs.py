"""A verb declared in alertd/core/verbs.py alone is read by every door from its name, and carried out by the
use case as declared: the command it builds, audited under its audit name."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from alertd.app.incident_actions import IncidentActions
from alertd.cli.main import build_parser
from alertd.config.settings import parse_config
from alertd.core.actor import Actor
from alertd.core.incident_commands import Annotate, IncidentCommand
from alertd.core.verbs import VERBS, Declared, by_word
from alertd.integrations.slack.clicks import read_click
from alertd.integrations.slack.render import button_id


def snoozed(incident_id: str, actor: str) -> Annotate:
    return Annotate(incident_id, "snoozed", True, "annotated", f"snoozed by {actor}", actor)


@pytest.fixture
def snooze(monkeypatch) -> None:
    monkeypatch.setitem(VERBS, "snooze", Declared("snooze", command=snoozed, audit="snoozed"))
    monkeypatch.setitem(VERBS, "nap", Declared("nap", command=snoozed, duration=True, slack=False))


def test_every_door_reads_a_declared_verb_without_a_table_of_its_own(snooze) -> None:
    assert button_id("snooze") == "alertd_snooze"
    assert read_click({"action_id": "alertd_snooze", "value": "INC-1"}).verb == "snooze"
    assert read_click({"action_id": "alertd_nap_1h", "value": "INC-1"}).verb == ""  # not offered in Slack
    assert by_word("snooze") is VERBS["snooze"] and by_word("nap") is VERBS["nap"]  # the API's segment, a form
    assert build_parser().parse_args(["incidents", "snooze", "INC-1"]).action == "snooze"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["incidents", "reopen", "INC-1"])


def test_without_its_declaration_no_door_knows_it() -> None:
    assert read_click({"action_id": "alertd_snooze", "value": "INC-1"}).verb == ""
    assert by_word("snooze") is None


class Host:
    """The service as IncidentActions sees it: the engine's commands and the audit trail, recorded."""

    def __init__(self, changed: bool) -> None:
        self.cfg = parse_config({}, "test")
        self.ran: list[IncidentCommand] = []
        self.audited: list[tuple[str, ...]] = []
        self.changed = changed
        self.store = SimpleNamespace(get_incident=self.get_incident)

    async def get_incident(self, incident_id: str):
        return SimpleNamespace(status="resolved")

    async def run(self, command: IncidentCommand) -> list[object]:
        self.ran.append(command)
        return [object()] if self.changed else []

    async def audit(self, actor, action, target, via, outcome="ok", detail="") -> None:
        self.audited.append((actor, action, target, via, outcome))


async def test_the_use_case_runs_the_declared_command_and_audits_it(snooze) -> None:
    host = Host(changed=True)
    actions = IncidentActions(host)  # type: ignore[arg-type]
    try:
        assert await actions.perform("snooze", "INC-1", Actor("oncall", "ana"), "api") == ""
        assert host.ran == [snoozed("INC-1", "ana (oncall)")]
        assert host.audited == [("ana (oncall)", "snoozed", "INC-1", "api", "ok")]
        host.changed = False
        assert await actions.perform("snooze", "INC-1", Actor("oncall"), "web") == \
            "incident is resolved: nothing to snooze"
        assert host.audited[-1] == ("oncall", "snoozed", "INC-1", "web", "refused: incident is resolved: nothing to snooze")
    finally:
        await actions.close()
