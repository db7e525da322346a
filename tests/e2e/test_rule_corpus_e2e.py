"""A site's own Prometheus rules, end to end: the rule-file corpus in tests/fixtures/prometheus-rules.

Each style (NVIDIA dcgm-exporter examples, kube-prometheus-stack PrometheusRule,
hand-written site rules with the Xid only in the value and summary, Hostname /
instance as the only node identity) is loaded into a real Prometheus (windows
shortened, every `for:` 3 s; scraping and evaluating every 0.5 s) scraping the simulated cluster,
with a real Alertmanager (group_wait and group_interval 0.5 s) sending to
`alertd serve` with the SHIPPED alertd rules, and the Slack and PagerDuty test
servers. Per style:

- one failing node (Xid 79, then its exporter dies so the Xid alert resolves by
  absence, then a cordon) is ONE incident, ONE Slack message and ONE page;
- eight exporters dying together fold into one fleet incident naming the eight,
  posted once to Slack: a node-less alert of the cluster (kube-prometheus-stack's
  TargetDown, aggregated by cluster and job) joins that fleet instead of posting;
- everything resolves.

The styles run concurrently (one Prometheus, Alertmanager and alertd each).
"""
from __future__ import annotations

import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from alertd.authoring import explain
from alertd.authoring.promrules import rule_groups
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

pytestmark = pytest.mark.e2e
CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus-rules"
SLACK_TOKEN = "xoxb-corpus"
NODES = 10
FAILING = "node-1"
OUTAGE = [f"node-{i}" for i in range(2, 10)]  # eight exporters


@dataclass(frozen=True)
class Style:
    name: str
    file: str
    hostname_identity: bool = False  # no `node` target label; dcgm's Hostname is the node's name
    cluster_alert: bool = False  # the outage also fires an alert naming the cluster but no node (TargetDown)


STYLES = (
    Style("nvidia-dcgm", "nvidia-dcgm.yml"),
    Style("kube-prometheus-stack", "kube-prometheus-stack.yml", cluster_alert=True),
    Style("site-handwritten", "site-handwritten.yml"),
    Style("hostname-identity", "hostname-identity.yml", hostname_identity=True),
)


@dataclass
class Outcome:
    style: str
    node_incidents: int = 0
    node_slack: int = 0
    node_pages: int = 0
    node_signals: list[str] = field(default_factory=list)
    node_title: str = ""
    fleet_incidents: int = 0
    fleet_nodes: list[str] = field(default_factory=list)
    outage_top_incidents: list[list[str]] = field(default_factory=list)  # [node, title] of incidents not folded
    fleet_id: str = ""
    cluster_alert_parents: list[str] = field(default_factory=list)  # parentId of each node-less non-fleet incident
    outage_slack: int = 0
    outage_pages: int = 0
    explain: str = ""  # `alertd explain --incident` on the node incident, against the running alertd
    resolved: bool = False
    seconds: float = 0.0


def plain_rules(src: Path, dst: Path) -> Path:
    """A PrometheusRule resource's spec.groups as the plain file Prometheus loads (the operator's job)."""
    dst.write_text(yaml.safe_dump({"groups": rule_groups(yaml.safe_load(src.read_text()))}, sort_keys=False))
    return dst


def pages(pd: PagerDutyTestServer) -> int:
    return sum(1 for e in list(pd.events) if e.get("event_action") == "trigger")


def all_resolved(alertd: AlertdProcess) -> bool:
    return bool(incidents(alertd, status="resolved")) and not incidents(alertd, status="open") \
        and not incidents(alertd, status="acknowledged")


