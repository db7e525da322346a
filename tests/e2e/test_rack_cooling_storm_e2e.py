"""A rack's cooling fails, through the real Prometheus and Alertmanager, alerts grouped by name.

A site's own thermal rules (a temperature threshold and the usual PromQL bit test on the clock-event
reasons, not the shipped names), a real Alertmanager whose route groups by ``[alertname, cluster]`` (so
each webhook carries every node's alert of one name, and later nodes come in later batches a group
interval apart), twelve nodes of one rack heating up a few seconds apart, and ``alertd serve`` with the
shipped rules. One event: one fleet incident naming the twelve nodes with a true title, one Slack post for
it in each channel (a node posted before the fleet formed is edited to point at it), no second incident
beside it; 96 GPUs throttling make it an error storm, paged once; everything resolves once the rack cools.
"""
from __future__ import annotations

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
from testkit.pipeline import incidents, sink_config, stop_started, top_level_messages, wait, write_alertmanager_config
from testkit.process import ReservedPort
from testkit.prom import query
from testkit.services import start_alertmanager, start_prometheus
from testkit.slack_server import SlackTestServer
from testkit.storm import _all_text

pytestmark = pytest.mark.e2e
SLACK_TOKEN = "xoxb-rack"
NODES = 16
RACK = [f"node-{i}" for i in range(1, 13)]
HW_THERMAL = 0x40

# Shaped like a site's own file: its own alert names, a threshold and the bit test people write for
# "thermal slowdown" (bit 0x20 software, 0x40 hardware), evaluated per GPU with the node label kept.
SITE_RULES = {"groups": [{"name": "site-gpu-thermal", "rules": [
    {"alert": "GpuTooHot", "expr": "DCGM_FI_DEV_GPU_TEMP > 88", "for": "2m",
     "labels": {"severity": "warning"},
     "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.node }} at {{ $value }} C"}},
    {"alert": "GpuThermalSlowdown",
     "expr": "floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 64) % 2 == 1 or floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 32) % 2 == 1",
     "for": "1m", "labels": {"severity": "warning"},
     "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.node }} slowed down by heat"}},
]}]}


def pages(pd: PagerDutyTestServer) -> int:
    return sum(1 for e in list(pd.events) if e.get("event_action") == "trigger")


def test_rack_cooling_failure_grouped_by_alertname_is_one_fleet_incident(tmp_path: Path) -> None:
    slack, pagerduty = SlackTestServer(token=SLACK_TOKEN), PagerDutyTestServer()
    sim = GPUClusterSim(nodes=NODES, cluster="sim")
    with serving_in_thread(slack, pagerduty, sim):
        # Prometheus first, so its first seconds (targets come every 5 s) go by while alertd and Alertmanager
        # start; it names Alertmanager's port, reserved now.
        am_port = ReservedPort()
        site = tmp_path / "site-rules.yml"
        site.write_text(yaml.safe_dump(SITE_RULES, sort_keys=False))
        fast = derive_fast_rules(tmp_path / "rules.fast.yml", site)
        prom = require(start_prometheus, sim.write_prometheus_config(
            tmp_path / "prometheus.yml", alertmanager_url=am_port.url, rule_files=[fast]),
            tmp_path / "prom")
        alertd = am = None
        try:
            alertd = AlertdProcess(tmp_path / "alertd", sink_config(
                tmp_path, slack.url, SLACK_TOKEN, pagerduty.url, PagerDutyTestServer.ROUTING_KEY)).start()
            am = require(start_alertmanager, write_alertmanager_config(
                tmp_path / "alertmanager.yml", alertd.url, tmp_path / "token", group_by=("alertname", "cluster"),
                group_wait="2s", group_interval="5s"), tmp_path / "am", port=am_port)
            wait("all targets up", lambda: len(query(prom.url, "up == 1")) == 2 * NODES + 1)
            for i, node in enumerate(RACK):  # the rack heats up over ~12 s: three or more of Alertmanager's batches
                for gpu in range(8):
                    sim.set_temperature(node, gpu, 94.0)
                    sim.throttle(node, gpu, HW_THERMAL)
                time.sleep(1.0 if i % 3 == 2 else 0.2)

            def fleet() -> dict | None:
                rows = [r for r in incidents(alertd, status="open") if r["fleet"]]
                return rows[0] if rows and set(RACK) <= set(rows[0]["nodes"]) else None

            found = wait("one fleet incident naming the rack's twelve nodes", fleet, timeout=90)
            time.sleep(8)  # more than a group interval: a late second incident, post or page would show
            rows = incidents(alertd)
            assert [r["id"] for r in rows if r["fleet"]] == [found["id"]], [r["title"] for r in rows]
            assert [r for r in rows if not r["fleet"] and not r["parentId"]] == [], \
                [(r["node"], r["title"]) for r in rows if not r["parentId"]]
            detail = [alertd.get_json(f"/api/v1/incidents/{r['id']}")[1] for r in rows if r["parentId"]]
            kinds = sorted({(m["alertname"], m["signal"]["kind"]) for d in detail for m in d["members"]})
            assert sorted(found["nodes"]) == sorted(RACK) and found["signals"] == ["thermal"], kinds
            assert found["title"].endswith("on 12 nodes in sim"), found["title"]
            assert found["title"].startswith(("GPU thermal slowdown: clocks cut by heat", "GPU temperature high")), \
                found["title"]
            # one post for the fleet in each channel: 96 GPUs throttling are an error storm (rules/correlation.yml,
            # escalate), posted in the on-call channel and the alert channel; a node posted alone before the fleet
            # formed (the first, with nothing like it yet) is edited to point at the fleet, not posted again
            posts = wait("every top-level message pointing at the fleet", lambda: (
                ms if (ms := top_level_messages(slack)) and all(found["id"] in _all_text(m) for m in ms) else None))
            fleet_posts = [c for c, ms in slack.messages.items() for m in list(ms.values())
                           if not m.get("thread_ts") and "on 12 nodes" in m["text"]]
            assert len(posts) <= 3 and sorted(fleet_posts) == sorted(set(fleet_posts)), [m["text"] for m in posts]
            assert [r["severity"] for r in rows if r["fleet"]] == ["error"]
            assert pages(pagerduty) == 1
            for node in RACK:
                for gpu in range(8):
                    sim.set_temperature(node, gpu, 45.0)
                    sim.throttle(node, gpu, None)
            wait("the fleet and its nodes resolved", lambda: not incidents(alertd, status="open"), timeout=120)
            assert len(top_level_messages(slack)) == len(posts)
        finally:
            stop_started(prom, am, alertd)
