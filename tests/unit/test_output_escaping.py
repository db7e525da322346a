"""A hostile alert reaches every sink as text: no Slack mention or link of its own, only http(s) links
anywhere (Slack, PagerDuty, Opsgenie, the signed webhook)."""
from __future__ import annotations

import pytest

from alertd.integrations.slack import render as R
from alertd.integrations.base import Links
from alertd.integrations.opsgenie import OpsgenieSettings, create_body
from alertd.integrations.pagerduty import PagerDutyNotifier, PagerDutySettings
from alertd.integrations.presentation import runbook_url, web_url
from alertd.integrations.outgoing_webhook import webhook_incident
from testkit.sinks import (HOSTILE_TEXT, SCRIPT_URL, TRICKY_WEB_URL, mrkdwn_problems, mrkdwn_texts,
                                 web_only)
from testkit.builders import alert, at, engine

HOSTS = {"rb.example", "am.example", "alertd.example", "prom.example"}
CTX = R.RenderContext(runbook_base_url="https://rb.example/", alertmanager_url="http://am.example:9093",
                      alertd_url="https://alertd.example", now=at(60))


def hostile_incident(generator_url: str = SCRIPT_URL, runbook: str = SCRIPT_URL):
    eng = engine()
    a = alert("GPUPowerOdd<!channel>", node="gpu-node-1<!here>", gpu="1", severity="critical",
              namespace="ml<@U0ADMIN01>", pod="trainer-0", annotations={"summary": HOSTILE_TEXT, "runbook_url": runbook})
    a.generator_url = generator_url
    b = alert("GPUPowerOdd2", node="gpu-node-1<!here>", gpu="2", severity="critical",
              annotations={"summary": HOSTILE_TEXT})
    b.generator_url = TRICKY_WEB_URL
    return eng.ingest([a, b], at(0))[0].incident


@pytest.mark.parametrize("generator_url,runbook", [
    (SCRIPT_URL, SCRIPT_URL), (TRICKY_WEB_URL, TRICKY_WEB_URL), ("data:text/html,<script>", "<!channel>"),
    ("https://prom.example/a b", "runbooks/<!here>|x"),
])
def test_slack_message_has_no_mention_or_foreign_link(generator_url, runbook):
    inc = hostile_incident(generator_url, runbook)
    text, blocks = R.render_incident(inc, CTX)
    for piece in [text, *mrkdwn_texts(blocks)]:
        assert mrkdwn_problems(piece, HOSTS) == [], piece
    assert all(t.get("verbatim") for t in _mrkdwn_objects(blocks))  # no auto-parsed names or bare URLs
    reply, thread = R.render_thread([{"kind": "alert_joined", "text": HOSTILE_TEXT, "at": "2026-11-30T12:00:00Z"}])
    for piece in [reply, *mrkdwn_texts(thread)]:
        assert mrkdwn_problems(piece, HOSTS) == [], piece
    assert "&lt;!channel&gt;" in text  # shown, as text


def _mrkdwn_objects(blocks):
    out = []
    for b in blocks:
        for key in ("text",):
            if isinstance(b.get(key), dict) and b[key]["type"] == "mrkdwn":
                out.append(b[key])
        out += [f for f in b.get("fields", []) + b.get("elements", []) if f.get("type") == "mrkdwn"]
    return out


def test_a_web_url_with_controls_stays_one_link():
    inc = hostile_incident(TRICKY_WEB_URL)
    body = "\n".join(mrkdwn_texts(R.render_incident(inc, CTX)[1]))
    assert "<https://prom.example/graph?g0.expr=up&amp;x=%3C!channel%3E%7CAcknowledge%20here%3E|Prometheus>" in body


def test_pagerduty_opsgenie_and_webhook_links_are_http_only():
    inc = hostile_incident()
    shared = {"runbook_base_url": "", "alertmanager_url": "javascript:alert(1)", "alertd_url": "javascript:x"}
    event = PagerDutyNotifier(PagerDutySettings(**shared), None, lambda: at(60)).event("k", "trigger", inc, "critical")
    hrefs = [link["href"] for link in event["links"]]
    assert web_only(hrefs) == [] and web_only(event["payload"]["custom_details"]["links"].values()) == []
    assert "client_url" not in event
    web = PagerDutyNotifier(PagerDutySettings(**shared), None, lambda: at(60)).event(
        "k", "trigger", hostile_incident(TRICKY_WEB_URL), "critical")
    assert [link["href"] for link in web["links"]] == [TRICKY_WEB_URL]  # an http(s) URL stays a link
    details = create_body(inc, OpsgenieSettings(**shared))["details"]
    assert "runbook" not in details and "alertd" not in details
    assert webhook_incident(inc, Links(**shared))["links"] == {}


@pytest.mark.parametrize("url,ok", [
    ("https://prom.example/graph?x=1", True), ("HTTP://prom.example", True), ("javascript:alert(1)", False),
    ("JaVaScRiPt:alert(1)", False), ("data:text/html,x", False), ("//evil.example/x", False), ("http:///x", False),
    ("https://prom.example/a b", True), ("https://prom.example/\nx", False), ("http://[::1", False), ("", False),
])
def test_web_url(url, ok):
    assert bool(web_url(url)) is ok


def test_runbook_pages_are_web_urls_or_nothing():
    assert runbook_url("xid-hardware", "https://rb.example/") == "https://rb.example/xid-hardware.md"
    assert runbook_url("javascript:alert(1)", "https://rb.example/") == ""
    assert runbook_url("<!channel>|x", "https://rb.example/") == "https://rb.example/%3C%21channel%3E%7Cx.md"
    assert runbook_url("https://wiki.example/gpu#xid", "") == "https://wiki.example/gpu#xid"