def run_style(style: Style, tmp: Path) -> Outcome:
    out = Outcome(style.name)
    started = time.monotonic()
    slack, pagerduty = SlackTestServer(token=SLACK_TOKEN), PagerDutyTestServer()
    sim = GPUClusterSim(nodes=NODES, cluster="sim", hostname_is_node=style.hostname_identity)
    with serving_in_thread(slack, pagerduty, sim):
        # Prometheus first, so its first seconds (targets come every 5 s) go by while alertd and Alertmanager
        # start; it names Alertmanager's port, reserved now.
        am_port = ReservedPort()
        tmp.mkdir(parents=True, exist_ok=True)
        # `for: 3s` (six evaluations), as a site holds its alerts: four stacks scrape at 0.5 s on shared cores, and
        # a scrape or two that miss their 0.5 s timeout must not raise an exporter-down of a healthy node.
        fast = derive_fast_rules(tmp / "rules.fast.yml", plain_rules(CORPUS / style.file, tmp / "rules.yml"),
                                 for_duration="3s")
        prom_cfg = sim.write_prometheus_config(tmp / "prometheus.yml", alertmanager_url=am_port.url,
                                               rule_files=[fast], node_label=not style.hostname_identity,
                                               scrape_interval="500ms", evaluation_interval="500ms")
        prom = require(start_prometheus, prom_cfg, tmp / "prom")
        alertd = am = None
        try:
            alertd = AlertdProcess(tmp / "alertd", sink_config(
                tmp, slack.url, SLACK_TOKEN, pagerduty.url, PagerDutyTestServer.ROUTING_KEY)).start()
            am = require(start_alertmanager, write_alertmanager_config(tmp / "alertmanager.yml", alertd.url,
                                                                       tmp / "token", group_wait="500ms",
                                                                       group_interval="500ms"), tmp / "am",
                         port=am_port)
            wait(f"{style.name}: all targets up", lambda: len(query(prom.url, "up == 1")) == 2 * NODES + 1)
            wait(f"{style.name}: baseline samples of every GPU",
                 lambda: len(query(prom.url, "count_over_time(DCGM_FI_DEV_XID_ERRORS[10s]) >= 2")) == 8 * NODES)
            single_node(style, sim, alertd, slack, pagerduty, out)
            out.explain = explain_incident(alertd, out_id(alertd), tmp / "alertd-rules")
            sim.clear()
            wait(f"{style.name}: the node incident resolved", lambda: all_resolved(alertd), timeout=60)
            wait(f"{style.name}: the page resolved", lambda: pagerduty.status_of(out_id(alertd)) == "resolved")
            outage(style, sim, alertd, slack, pagerduty, out)
            sim.clear()
            wait(f"{style.name}: everything resolved after the outage", lambda: all_resolved(alertd), timeout=90)
            out.resolved = True
        finally:
            stop_started(prom, am, alertd)
    out.seconds = time.monotonic() - started
    return out


def explain_incident(alertd: AlertdProcess, incident_id: str, rules_dir: Path) -> str:
    def fetch(ident: str) -> dict:
        status, data = alertd.get_json(f"/api/v1/incidents/{ident}")
        assert status == 200, data
        return data

    out, err = io.StringIO(), io.StringIO()
    code = explain.main(file=None, incident=incident_id, rule_paths=[str(rules_dir)], config=None, out=out, err=err,
                        fetch=fetch)
    assert code == 0, err.getvalue()
    return out.getvalue()


def out_id(alertd: AlertdProcess) -> str:
    rows = [r for r in incidents(alertd) if r["node"] == FAILING]
    return rows[0]["id"] if rows else ""


def single_node(style: Style, sim: GPUClusterSim, alertd: AlertdProcess, slack: SlackTestServer,
                pagerduty: PagerDutyTestServer, out: Outcome) -> None:
    def node_incident(*signals: str) -> dict | None:
        rows = [r for r in incidents(alertd) if r["node"] == FAILING]
        return rows[0] if rows and set(signals) <= set(rows[0]["signals"]) else None

    sim.inject_xid(FAILING, 3, 79)
    inc = wait(f"{style.name}: the Xid 79 incident", lambda: node_incident("xid"))
    assert inc["xids"] == [79], (style.name, inc)
    sim.exporter_down(FAILING, True)

    def xid_gone_exporter_down() -> dict | None:
        status, detail = alertd.get_json(f"/api/v1/incidents/{inc['id']}")
        kinds = {m["signal"]["kind"]: m["status"] for m in detail["members"]}
        return detail if kinds.get("xid") == "resolved" and kinds.get("metrics_missing") == "firing" else None

    wait(f"{style.name}: the Xid alert resolved by absence, exporter down joined", xid_gone_exporter_down)
    sim.cordon(FAILING, True)
    inc = wait(f"{style.name}: the cordon joined", lambda: node_incident("xid", "metrics_missing", "node_cordoned"))
    wait(f"{style.name}: the page", lambda: pagerduty.status_of(inc["id"]) == "triggered")
    wait(f"{style.name}: the Slack message", lambda: top_level_messages(slack))
    time.sleep(2)  # anything late (a second incident, post or page) would show by now
    out.node_incidents = len(incidents(alertd))
    out.node_slack = len(top_level_messages(slack))
    out.node_pages = pages(pagerduty)
    out.node_signals = sorted(inc["signals"])
    out.node_title = inc["title"]


