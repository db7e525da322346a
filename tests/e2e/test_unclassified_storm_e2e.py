"""Seven exporters of a recording-rule site dying at once, through the real Prometheus and Alertmanager to an
``alertd serve`` on its default configuration: one incident, one Slack post, one page.

The site (tests/fixtures/prometheus-rules/site-recording-rules.yml) alerts on ``node:dcgm_up:min == 0``;
its on-call pages on lost GPU telemetry, so here ``GpuTelemetryLost`` carries ``severity: critical``
(the file's only change beside the fast ``for:`` and ranges). With the rules API off, as by default,
alertd cannot read the recorded series: the alert is unclassified (signal ``other``). Alertmanager groups
as the shipped example does (one group per cluster, node and alert name) or by alert name alone, where it
would send the seven as one notification.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_recording_rules_e2e import SITE, all_resolved, pages, posts_per_channel, start_prometheus_on
from testkit.sim.fast_rules import derive_fast_rules
from testkit.sim.gpu_cluster import GPUClusterSim
from testkit.alertd_proc import AlertdProcess
from tests.support.fixtures import require
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.pipeline import incidents, sink_config, stop_started, top_level_messages, wait, write_alertmanager_config
from testkit.process import ReservedPort, free_port
from testkit.prom import query
from testkit.services import start_alertmanager
from testkit.slack_server import SlackTestServer, channel_id_for

pytestmark = pytest.mark.e2e
SLACK_TOKEN = "xoxb-unclassified"
NODES = 9
OUTAGE = [f"node-{i}" for i in range(1, 8)]  # seven exporters
STORM_MIN_NODES = 5  # rules/correlation.yml correlation.storm.min_nodes
ALERT = "GpuTelemetryLost"


def paging_site_rules(dst: Path) -> Path:
    """The site's rules, fast, with its on-call's severity on lost telemetry."""
    derive_fast_rules(dst, SITE)
    doc = yaml.safe_load(dst.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == ALERT:
                rule["labels"]["severity"] = "critical"
    dst.write_text(yaml.safe_dump(doc, sort_keys=False, width=1000))
    return dst


@pytest.mark.parametrize("group_by", [("cluster", "node", "alertname"), ("cluster", "alertname")],
                         ids=["by-node", "by-name"])
def test_seven_unclassified_exporters_dying_at_once_page_once(tmp_path: Path, group_by: tuple[str, ...]) -> None:
    slack, pagerduty = SlackTestServer(token=SLACK_TOKEN), PagerDutyTestServer()
    sim = GPUClusterSim(nodes=NODES, cluster="sim")
    prom_port, am_port = free_port(), ReservedPort()
    with serving_in_thread(slack, pagerduty, sim):
        prom_cfg = sim.write_prometheus_config(tmp_path / "prometheus.yml", alertmanager_url=am_port.url,
                                               rule_files=[paging_site_rules(tmp_path / "rules.fast.yml")],
                                               node_label=True, scrape_interval="500ms", evaluation_interval="500ms")
        prom = require(start_prometheus_on, prom_port, prom_cfg, tmp_path / "prom")
        alertd = am = None
        try:
            # the default configuration: no classify section, so no rules API and no site rule files
            alertd = AlertdProcess(tmp_path / "alertd", sink_config(
                tmp_path, slack.url, SLACK_TOKEN, pagerduty.url, PagerDutyTestServer.ROUTING_KEY)).start()
            am = require(start_alertmanager, write_alertmanager_config(
                tmp_path / "alertmanager.yml", alertd.url, tmp_path / "token", group_by=group_by,
                group_wait="500ms", group_interval="500ms"), tmp_path / "am", port=am_port)
            wait("all targets up", lambda: len(query(prom.url, "up == 1")) == 2 * NODES + 1)
            wait("the recorded series of every node", lambda: len(query(prom.url, "node:dcgm_up:min")) == NODES)
            for node in OUTAGE:
                sim.exporter_down(node, True)
            fleet = wait("one fleet incident naming the seven nodes", lambda: next(
                (r for r in incidents(alertd, status="open") if r["fleet"] and sorted(r["nodes"]) == OUTAGE), None))
            time.sleep(3)  # more than routing's group_wait: a node's post or page not held would be out by now
            rows = incidents(alertd)
            top = [(r["node"], r["title"]) for r in rows if not r["parentId"]]
            summary = {"top": top, "pages": pages(pagerduty), "posts": posts_per_channel(slack)}
            assert top == [("", f"{ALERT} on 7 nodes in sim")], summary
            assert sorted(r["node"] for r in rows if r["parentId"] == fleet["id"]) == OUTAGE, summary
            assert summary["pages"] == 1, summary
            assert summary["posts"] == {channel_id_for("#gpu-oncall"): 1}, summary
            [trigger] = [e for e in list(pagerduty.events) if e.get("event_action") == "trigger"]
            # The page goes out when the storm forms: with one Alertmanager group per node, the last nodes' first
            # notifications can come a group_wait or an evaluation later and join the fleet after its page.
            paged = re.search(rf"{ALERT} on (\d+) nodes in sim", trigger["payload"]["summary"])
            assert paged and STORM_MIN_NODES <= int(paged[1]) <= len(OUTAGE), trigger
            sim.clear()
            wait("the fleet resolved with its nodes", lambda: all_resolved(alertd), timeout=60)
            wait("its page resolved", lambda: [e["event_action"] for e in list(pagerduty.events)] == [
                "trigger", "resolve"], timeout=30)
            assert len(top_level_messages(slack)) == 1
        finally:
            stop_started(prom, am, alertd)
