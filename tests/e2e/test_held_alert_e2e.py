"""An alert the real Alertmanager holds but never sends reaches alertd and pages, through reconciliation.

The real Prometheus evaluates the shipped GPU rules with windows shortened and no keep_firing_for (a site's
rule that races its group_interval); the real Alertmanager groups by [alertname, cluster] with
group_wait 1s and group_interval 40s. An Xid on node-1 fires, is sent, resolves, and its resolve is sent:
the group's last notification holds nothing firing. An Xid 79 on node-2 then fires right after that flush
and resolves within 15 s, long before the next flush, with nothing else of the group firing: Alertmanager's
DedupStage sends nothing (its webhook notification count does not move). alertd's reconciliation
(every 2 s) takes it from ``GET /api/v2/alerts``: one incident, its member marked as taken from the API,
a PagerDuty page; when Alertmanager no longer holds it, reconciliation resolves it.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from testkit.sim.fast_rules import derive_fast_rules
from testkit.sim.gpu_cluster import GPUClusterSim
from testkit.alertd_proc import AlertdProcess
from tests.support.fixtures import require
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.pipeline import TOKEN, incidents, sink_config, stop_started, wait
from testkit.process import ReservedPort, RunningService, http_get
from testkit.prom import query
from testkit.services import start_alertmanager, start_prometheus
from testkit.slack_server import SlackTestServer

pytestmark = pytest.mark.e2e
SLACK_TOKEN = "xoxb-e2e"
GROUP_INTERVAL = 40.0
_SENT = re.compile(r'^alertmanager_notifications_total\{integration="webhook"\} (\S+)$', re.M)


def write_am_config(path: Path, alertd_url: str, token_file: Path) -> Path:
    """The grouping of deploy/alertmanager/alertmanager.yml's by-alertname variant, with short timers; the
    Watchdog goes to a receiver of its own (as at real sites), so every notification counted is alertd's."""
    token_file.write_text(TOKEN)
    path.write_text(yaml.safe_dump({
        "route": {"receiver": "alertd", "group_by": ["alertname", "cluster"], "group_wait": "1s",
                  "group_interval": f"{GROUP_INTERVAL:g}s", "repeat_interval": "1h",
                  "routes": [{"matchers": ['alertname="Watchdog"'], "receiver": "heartbeat"}]},
        "receivers": [{"name": "alertd", "webhook_configs": [{
            "url": f"{alertd_url}/api/v1/alerts/alertmanager", "send_resolved": True, "max_alerts": 0,
            "http_config": {"authorization": {"type": "Bearer", "credentials_file": str(token_file)}}}]},
            {"name": "heartbeat"}],
    }))
    return path


def notifications_sent(am: RunningService) -> float:
    """Alertmanager's own count of webhook notifications it sent (its /metrics)."""
    status, body = http_get(am.url + "/metrics")
    found = _SENT.search(body.decode()) if status == 200 else None
    return float(found.group(1)) if found else 0.0


def test_an_xid_fired_and_resolved_between_two_flushes_pages(tmp_path: Path) -> None:
    slack, pagerduty = SlackTestServer(token=SLACK_TOKEN), PagerDutyTestServer()
    sim = GPUClusterSim(nodes=2)
    with serving_in_thread(slack, pagerduty), sim.running_in_thread():
        am_port = ReservedPort()
        fast = derive_fast_rules(tmp_path / "gpu-alerts.fast.yml")  # windows 15s, keep_firing_for dropped
        prom_cfg = sim.write_prometheus_config(tmp_path / "prometheus.yml", alertmanager_url=am_port.url,
                                               rule_files=[fast], scrape_interval="500ms", evaluation_interval="500ms")
        prom = require(start_prometheus, prom_cfg, tmp_path / "prom")
        alertd = am = None
        try:
            alertd = AlertdProcess(tmp_path / "alertd", sink_config(
                tmp_path, slack.url, SLACK_TOKEN, pagerduty.url, PagerDutyTestServer.ROUTING_KEY,
                alertmanager={"urls": [am_port.url], "reconcile_interval": "2s", "reconcile_min_uptime": "1s",
                              "reconcile_held_after": "3s"})).start()
            am = require(start_alertmanager, write_am_config(tmp_path / "am.yml", alertd.url, tmp_path / "token"),
                         tmp_path / "am", port=am_port)
            check_held_alert_pages(sim, prom, am, alertd, pagerduty)
        finally:
            stop_started(prom, am, alertd)


def check_held_alert_pages(sim: GPUClusterSim, prom: RunningService, am: RunningService, alertd: AlertdProcess,
                           pagerduty: PagerDutyTestServer) -> None:
    wait("baseline samples of every GPU",
         lambda: len(query(prom.url, "count_over_time(DCGM_FI_DEV_XID_ERRORS[10s]) >= 2")) == 16)
    # node-1: sent firing (1 notification), then resolved at a later flush (2): nothing firing in the group.
    sim.inject_xid("node-1", 0, 63)
    wait("node-1's Xid sent firing", lambda: notifications_sent(am) >= 1, 30)
    wait("node-1's resolve sent", lambda: notifications_sent(am) >= 2, 30 + 2 * GROUP_INTERVAL, every=0.05)
    flushed = time.monotonic()
    sim.inject_xid("node-2", 3, 79)
    sent = notifications_sent(am)

    row = wait("node-2's incident, taken from Alertmanager's API",
               lambda: next((r for r in incidents(alertd) if r["node"] == "node-2"), None), GROUP_INTERVAL - 5)
    assert time.monotonic() - flushed < GROUP_INTERVAL  # before the group's next flush
    assert row["xids"] == [79] and row["severity"] == "critical"
    status, detail = alertd.get_json(f"/api/v1/incidents/{row['id']}")
    assert status == 200
    [member] = detail["members"]
    assert member["alertname"] == "GPUXidError" and member["viaApi"] is True
    assert any("taken from Alertmanager's API" in e.get("text", "") for e in detail["timeline"]), detail["timeline"]
    wait("a PagerDuty trigger for node-2", lambda: pagerduty.status_of(row["id"]) == "triggered")

    # Past the next flush: Alertmanager sent nothing about node-2 (the DedupStage), and once it no longer
    # holds the alert, reconciliation resolved it.
    wait("the group's next flush gone by", lambda: time.monotonic() - flushed > GROUP_INTERVAL + 3,
         GROUP_INTERVAL + 10)
    assert notifications_sent(am) == sent
    wait("node-2's alert resolved by reconciliation", lambda: any(
        "Alertmanager no longer holds its alerts" in e.get("text", "")
        for e in alertd.get_json(f"/api/v1/incidents/{row['id']}")[1]["timeline"]), 30)
    assert [e["event_action"] for e in pagerduty.events_for(row["id"])].count("trigger") == 1