def outage(style: Style, sim: GPUClusterSim, alertd: AlertdProcess, slack: SlackTestServer,
           pagerduty: PagerDutyTestServer, out: Outcome) -> None:
    before_ids = {r["id"] for r in incidents(alertd)}
    slack_before, pages_before = len(top_level_messages(slack)), pages(pagerduty)
    for node in OUTAGE:
        sim.exporter_down(node, True)

    def fleet() -> list[dict] | None:
        rows = [r for r in incidents(alertd, status="open") if r["fleet"]]
        return rows if rows and set(OUTAGE) <= set(rows[0]["nodes"]) else None

    rows = wait(f"{style.name}: one fleet incident naming the eight nodes", fleet)
    if style.cluster_alert:  # it may fire before or after the fleet forms: wait until alertd has it
        wait(f"{style.name}: the node-less TargetDown incident", lambda: [
            r for r in incidents(alertd) if r["id"] not in before_ids and not r["fleet"] and not r["node"]])
    time.sleep(3)  # more than group_wait (2 s): a post held for a fold would be out by now
    new = [r for r in incidents(alertd) if r["id"] not in before_ids]
    out.fleet_incidents = sum(1 for r in new if r["fleet"])
    out.fleet_nodes = sorted(rows[0]["nodes"])
    out.fleet_id = rows[0]["id"]
    out.cluster_alert_parents = [r["parentId"] for r in new if not r["fleet"] and not r["node"]]
    out.outage_top_incidents = [[r["node"], r["title"]] for r in new if not r["parentId"]]
    out.outage_slack = len(top_level_messages(slack)) - slack_before
    out.outage_pages = pages(pagerduty) - pages_before


def test_rule_corpus_styles(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=len(STYLES)) as pool:
        futures = {s.name: pool.submit(run_style, s, tmp_path / s.name) for s in STYLES}
        results, errors = {}, {}
        for name, fut in futures.items():
            try:
                results[name] = fut.result()
            except Exception as exc:  # report every style, not only the first to fail
                errors[name] = f"{type(exc).__name__}: {exc}"
    print("\n" + json.dumps({n: vars(o) for n, o in results.items()}, indent=1))
    assert not errors, errors
    for name, o in results.items():
        assert (o.node_incidents, o.node_slack, o.node_pages) == (1, 1, 1), vars(o)
        assert o.node_signals == ["metrics_missing", "node_cordoned", "xid"], vars(o)
        assert o.node_title.startswith(f"Xid 79: GPU has fallen off the bus on {FAILING}"), vars(o)
        assert o.fleet_incidents == 1 and set(OUTAGE) <= set(o.fleet_nodes), vars(o)
        # nothing stands alone next to the fleet: no node's incident, no node-less TargetDown of the cluster
        assert [t[0] for t in o.outage_top_incidents] == [""] and "8 nodes" in o.outage_top_incidents[0][1], vars(o)
        assert o.outage_slack == 1, vars(o)
        # the node-less TargetDown (kube-prometheus-stack) is a child of the fleet
        assert o.cluster_alert_parents == ([o.fleet_id] if name == "kube-prometheus-stack" else []), vars(o)
        assert o.outage_pages == 0, vars(o)  # exporters down is a warning: Slack, no page
        assert o.resolved, vars(o)
        # explain on the stored incident: the Xid member decided by its expression, the code found, the node's label
        xid_part = next(p for p in o.explain.split("\n\n") if "signal  xid" in p)
        assert "by expression " in xid_part and "metric DCGM_FI_DEV_XID_ERRORS" in xid_part, o.explain
        assert "Xid 79 from " in xid_part, o.explain
        node_from = "label Hostname" if name == "hostname-identity" else "label node"
        assert f"node    {FAILING}  from {node_from}" in xid_part, o.explain
