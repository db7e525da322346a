"""A history verdict in what people see: the first page carries it; one that arrives later updates the one
living Slack message (and its thread) and pages nothing again; Slack, PagerDuty and the UI's guide say it."""
from __future__ import annotations

from alertd.core.model import Change
from alertd.core.verdict import HistoryVerdict
from alertd.engine.judge import apply_verdict
from alertd.integrations.pagerduty import PagerDutyNotifier, PagerDutySettings
from alertd.integrations.slack.render import render_incident, to_text
from alertd.notify.router import Router
from alertd.web.guide import incident_guide
from testkit.builders import at, engine, xid
from tests.unit.test_routing import load

LINE = "3rd Xid 79 on GPU GPU-…-9173 in 7 days (last: INC-412, INC-388); action: replace GPU (was: reboot node)"
VERDICT = HistoryVerdict("xid79-third-in-7d", "repeat_offender", LINE, "replace_gpu", "reboot_node", "",
                         ("INC-412", "INC-388"), "GPU-8f6e2c1a-4b7d-4e0f-9a3c-2d1e5f7a9173")


def intents(items, kind):
    """What reaches a target of ``kind`` now (escalations are scheduled for later: left out)."""
    return sorted(str(i.intent) for i in items
                  if i.target.kind == kind and not i.payload.only_if_posted and str(i.intent) != "escalate")


def test_a_verdict_on_the_opening_change_rides_on_the_first_page(tmp_path):
    router = Router(load(tmp_path))
    change = engine().ingest([xid(79, node="n1")], at(0))[0]
    assert apply_verdict(change.incident, VERDICT, at(0))
    change.kinds.append("verdict")
    change.events.append(change.incident.timeline[-1])
    items = router.route([change], at(0))
    assert intents(items, "pagerduty") == ["page"]
    assert "show" in intents(items, "slack") and "timeline" not in intents(items, "slack")


def test_a_verdict_after_the_first_page_updates_the_message_and_does_not_page_again(tmp_path):
    router = Router(load(tmp_path))
    eng = engine()
    opened = eng.ingest([xid(79, node="n1")], at(0))[0]
    assert intents(router.route([opened], at(0)), "pagerduty") == ["page"]
    inc = opened.incident
    assert apply_verdict(inc, VERDICT, at(120))
    later = Change(incident=inc, kinds=["verdict"], events=[inc.timeline[-1]])
    items = router.route([later], at(120))
    assert intents(items, "pagerduty") == []  # no second page
    slack = [i for i in items if i.target.kind == "slack"]
    assert {str(i.intent) for i in slack} == {"show", "timeline"}  # the message updated, the why in its thread
    thread = next(i for i in slack if str(i.intent) == "timeline")
    assert [e["text"] for e in thread.payload.events] == [LINE]


def test_slack_pagerduty_and_the_ui_say_the_verdict_and_its_action():
    inc = engine().ingest([xid(79, node="n1")], at(0))[0].incident
    before = to_text(render_incident(inc)[1])
    assert "Drain and reboot the node" in before and "History" not in before
    inc.verdict = VERDICT
    text = to_text(render_incident(inc)[1])
    assert LINE.split(";")[0] in text and "return it to the vendor (RMA)" in text
    assert text.index("History") < text.index("What happened")
    pd = PagerDutyNotifier(PagerDutySettings(), None, lambda: at(0))
    body = pd.event("x", "trigger", inc, "critical")
    assert body["payload"]["summary"].endswith(LINE)
    assert body["payload"]["custom_details"]["history"]["rule"] == "xid79-third-in-7d"
    assert body["payload"]["custom_details"]["action"] == "Drain the GPU and return it to the vendor (RMA)."
    assert incident_guide(inc, "").action == "Drain the GPU and return it to the vendor (RMA)."
