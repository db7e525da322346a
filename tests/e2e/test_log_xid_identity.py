"""Xids that arrive as log alerts, through the real Alertmanager.

A Loki ruler posts its alerts to Alertmanager's API v2 like Prometheus does: labels from the LogQL result
(alertname=GPUXidLog, host, cluster), the kernel's NVRM line in the description, a generatorURL holding
LogQL (which no PromQL parser reads). Alertmanager groups them by alertname and cluster, so node A's
Xid 79 and node B's application Xid 13 arrive in one webhook, and again at every repeat interval (4 s here).
alertd must find each node in ``host`` and each GPU in the line's PCI address: two incidents, titled
with their node and GPU, and at most one page per problem.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote_plus

import pytest
import yaml

from testkit.alertd_proc import AlertdProcess
from tests.support.fixtures import require
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.pipeline import TOKEN, incidents, wait, write_rules
from testkit.process import http
from testkit.services import RunningService, start_alertmanager

pytestmark = pytest.mark.e2e
LOGQL = 'sum by (host, cluster) (count_over_time({job="syslog"} |= "NVRM: Xid" [5m])) > 0'
LINES = {
    "gpu-node-a": "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "gpu-node-b": "NVRM: Xid (PCI:0000:86:00): 13, pid=20313, name=python3, Graphics Exception: ESR 0x405840=0x0",
}


def loki_alerts(starts: datetime) -> list[dict]:
    """What Loki's ruler sends for the rule above: one alert per (host, cluster) of the result."""
    ends = datetime.now(timezone.utc) + timedelta(minutes=4)  # Prometheus-style: 4 resend intervals ahead
    return [{"labels": {"alertname": "GPUXidLog", "host": host, "cluster": "prod-a", "severity": "warning"},
             "annotations": {"summary": f"NVIDIA Xid in the kernel log of {host}", "description": line},
             "startsAt": starts.isoformat(), "endsAt": ends.isoformat(),
             "generatorURL": f"http://loki:3100/graph?g0.expr={quote_plus(LOGQL)}&g0.tab=1"}
            for host, line in LINES.items()]


def post(am: RunningService, alerts: list[dict]) -> None:
    status, _, text = http("POST", am.url + "/api/v2/alerts", json.dumps(alerts).encode(),
                           {"Content-Type": "application/json"})
    assert status == 200, text


def test_log_xids_of_two_nodes_are_two_incidents_and_one_page_at_most(tmp_path: Path) -> None:
    pagerduty = PagerDutyTestServer()
    with serving_in_thread(pagerduty):
        alertd = AlertdProcess(tmp_path / "alertd", {
            "rules": {"paths": [str(write_rules(tmp_path / "rules", hold_down="5s"))]},
            "receiver": {"auth": {"bearer_token": TOKEN}},
            "notify": {"pagerduty": {"events_url": pagerduty.url, "routing_keys": {
                "gpu-infra": PagerDutyTestServer.ROUTING_KEY,
                "gpu-infra-escalation": PagerDutyTestServer.ROUTING_KEY}}},
        }).start()
        (tmp_path / "token").write_text(TOKEN)
        config = tmp_path / "alertmanager.yml"
        config.write_text(yaml.safe_dump({
            "route": {"receiver": "alertd", "group_by": ["alertname", "cluster"], "group_wait": "1s",
                      "group_interval": "2s", "repeat_interval": "4s"},
            "receivers": [{"name": "alertd", "webhook_configs": [{
                "url": f"{alertd.url}/api/v1/alerts/alertmanager", "send_resolved": True, "max_alerts": 0,
                "http_config": {"authorization": {"type": "Bearer", "credentials_file": str(tmp_path / "token")}}}]}],
        }))
        am = require(start_alertmanager, config, tmp_path / "am")
        try:
            starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=30)
            post(am, loki_alerts(starts))
            rows = wait("two incidents, one per node",
                        lambda: (r := incidents(alertd, status="open")) and len(r) >= 2 and r)
            post(am, loki_alerts(starts))  # the ruler's resend: nothing new
            wait("Alertmanager repeating the group", lambda: alertd.metrics().get("alertd_alerts_received_total", 0) >= 4)
            rows = incidents(alertd, status="open")
            by_node = {r["node"]: r for r in rows}
            assert set(by_node) == {"gpu-node-a", "gpu-node-b"}, rows
            a, b = by_node["gpu-node-a"], by_node["gpu-node-b"]
            assert a["title"] == "Xid 79: GPU has fallen off the bus on gpu-node-a GPU 0000:3b:00", a
            assert b["title"].startswith("Xid 13: ") and b["title"].endswith("on gpu-node-b GPU 0000:86:00"), b
            assert a["xids"] == [79] and b["xids"] == [13]
            status, detail = alertd.get_json(f"/api/v1/incidents/{a['id']}")
            assert status == 200
            (member,) = detail["members"]
            assert member["subject"]["node_source"] == "log host (label host)"
            assert member["subject"]["gpu"]["pci_bus_id"] == "0000:3b:00"

            wait("the Xid 79 paged", lambda: pagerduty.status_of(a["id"]) == "triggered")
            for inc in (a, b):
                triggers = [e for e in pagerduty.events_for(inc["id"]) if e["event_action"] == "trigger"]
                assert len(triggers) <= 1, (inc["title"], triggers)
            trigger = pagerduty.events_for(a["id"])[0]
            assert trigger["payload"]["source"] == "gpu-node-a"
        finally:
            am.stop()
            alertd.stop()
