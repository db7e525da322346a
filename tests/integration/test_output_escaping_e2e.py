"""A hostile webhook through the whole service: the captured Slack post holds no mention or link of the
alert's making, PagerDuty gets http(s) links only, and the incident page shows it all as text.

The alert is what a careless or hostile Prometheus rule sends: ``<!channel>`` and a fake "Acknowledge here"
link in the summary, a ``javascript:`` generatorURL and runbook_url, and a GPU known only by its index.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from alertd.core.incident_commands import LinkTicket
from alertd.core.tickets import TicketLink
from testkit.notify_harness import hook, top_messages, wait_for
from testkit.sinks import HOSTILE_TEXT, SCRIPT_URL, mrkdwn_problems, mrkdwn_texts, web_only

HOSTS = {"runbooks.example"}  # the harness's runbook_base_url; no alertmanager_url or alertd_url is set


def hostile_alert() -> dict:
    starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=1)
    return {
        "status": "firing",
        "labels": {"alertname": "GPUOddThing", "severity": "critical", "cluster": "prod", "node": "n1",
                   "gpu": "3", "team": "<!subteam^S0ONCALL>"},  # no UUID, no PCI id: a GPU known by index
        "annotations": {"summary": HOSTILE_TEXT, "description": HOSTILE_TEXT, "runbook_url": SCRIPT_URL},
        "startsAt": starts.isoformat().replace("+00:00", "Z"),
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": SCRIPT_URL,
        "fingerprint": "0badc0ffee000001",
    }


async def test_slack_post_pagerduty_event_and_incident_page_carry_alert_text_as_text(paging, slack, pd):
    h = paging
    await h.post(hook(hostile_alert()))
    await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
    await wait_for(lambda: pd.events)
    for message in slack.all_messages():
        for text in [message.get("text", ""), *mrkdwn_texts(message.get("blocks") or [])]:
            assert mrkdwn_problems(text, HOSTS) == [], text
    assert any("&lt;!channel&gt;" in m.get("text", "") for m in slack.all_messages())  # shown, as text
    for event in pd.events:
        assert web_only(link["href"] for link in event.get("links", [])) == [], event["links"]
        assert web_only((event.get("payload", {}).get("custom_details", {}).get("links") or {}).values()) == []
    inc = await h.one_incident()
    resp = await h.client.get(f"/ui/incidents/{inc['id']}")
    page = await resp.text()
    assert resp.status == 200, page[-2000:]
    assert 'href="javascript:' not in page and "href='javascript:" not in page
    assert "<!channel>" not in page and "&lt;!channel&gt;" in page
    assert "GPU 3" in page


async def test_incident_page_of_a_gpu_known_only_by_its_index(harness, slack):
    """dcgm-exporter without UUID and pci_bus_id labels (a relabelled scrape): the page shows GPU 3, not a 500."""
    alert = hostile_alert()
    alert["labels"].pop("team")
    alert["annotations"] = {"summary": "GPU 3 is odd"}
    alert["generatorURL"] = "http://prometheus.example:9090/graph?g0.expr=up"
    await harness.post(hook(alert))
    inc = await harness.one_incident()
    assert [g.get("uuid") for g in inc["gpus"]] == [None]
    resp = await harness.client.get(f"/ui/incidents/{inc['id']}")
    page = await resp.text()
    assert resp.status == 200 and "GPU 3" in page, page[-2000:]
    assert 'href="http://prometheus.example:9090/graph?g0.expr=up"' in page


async def test_a_ticket_link_the_rma_webhook_answers_is_a_link_only_when_it_is_http(harness, slack):
    """The RMA ticket webhook's answer names the ticket's URL (alertd/integrations/rma_webhook.py); a receiver
    that answers ``javascript:`` gets its key shown as text, never a link."""
    alert = hostile_alert()
    alert["generatorURL"] = "http://prometheus.example:9090/graph?g0.expr=up"
    await harness.post(hook(alert))
    inc = await harness.one_incident()
    await harness.svc.run(LinkTicket(inc["id"], TicketLink("webhook", "webhook", "RMA-7", SCRIPT_URL, "", "now")))
    await harness.svc.run(LinkTicket(inc["id"], TicketLink("jira", "jira", "HW-9", "https://jira.example/browse/HW-9",
                                                       "", "now")))
    resp = await harness.client.get(f"/ui/incidents/{inc['id']}")
    page = await resp.text()
    assert resp.status == 200, page[-2000:]
    assert "RMA-7" in page and 'href="javascript:' not in page and "href='javascript:" not in page
    assert 'href="https://jira.example/browse/HW-9"' in page
