"""Refusals of a routing receiver say what the author got wrong: a key reference names the config section its key
belongs in, and a value no alternative of a oneOf takes is told by the alternative of its type (a misspelt key
inside a Slack receiver's object), or by the types it may have and what the value is for."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from alertd.core.errors import InvalidDocument
from alertd.rules.ruleset import load_rules


def refusals(tmp_path: Path, receiver: object, escalate: object = None) -> list[str]:
    route: dict[str, object] = {"match": ['severity="critical"'], "receiver": "ok"}
    if escalate is not None:
        route["escalate"] = escalate
    doc = {"routing": {"receivers": [{"name": "ok", "slack": "#ok"}, receiver], "routes": [route]}}
    (tmp_path / "routing.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InvalidDocument) as raised:
        load_rules([tmp_path])
    return [p.message for p in raised.value.problems]


@pytest.mark.parametrize("kind,key,section", [
    ("pagerduty", "routing_key", "notify.pagerduty.routing_keys"),
    ("webhook", "endpoint", "notify.webhook.endpoints"),
    ("opsgenie", "api_key", "notify.opsgenie.api_keys"),
])
def test_a_secret_in_place_of_a_key_name_is_told_where_the_key_belongs(tmp_path, kind, key, section):
    (message,) = refusals(tmp_path, {"name": "r", kind: {key: "u+abc123"}})
    assert message == (f"routing.receivers[1].{kind}.{key}: 'u+abc123' is not a key's name. Name a key of {section} "
                       'in the service config, like "${gpu-infra}"; never put the key itself in a rule file.')


def test_an_escalation_key_is_told_likewise(tmp_path):
    (message,) = refusals(tmp_path, {"name": "r", "slack": "#r"}, {"after": "5m", "routing_key": "abc"})
    assert message.startswith("routing.routes[0].escalate.routing_key: 'abc' is not a key's name. Name a key of "
                              "notify.pagerduty.routing_keys")


@pytest.mark.parametrize("slack,message", [
    ({"chanel": "#x"}, "routing.receivers[1].slack: unknown key(s) 'chanel' (did you mean 'channel'?)"),
    ({"channels": "#a"}, "routing.receivers[1].slack.channels: '#a' is not of type 'array'"),
    ({"channels": [1]}, "routing.receivers[1].slack.channels[0]: 1 is not of type 'string'"),
    ({}, "routing.receivers[1].slack: empty: give 'channel' or 'channels'"),
    (5, "routing.receivers[1].slack: 5 is not of type 'string' or 'object': One channel (\"#gpu-oncall\" or a "
        "channel ID), or {channels: [...]}."),
    ("", "routing.receivers[1].slack: '' is not valid: One channel (\"#gpu-oncall\" or a channel ID), or "
         "{channels: [...]}."),
])
def test_a_slack_receiver_is_refused_for_what_is_wrong_in_it(tmp_path, slack, message):
    assert refusals(tmp_path, {"name": "r", "slack": slack}) == [message]


def test_a_schema_node_words_its_own_refusal_by_the_keyword_that_refused():
    from jsonschema import Draft202012Validator

    from alertd.schemas.messages import describe

    node = {"type": "string", "pattern": "^x$", "errorMessage": {"pattern": "is not x: write x"}}
    check = Draft202012Validator({"properties": {"v": node}})
    assert [describe(e) for e in check.iter_errors({"v": "y"})] == ["v: 'y' is not x: write x"]
    assert [describe(e) for e in check.iter_errors({"v": 5})] == ["v: 5 is not of type 'string'"]  # not its keyword
