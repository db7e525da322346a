"""A site whose alert rules read its own recording rules, end to end through the real Prometheus and Alertmanager.

The site's rules (tests/fixtures/prometheus-rules/site-recording-rules.yml)
alert on ``node:dcgm_up:min == 0``, ``floor(gpu:clock_reasons:max / 32) % 2 == 1``
and ``gpu:xid_last:max > 0 and gpu:xid_changed:5m``: their expressions name no
DCGM metric. alertd knows nothing of the site's files here; it is allowed to ask
the Prometheus named in the generatorURL (``classify.rules_api``) and must do so
before the first webhook's alerts are classified:

- one failing node (thermal slowdown, then Xid 79, then its exporter dies, then
  a cordon) is ONE incident, one Slack message per channel its routes name (the
  thermal warning in the alert channel, the on-call channel once Xid 79 makes it
  critical), one page, titled by the Xid, with no ``other`` member;
- seven exporters dying are one fleet incident naming the seven, one Slack
  post, no page: not seven unrelated ``other`` incidents.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from testkit.sim.fast_rules import derive_fast_rules
from testkit.sim.gpu_cluster import GPUClusterSim
from testkit.alertd_proc import AlertdProcess
from tests.support.fixtures import require
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.pipeline import incidents, sink_config, stop_started, top_level_messages, wait, write_alertmanager_config
from testkit.process import (
    ReservedPort,
    RunningService,
    find_binary,
    free_port,
    http_ready,
    runtime_dir,
    spawn,
    wait_ready,
)
from testkit.prom import query
from testkit.services import PROMETHEUS_FLAGS, start_alertmanager
from testkit.slack_server import SlackTestServer, channel_id_for

pytestmark = pytest.mark.e2e
SITE = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus-rules" / "site-recording-rules.yml"
SLACK_TOKEN = "xoxb-recording"
NODES = 10
FAILING = "node-1"
OUTAGE = [f"node-{i}" for i in range(2, 9)]  # seven exporters


def start_prometheus_on(port: int, config: Path, workdir: Path) -> RunningService:
    """The real Prometheus on a port chosen beforehand, with the external URL (so the generatorURL) on
    loopback: alertd's config names it."""
    run, log, cleanups = runtime_dir("prometheus", workdir, None)
    url = f"http://127.0.0.1:{port}"
    svc = spawn("prometheus", [
        find_binary("prometheus"), f"--config.file={config.resolve()}", f"--web.listen-address=127.0.0.1:{port}",
        f"--web.external-url={url}/", *(f.format(data=run / "data") for f in PROMETHEUS_FLAGS),
    ], port=port, log_path=log, cwd=run, cleanups=cleanups)
    svc.url = url
    wait_ready(svc, http_ready(url + "/-/ready"), 60.0)
    return svc


def pages(pd: PagerDutyTestServer) -> int:
    return sum(1 for e in list(pd.events) if e.get("event_action") == "trigger")


def posts_per_channel(slack: SlackTestServer) -> dict[str, int]:
    return {channel: n for channel, msgs in list(slack.messages.items())
            if (n := sum(1 for m in list(msgs.values()) if not m.get("thread_ts")))}


def all_resolved(alertd: AlertdProcess) -> bool:
    return bool(incidents(alertd, status="resolved")) and not incidents(alertd, status="open") \
        and not incidents(alertd, status="acknowledged")


