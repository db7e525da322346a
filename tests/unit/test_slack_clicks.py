"""Every button alertd draws in Slack reads back into a verb of the incident use cases, and nothing else does."""
from __future__ import annotations

from alertd.core.verbs import Verb
from alertd.integrations.slack import render as R
from alertd.integrations.slack.clicks import read_click
from tests.unit.test_slack_render import CTX, xid79


def elements(blocks: list[dict]) -> list[dict]:
    return [e for b in blocks if b.get("type") == "actions" for e in b["elements"]]


def test_every_button_drawn_reads_back_into_a_use_case_verb() -> None:
    _, inc = xid79()
    inc.annotations["remediation"] = {"state": "held", "action": "drain-gpu", "nodes": ["gpu-node-7"], "text": "x"}
    drawn = elements(R.render_incident(inc, CTX)[1]) + elements(R.remediation_blocks(inc))
    inc.annotations["silence"] = {"id": "abc", "endsAt": "2099-01-01T00:00:00Z", "createdBy": "ana"}
    inc.annotations["remediation"]["state"] = "proposed"
    drawn += elements(R.render_incident(inc, CTX)[1]) + elements(R.remediation_blocks(inc))
    clicks = {(c.verb, c.duration) for c in map(read_click, drawn)}
    assert clicks == {("acknowledge", ""), ("resolve", ""), ("silence", "1h"), ("silence", "4h"), ("silence", "24h"),
                      ("unsilence", ""), ("approve", ""), ("override", ""), ("cancel", "")}
    assert all(verb in set(Verb) for verb, _ in clicks)
    assert {read_click(e).value for e in drawn} == {inc.id}


def test_a_button_alertd_never_drew_is_no_verb() -> None:
    for action in ({"action_id": "alertd_remediation_delete", "value": "INC-1"}, {"action_id": "other"}, {}):
        assert read_click(action).verb == ""
