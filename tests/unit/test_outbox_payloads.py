"""Outbox payloads: one type per intent, stored as JSON, read back (earlier versions' rows too) or refused by name."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from alertd.core.outbox_items import (UNREADABLE, Escalate, Intent, OutboxItem, Page, PayloadError, Resolve, Show,
                                      Timeline, decode_payload, encode_payload)
from alertd.store import sql

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)

# As the previous version stored them (one mapping whose keys depended on the intent).
OLD_CONSOLE_SHOW = {"kinds": ["opened"], "urgent": False, "incident": {"id": "INC-1", "title": "Xid 79"},
                    "events": [{"at": "2026-03-01T00:00:00Z", "kind": "opened", "text": "opened"}]}
OLD_SLACK_SHOW = {"kinds": ["opened"], "urgent": False, "only_if_posted": False, "note": "critical: Xid 79",
                  "muted": "", "route": "xid-hardware", "receiver": "gpu-oncall", "team": "infra", "adopt": "INC-0"}
OLD_PAGE = {**OLD_SLACK_SHOW, "routing_key": "infra", "severity": "critical"}
OLD_ESCALATE = {"after": 900.0, "routing_key": "infra-escalation", "escalation": True, "severity": "critical",
                "note": "", "kinds": ["escalated"]}
OLD_RESOLVE = {"kinds": ["resolved"], "urgent": True, "only_if_posted": True, "routing_key": "infra-escalation",
               "escalation": True, "severity": "critical", "note": ""}


def test_payloads_stored_by_the_previous_version_still_load():
    show = decode_payload(Intent.SHOW, OLD_CONSOLE_SHOW)
    assert isinstance(show, Show) and show.kinds == ("opened",) and show.route == "" and show.incident == {
        "id": "INC-1", "title": "Xid 79"} and show.events[0]["kind"] == "opened" and not show.only_if_posted
    slack = decode_payload(Intent.SHOW, OLD_SLACK_SHOW)
    assert isinstance(slack, Show) and (slack.route, slack.receiver, slack.team, slack.adopt) == (
        "xid-hardware", "gpu-oncall", "infra", "INC-0")
    page = decode_payload(Intent.PAGE, OLD_PAGE)
    assert isinstance(page, Page) and (page.routing_key, page.severity, page.note) == ("infra", "critical",
                                                                                       "critical: Xid 79")
    esc = decode_payload(Intent.ESCALATE, OLD_ESCALATE)
    assert isinstance(esc, Escalate) and esc.after == 900.0 and esc.escalation and esc.routing_key == "infra-escalation"
    resolve = decode_payload(Intent.RESOLVE, OLD_RESOLVE)
    assert isinstance(resolve, Resolve) and resolve.urgent and resolve.only_if_posted and resolve.escalation


def test_an_old_row_reads_through_the_store_with_its_old_kind_name():
    row = (7, "INC-1", "pagerduty:infra", "sync", json.dumps(OLD_PAGE), "2026-03-01T00:00:00Z", 2, "503")
    item = sql.outbox_item(row)
    assert item.intent is Intent.PAGE and isinstance(item.payload, Page) and item.payload.routing_key == "infra"
    assert (item.id, item.attempts, item.last_error, item.unreadable) == (7, 2, "503", "")


@pytest.mark.parametrize("payload", [
    Show(kinds=("opened",), route="r", receiver="x", team="t", adopt="INC-0", incident={"id": "INC-1"},
         events=({"kind": "opened"},)),
    Timeline(kinds=("acknowledged",), urgent=True, route="", receiver="", team="", events=({"kind": "acknowledged"},)),
    Page(kinds=("opened",), routing_key="infra", severity="critical", note="why", muted="", route="r"),
    Resolve(kinds=("resolved",), routing_key="infra", severity="warning", escalation=True, only_if_posted=True),
    Escalate(kinds=("escalated",), routing_key="infra", severity="critical", after=600.0, escalation=True),
])
def test_every_payload_survives_its_json(payload):
    stored = json.loads(json.dumps(encode_payload(payload)))
    assert decode_payload(payload.intent, stored) == payload


@pytest.mark.parametrize("intent, doc, message", [
    (Intent.PAGE, {"kinds": ["opened"], "severity": "critical"}, "page payload: no 'routing_key'"),
    (Intent.RESOLVE, {"kinds": ["resolved"], "routing_key": "infra"}, "resolve payload: no 'severity'"),
    (Intent.ESCALATE, {**OLD_ESCALATE, "after": None}, "escalate payload: 'after' must be a number of seconds, not null"),
    (Intent.ESCALATE, {k: v for k, v in OLD_ESCALATE.items() if k != "after"}, "escalate payload: no 'after'"),
    (Intent.ESCALATE, {**OLD_ESCALATE, "after": True}, "'after' must be a number of seconds, not true"),
    (Intent.TIMELINE, {"kinds": ["acknowledged"]}, "timeline payload: no 'events'"),
    (Intent.TIMELINE, {"kinds": [], "events": ["acknowledged"]}, "'events' must be a list of objects, not a list"),
    (Intent.SHOW, {"urgent": False}, "show payload: no 'kinds'"),
    (Intent.SHOW, {"kinds": "opened"}, "'kinds' must be a list of strings, not the string 'opened'"),
    (Intent.SHOW, {"kinds": [], "only_if_posted": 1}, "'only_if_posted' must be true or false, not the number 1"),
    (Intent.SHOW, {"kinds": [], "route": 3}, "show payload: 'route' must be a string, not the number 3"),
    (Intent.PAGE, ["infra"], "page payload: a JSON object, not a list"),
])
def test_a_wrongly_shaped_payload_is_refused_naming_the_key(intent, doc, message):
    with pytest.raises(PayloadError) as err:
        decode_payload(intent, doc)
    assert message in str(err.value)


def test_an_item_cannot_carry_another_intents_payload():
    with pytest.raises(PayloadError, match="a page item cannot carry a show payload"):
        OutboxItem("INC-1", "pagerduty:infra", Intent.PAGE, Show(kinds=(), route="", receiver="", team=""), T0)


def test_a_stored_row_that_does_not_decode_is_read_as_unreadable_not_raised():
    row = (8, "INC-1", "pagerduty:infra", "page", json.dumps({"kinds": ["opened"]}), "2026-03-01T00:00:00Z", 0, "")
    item = sql.outbox_item(row)
    assert item.unreadable == "page payload: no 'routing_key'" and item.payload is UNREADABLE
    assert item.payload.only_if_posted  # even a consumer that forgot to look keeps nothing current with it