def test_site_rules_reading_recording_rules(tmp_path: Path) -> None:
    slack, pagerduty = SlackTestServer(token=SLACK_TOKEN), PagerDutyTestServer()
    sim = GPUClusterSim(nodes=NODES, cluster="sim")
    prom_port, am_port = free_port(), ReservedPort()
    with serving_in_thread(slack, pagerduty, sim):
        # Prometheus first, so its first seconds (targets come every 5 s) go by while alertd and Alertmanager
        # start; it names Alertmanager's port, reserved beforehand.
        fast = derive_fast_rules(tmp_path / "rules.fast.yml", SITE)
        prom_cfg = sim.write_prometheus_config(tmp_path / "prometheus.yml", alertmanager_url=am_port.url,
                                               rule_files=[fast], node_label=True, scrape_interval="500ms",
                                               evaluation_interval="500ms")
        prom = require(start_prometheus_on, prom_port, prom_cfg, tmp_path / "prom")
        alertd = am = None
        try:
            alertd = AlertdProcess(tmp_path / "alertd", sink_config(
                tmp_path, slack.url, SLACK_TOKEN, pagerduty.url, PagerDutyTestServer.ROUTING_KEY,
                classify={"rules_api": {"prometheus": [f"http://127.0.0.1:{prom_port}"], "wait": "3s"}})).start()
            am = require(start_alertmanager, write_alertmanager_config(tmp_path / "alertmanager.yml", alertd.url,
                                                                       tmp_path / "token", group_wait="500ms",
                                                                       group_interval="500ms"), tmp_path / "am",
                         port=am_port)
            wait("all targets up", lambda: len(query(prom.url, "up == 1")) == 2 * NODES + 1)
            wait("recorded series of every GPU", lambda: len(query(prom.url, "gpu:clock_reasons:max")) == 8 * NODES)
            one_failing_node(sim, alertd, slack, pagerduty)
            sim.clear()
            wait("the node incident resolved", lambda: all_resolved(alertd), timeout=60)
            seven_exporters(sim, alertd, slack, pagerduty)
            sim.clear()
            wait("everything resolved after the outage", lambda: all_resolved(alertd), timeout=90)
        finally:
            stop_started(prom, am, alertd)


def one_failing_node(sim: GPUClusterSim, alertd: AlertdProcess, slack: SlackTestServer,
                     pagerduty: PagerDutyTestServer) -> None:
    def node_incident(*signals: str) -> dict | None:
        rows = [r for r in incidents(alertd) if r["node"] == FAILING]
        return rows[0] if rows and set(signals) <= set(rows[0]["signals"]) else None

    sim.throttle(FAILING, 3, 0x20)  # sw thermal slowdown, read through gpu:clock_reasons:max
    wait("the thermal incident", lambda: node_incident("thermal"))
    sim.inject_xid(FAILING, 3, 79)
    inc = wait("the Xid 79 joined", lambda: node_incident("thermal", "xid"))
    assert inc["xids"] == [79], inc
    sim.exporter_down(FAILING, True)  # node:dcgm_up:min == 0
    wait("telemetry lost joined", lambda: node_incident("xid", "metrics_missing"))
    sim.cordon(FAILING, True)
    inc = wait("the cordon joined", lambda: node_incident("xid", "metrics_missing", "node_cordoned"))
    wait("the Slack message", lambda: top_level_messages(slack))
    time.sleep(3)  # anything late (a second incident, post or page) would show by now
    rows = incidents(alertd)
    status, detail = alertd.get_json(f"/api/v1/incidents/{inc['id']}")
    assert status == 200, detail
    summary = {"incidents": [(r["node"], r["title"], r["signals"]) for r in rows], "pages": pages(pagerduty),
               "posts": posts_per_channel(slack)}
    assert len(rows) == 1, summary
    assert "other" not in {m["signal"]["kind"] for m in detail["members"]}, detail["members"]
    assert rows[0]["title"].startswith(f"Xid 79: GPU has fallen off the bus on {FAILING}"), summary
    # thermal (a warning) posted to the alert channel; the Xid 79 made it critical: a page, and the on-call
    # channel hears of it in that message's thread, not as a second top-level post of the same problem
    assert summary["posts"] == {channel_id_for("#gpu-alerts"): 1}, summary
    assert summary["pages"] == 1, summary


def seven_exporters(sim: GPUClusterSim, alertd: AlertdProcess, slack: SlackTestServer,
                    pagerduty: PagerDutyTestServer) -> None:
    before_ids = {r["id"] for r in incidents(alertd)}
    slack_before, pages_before = len(top_level_messages(slack)), pages(pagerduty)
    for node in OUTAGE:
        sim.exporter_down(node, True)

    def fleet() -> list[dict] | None:
        rows = [r for r in incidents(alertd, status="open") if r["fleet"]]
        return rows if rows and set(OUTAGE) <= set(rows[0]["nodes"]) else None

    wait("one fleet incident naming the seven nodes", fleet)
    time.sleep(3)  # more than group_wait: a post held for a fold would be out by now
    new = [r for r in incidents(alertd) if r["id"] not in before_ids]
    top = [(r["node"], r["title"], r["signals"]) for r in new if not r["parentId"]]
    assert len(top) == 1 and top[0][0] == "" and "7 nodes" in top[0][1], top
    assert not [r for r in new if "other" in r["signals"]], new
    assert len(top_level_messages(slack)) - slack_before == 1, posts_per_channel(slack)
    assert pages(pagerduty) - pages_before == 0  # exporters down is a warning: Slack, no page
