"""End to end with the real Prometheus and Alertmanager (Debian packages):

simulated GPU cluster -> Prometheus (shipped GPU alert rules, windows shortened)
-> Alertmanager (webhook with bearer auth) -> `alertd serve` (subprocess, shipped
rules and routing) -> the Slack Web API and PagerDuty Events v2 test servers.

Asserts ONE incident per failing node holding all of that node's signals, that
Watchdog heartbeats never become incidents, ONE Slack message per failing node
kept up to date through resolution, and one PagerDuty trigger for the critical
incident, resolved later with the same dedup_key. Every webhook Alertmanager sent was
answered by the webhook lane (alertd/web/webhook_lane.py), none handed to aiohttp.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit.sim.fast_rules import derive_fast_rules
from testkit.sim.gpu_cluster import GPUClusterSim
from testkit.alertd_proc import AlertdProcess
from tests.support.fixtures import require
from testkit.ha_cluster import fresh_database
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.pipeline import (
    TOKEN,
    by_node,
    incidents,
    stop_started,
    top_level_messages,
    wait,
    write_alertmanager_config,
    write_rules,
)
from testkit.process import ReservedPort, RunningService
from testkit.prom import query
from testkit.services import start_alertmanager, start_prometheus
from testkit.slack_server import SlackTestServer

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SLACK_TOKEN = "xoxb-e2e"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_prometheus_alertmanager_alertd(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    storage = {}
    if backend == "postgres":  # a fresh database on the session's PostgreSQL; alertd runs as a replica
        storage = {"backend": "postgres", "postgres_dsn": fresh_database(request.getfixturevalue("postgres").dsn)}
    slack, pagerduty = SlackTestServer(token=SLACK_TOKEN), PagerDutyTestServer()
    with serving_in_thread(slack, pagerduty):
        run_pipeline(tmp_path, slack, pagerduty, storage)


def run_pipeline(tmp_path: Path, slack: SlackTestServer, pagerduty: PagerDutyTestServer, storage: dict) -> None:
    rules_dir = write_rules(tmp_path / "alertd-rules", hold_down="3s")
    sim = GPUClusterSim(nodes=3)
    with sim.running_in_thread():
        # Prometheus first, so its first seconds (targets come every 5 s) go by while alertd and Alertmanager
        # start; it names Alertmanager's port, reserved now. Scrapes, evaluations and Alertmanager's grouping
        # every 0.5 s: each step of the pipeline takes 1-2 s instead of about 3.
        am_port = ReservedPort()
        fast = derive_fast_rules(tmp_path / "gpu-alerts.fast.yml")
        prom_cfg = sim.write_prometheus_config(tmp_path / "prometheus.yml", alertmanager_url=am_port.url,
                                               rule_files=[fast], scrape_interval="500ms", evaluation_interval="500ms")
        prom = require(start_prometheus, prom_cfg, tmp_path / "prom")
        alertd = am = None
        try:
            alertd = start_alertd(tmp_path, slack, pagerduty, storage, rules_dir)
            am_cfg = write_alertmanager_config(tmp_path / "alertmanager.yml", alertd.url, tmp_path / "token",
                                               group_wait="500ms", group_interval="500ms")
            am = require(start_alertmanager, am_cfg, tmp_path / "am", port=am_port)
            check_pipeline(sim, prom, alertd, slack, pagerduty)
        finally:
            stop_started(prom, am, alertd)


def start_alertd(tmp_path: Path, slack: SlackTestServer, pagerduty: PagerDutyTestServer, storage: dict,
                 rules_dir: Path) -> AlertdProcess:
    return AlertdProcess(tmp_path / "alertd", {
        "storage": storage,
        "rules": {"paths": [str(rules_dir)]},
        "receiver": {"auth": {"bearer_token": TOKEN}},
        "notify": {
            "slack": {"token": SLACK_TOKEN, "base_url": slack.url, "debounce": "0s"},
            "pagerduty": {"events_url": pagerduty.url, "routing_keys": {
                "gpu-infra": PagerDutyTestServer.ROUTING_KEY, "gpu-infra-escalation": PagerDutyTestServer.ROUTING_KEY}},
        },
    }).start()


def check_pipeline(sim: GPUClusterSim, prom: RunningService, alertd: AlertdProcess, slack: SlackTestServer,
                   pagerduty: PagerDutyTestServer) -> None:
    n_targets = 2 * len(sim.node_names) + 1
    wait("all targets up", lambda: len(query(prom.url, "up == 1")) == n_targets)
    n_gpus = 8 * len(sim.node_names)
    wait("baseline samples of every GPU",
         lambda: len(query(prom.url, "count_over_time(DCGM_FI_DEV_XID_ERRORS[10s]) >= 2")) == n_gpus)
    wait("the Watchdog heartbeat reaching alertd",
         lambda: alertd.metrics().get("alertd_alerts_received_total", 0) >= 1)

    # Faults: an Xid 79 on node-1's GPU 3, then the operator cordons node-1; node-2's exporter dies.
    sim.inject_xid("node-1", 3, 79)
    sim.exporter_down("node-2", True)
    wait("node-1's Xid incident", lambda: any(r["node"] == "node-1" for r in incidents(alertd, status="open")))
    sim.cordon("node-1", True)

    def both_nodes_complete() -> dict[str, list[dict]] | None:
        nodes = by_node(incidents(alertd, status="open"))
        n1, n2 = nodes.get("node-1", []), nodes.get("node-2", [])
        if len(n1) == 1 and {"xid", "node_cordoned"} <= set(n1[0]["signals"]) and n2:
            return nodes
        return None

    nodes = wait("one incident per failing node with all its signals", both_nodes_complete)
    assert set(nodes) == {"node-1", "node-2"}, nodes  # node-3 is healthy; Watchdog made no incident
    n1, n2 = nodes["node-1"][0], nodes["node-2"][0]
    assert len(nodes["node-2"]) == 1
    assert n1["xids"] == [79] and n1["severity"] == "critical"
    assert n1["title"].startswith("Xid 79: GPU has fallen off the bus on node-1")
    assert n2["signals"] == ["metrics_missing"] and "dcgm-exporter down" in n2["title"]

    status, detail = alertd.get_json(f"/api/v1/incidents/{n1['id']}")
    assert status == 200
    names = {m["alertname"] for m in detail["members"]}
    assert names == {"GPUXidError", "KubeNodeCordoned"}, names
    xid_member = next(m for m in detail["members"] if m["alertname"] == "GPUXidError")
    gpu = sim.gpu("node-1", 3)
    assert xid_member["subject"]["gpu"]["uuid"] == gpu.uuid
    assert xid_member["subject"]["node"] == "node-1"  # not the exporter pod's Hostname
    assert xid_member["generatorURL"].startswith("http")

    # Slack: one message per failing node; PagerDuty: the critical one is paged.
    wait("one Slack message per failing node", lambda: len(top_level_messages(slack)) == 2)
    wait("a PagerDuty trigger for node-1", lambda: pagerduty.status_of(n1["id"]) == "triggered")
    trigger = pagerduty.events_for(n1["id"])[0]
    assert trigger["event_action"] == "trigger" and trigger["payload"]["source"] == "node-1"
    assert trigger["payload"]["severity"] == "critical" and "Xid 79" in trigger["payload"]["summary"]

    # Clear everything: Alertmanager sends resolved, the hold-down passes, incidents resolve.
    sim.clear()
    wait("every incident resolved", lambda: incidents(alertd, status="resolved")
         and not incidents(alertd, status="open") and not incidents(alertd, status="acknowledged"),
         timeout=120)
    resolved = {row["id"]: row for row in incidents(alertd, status="resolved")}
    assert {n1["id"], n2["id"]} <= set(resolved)
    assert all(not row["fleet"] for row in resolved.values())

    wait("PagerDuty resolved with the same dedup_key", lambda: pagerduty.status_of(n1["id"]) == "resolved")
    assert [e["event_action"] for e in pagerduty.events_for(n1["id"])].count("trigger") == 1
    assert pagerduty.status_of(n2["id"]) is None  # a warning is not paged

    def messages_show_resolution() -> list[dict] | None:
        tops = top_level_messages(slack)
        done = [m for m in tops if "resolved" in json.dumps(m).lower()]
        return tops if len(done) == 2 else None

    tops = wait("both Slack messages updated to resolved", messages_show_resolution)
    assert len(tops) == 2 and all(m.get("updates", 0) >= 1 for m in tops), tops  # edited in place
    metrics = alertd.metrics()
    assert metrics.get('alertd_webhooks_rejected_total{reason="unauthorized"}', 0) == 0
    # Alertmanager's own requests are plain: the webhook lane answered every one, and handed none to aiohttp.
    lane = {k: v for k, v in metrics.items() if k.startswith("alertd_webhook_lane_total")}
    assert lane == {'alertd_webhook_lane_total{outcome="answered"}': metrics["alertd_webhooks_received_total"]}, lane
