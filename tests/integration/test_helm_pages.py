"""The chart's example values (deploy/helm/alertd/values-example.yaml: Slack and PagerDuty on) page on an
Xid 79: its ConfigMap's alertd.yml, with a Slack token and a PagerDuty routing key in the Secret's files,
run by alertd against the Slack and PagerDuty test servers.

Only what a cluster provides is swapped for the test's: the Secret's mount point (/etc/alertd/secrets),
the rules ConfigMap's (/etc/alertd/rules.d), the listener and data directory (``--listen``,
``--data-dir``), the Slack and PagerDuty addresses, Kubernetes enrichment and the Alertmanagers (no cluster here)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testkit.alertd_proc import AlertdProcess
from testkit.helm_chart import CHART, documents, render, serve_example
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.pipeline import top_level_messages, wait
from testkit.process import ServiceUnavailable
from testkit.slack_server import SlackTestServer, channel_id_for

ROOT = Path(__file__).resolve().parents[2]
SLACK_TOKEN = "xoxb-chart-defaults"
WEBHOOK_TOKEN, ADMIN_TOKEN = "w" * 32, "a" * 32


def incidents_as_admin(alertd: AlertdProcess) -> list[dict]:
    status, data = alertd.get_json("/api/v1/incidents", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200, data
    return data["incidents"]


def chart_config(tmp: Path) -> dict:
    try:
        docs = documents(render(yaml.safe_load((CHART / "values-example.yaml").read_text()), values_dir=tmp))
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "alertd")
    rules = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "alertd-rules")
    rules_dir, secrets = tmp / "rules.d", tmp / "secrets"
    rules_dir.mkdir()
    secrets.mkdir()
    for name, text in (rules.get("data") or {}).items():
        (rules_dir / name).write_text(text)
    text = config["data"]["alertd.yml"].replace("/etc/alertd/secrets/", f"{secrets}/")
    text = text.replace("/etc/alertd/rules.d", str(rules_dir))
    doc = yaml.safe_load(text)
    files = {"webhook-token": WEBHOOK_TOKEN, "api-admin": ADMIN_TOKEN, "api-oncall": "o" * 32, "slack-token": SLACK_TOKEN,
             "link-key": "l" * 44, "pagerduty-gpu-infra": PagerDutyTestServer.ROUTING_KEY}
    for name, value in files.items():
        (secrets / name).write_text(value + "\n")
    return doc


def test_the_charts_example_values_page_on_an_xid_79(tmp_path):
    doc = chart_config(tmp_path)
    assert set(doc["notify"]) == {"slack", "pagerduty"}, "the example notifies"
    slack, pagerduty = SlackTestServer(token=SLACK_TOKEN), PagerDutyTestServer()
    with serving_in_thread(slack, pagerduty):
        alertd = serve_example(doc, slack.url, pagerduty.url, tmp_path / "alertd", WEBHOOK_TOKEN)
        try:
            inc = wait("the incident", lambda: incidents_as_admin(alertd))[0]
            assert inc["xids"] == [79] and inc["title"].startswith("Xid 79"), inc
            page = wait("the page", lambda: pagerduty.open_alert(inc["id"]))
            assert page["routing_key"] == PagerDutyTestServer.ROUTING_KEY
            posts = wait("the Slack post", lambda: top_level_messages(slack))
            assert posts and channel_id_for("#gpu-oncall") in slack.messages
        finally:
            alertd.stop()
