"""The shipped Prometheus rules and Alertmanager example, checked by the real tools,
and the alert rules run by a real Prometheus against the simulated GPU cluster.

Needs the Debian packages prometheus (prometheus, promtool) and
prometheus-alertmanager (amtool); tests skip when a binary is missing.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from prometheus_client.parser import text_string_to_metric_families

from testkit.sim.fast_rules import FAST_RANGES, derive_fast_rules, fast_expr
from testkit.sim.gpu_cluster import GPUClusterSim
from testkit import prom as prom_api
from tests.support.fixtures import require
from testkit.process import RunningService
from testkit.prom import (
    AMTOOL,
    PROMTOOL,
    alerting_rules,
    needs_amtool,
    needs_prometheus,
    needs_promtool,
    promtool_rules,
    run_tool,
)
from testkit.services import start_prometheus

ROOT = Path(__file__).resolve().parents[2]
PROM_DIR = ROOT / "deploy" / "prometheus"
RULES = PROM_DIR / "gpu-alerts.yml"
RULE_TESTS = PROM_DIR / "tests" / "gpu-alerts.test.yml"
EXAMPLE_PROM_CONFIG = PROM_DIR / "prometheus.yml"
AM_CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"


ALERT_NAMES = {
    "GPUXidError",
    "GPUClockEventThrottling",
    "GPUTemperatureHigh",
    "GPUEccDoubleBitErrors",
    "GPURowRemapFailure",
    "GPURowRemapPending",
    "GPUNVLinkErrors",
    "DCGMExporterDown",
    "NodeDown",
    "GPUCountDropped",
    "KubeNodeCordoned",
    "KubeNodeNotReady",
    "Watchdog",
}
RUNBOOK_PAGES = {
    "xid-hardware", "thermal", "ecc", "row-remap", "nvlink", "metrics-missing",
    "node-cordoned", "node-not-ready", "pipeline-silent",
}


# ------------------------------------------------------------- static checks


@needs_promtool
def test_promtool_checks_and_unit_tests_pass() -> None:
    checked, tested = promtool_rules(RULES, RULE_TESTS)
    assert "SUCCESS" in checked and "SUCCESS" in tested


def test_rule_pack_shape() -> None:
    """Names alertd keys on, severity, annotations and runbook pages on every alert,
    and every alert is tested by the promtool unit tests."""
    rules = alerting_rules(RULES.read_text())
    assert {r["alert"] for r in rules} == ALERT_NAMES
    for r in rules:
        assert "for" in r, r["alert"]
        sev = r["labels"]["severity"]
        assert sev == "none" if r["alert"] == "Watchdog" else sev in {"critical", "warning", "info"}, r["alert"]
        assert {"summary", "description", "runbook_url"} <= set(r["annotations"]), r["alert"]
        url = r["annotations"]["runbook_url"]
        prefix = "https://github.com/alertd/alertd/blob/main/runbooks/"
        assert url.startswith(prefix) and url.endswith(".md"), url
        assert url[len(prefix):-3] in RUNBOOK_PAGES, url
    tested = {
        t["alertname"]
        for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for t in case.get("alert_rule_test", [])
        if t.get("exp_alerts")
    }
    assert tested == ALERT_NAMES


@needs_promtool
def test_fast_rules_differ_only_in_for_and_windows(tmp_path: Path) -> None:
    fast = derive_fast_rules(tmp_path / "fast.yml")
    run_tool([PROMTOOL, "check", "rules", str(fast)])
    orig = yaml.safe_load(RULES.read_text())
    derived = yaml.safe_load(fast.read_text())
    for g0, g1 in zip(orig["groups"], derived["groups"], strict=True):
        for r0, r1 in zip(g0["rules"], g1["rules"], strict=True):
            assert r1["expr"] == fast_expr(r0["expr"])
            assert r1.get("labels") == r0.get("labels") and r1.get("annotations") == r0.get("annotations")
            if "alert" in r0:
                assert r1["for"] == "0s"
    assert "[5m]" not in fast.read_text() and "[1h]" not in fast.read_text()
    assert fast_expr("rate(x[5m]) / max_over_time(y[1h]) + z[1h:1m]") == (
        f"rate(x[{FAST_RANGES['5m']}]) / max_over_time(y[{FAST_RANGES['1h']}]) + z[{FAST_RANGES['1h']}:1s]"
    )


@needs_promtool
def test_example_prometheus_config(tmp_path: Path) -> None:
    """Debian's promtool lacks Kubernetes SD: check everything else with static targets."""
    config = yaml.safe_load(EXAMPLE_PROM_CONFIG.read_text())
    assert config["rule_files"] == ["gpu-alerts.yml", "gpu-job-alerts.yml", "alertd-alerts.yml"]
    jobs = {sc["job_name"]: sc for sc in config["scrape_configs"]}
    assert {"dcgm-exporter", "node-exporter", "kube-state-metrics", "alertd"} <= set(jobs)
    assert jobs["dcgm-exporter"]["honor_labels"] is True
    node_relabel = [
        r for r in jobs["dcgm-exporter"]["relabel_configs"]
        if r.get("target_label") == "node"
    ]
    assert node_relabel and node_relabel[0]["source_labels"] == ["__meta_kubernetes_pod_node_name"]
    for sc in config["scrape_configs"]:
        sc.pop("kubernetes_sd_configs")
        sc["static_configs"] = [{"targets": ["127.0.0.1:9"]}]
        for key in ("authorization", "tls_config"):
            for field, _ in list(sc.get(key, {}).items()):
                if field.endswith("_file"):
                    placeholder = tmp_path / f"{sc['job_name']}-{field}"
                    placeholder.write_text("placeholder\n")
                    sc[key][field] = str(placeholder)
    for rules in config["rule_files"]:
        (tmp_path / rules).write_text((PROM_DIR / rules).read_text())
    checked = tmp_path / "prometheus.yml"
    checked.write_text(yaml.safe_dump(config, sort_keys=False))
    run_tool([PROMTOOL, "check", "config", str(checked)])


@needs_amtool
def test_amtool_check_config() -> None:
    out = run_tool([AMTOOL, "check-config", str(AM_CONFIG)]).stdout
    assert "SUCCESS" in out
    am = yaml.safe_load(AM_CONFIG.read_text())
    hook = am["receivers"][0]["webhook_configs"][0]
    assert hook["url"] == "http://alertd:9095/api/v1/alerts/alertmanager"
    assert hook["send_resolved"] is True and hook["max_alerts"] == 0
    assert "credentials_file" in hook["http_config"]["authorization"]
    assert am["route"]["group_by"] == ["cluster", "node", "alertname"]


@needs_amtool
def test_amtool_routes_watchdog_every_minute() -> None:
    am = yaml.safe_load(AM_CONFIG.read_text())
    watchdog = [r for r in am["route"]["routes"] if 'alertname="Watchdog"' in r.get("matchers", [])]
    assert watchdog and watchdog[0]["repeat_interval"] == "1m" and watchdog[0]["receiver"] == "alertd"
    out = run_tool([AMTOOL, "config", "routes", "test", f"--config.file={AM_CONFIG}", "alertname=Watchdog"]).stdout
    assert "alertd" in out


# ----------------------------------------------------------------- simulator


async def test_simulator_exposition_and_control_api() -> None:
    async with GPUClusterSim(nodes=2, gpus_per_node=8, job_gpus=2) as sim, aiohttp.ClientSession() as http:
        async with http.get(f"{sim.url}/nodes/node-1/metrics") as r:
            assert r.status == 200
            families = {f.name: f for f in text_string_to_metric_families(await r.text())}
        for name in (
            "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_GPU_UTIL",
        ):
            assert len(families[name].samples) == 8, name
        xid = families["DCGM_FI_DEV_XID_ERRORS"].samples
        labels0 = xid[0].labels
        assert labels0["gpu"] == "0" and labels0["device"] == "nvidia0"
        assert labels0["UUID"].startswith("GPU-") and len(labels0["UUID"]) == 40
        assert labels0["pci_bus_id"] == "00000000:18:00.0"
        assert labels0["Hostname"].startswith("dcgm-exporter-") and labels0["Hostname"] != "node-1"
        assert labels0["modelName"] == "NVIDIA H100 80GB HBM3" and labels0["DCGM_FI_DRIVER_VERSION"]
        assert labels0["pod"] == "llm-pretrain-worker-0" and labels0["namespace"] == "ml-train"
        assert "pod" not in xid[2].labels  # GPUs without the job have no pod labels
        assert "node" not in labels0  # the scrape adds it

        async with http.post(f"{sim.url}/control/xid", json={"node": "node-1", "gpu": 2, "code": 79}) as r:
            assert r.status == 200
        async with http.post(f"{sim.url}/control/exporter_down", json={"node": "node-2"}) as r:
            assert r.status == 200
        async with http.post(f"{sim.url}/control/cordon", json={"node": "nope"}) as r:
            assert r.status == 404
        async with http.post(f"{sim.url}/control/cordon", json={"node": "node-1", "bogus": 1}) as r:
            assert r.status == 400
        sim.cordon("node-1")
        sim.not_ready("node-2", status="unknown")
        async with http.get(f"{sim.url}/nodes/node-1/metrics") as r:
            text = await r.text()
        assert 'gpu="2",' in text and any(
            line.startswith("DCGM_FI_DEV_XID_ERRORS{gpu=\"2\"") and line.endswith(" 79") for line in text.splitlines()
        )
        async with http.get(f"{sim.url}/nodes/node-2/metrics") as r:
            assert r.status == 503
        async with http.get(f"{sim.url}/nodes/node-2/node-metrics") as r:
            assert r.status == 200
        async with http.get(f"{sim.url}/ksm/metrics") as r:
            ksm = {f.name: f for f in text_string_to_metric_families(await r.text())}
        unsched = {s.labels["node"]: s.value for s in ksm["kube_node_spec_unschedulable"].samples}
        assert unsched == {"node-1": 1, "node-2": 0}
        ready = {
            (s.labels["node"], s.labels["status"]): s.value
            for s in ksm["kube_node_status_condition"].samples
            if s.labels["condition"] == "Ready"
        }
        assert ready[("node-1", "true")] == 1 and ready[("node-2", "unknown")] == 1 and ready[("node-2", "true")] == 0
        taints = {(s.labels["node"], s.labels["key"]) for s in ksm["kube_node_spec_taint"].samples}
        assert ("node-1", "node.kubernetes.io/unschedulable") in taints
        assert ("node-2", "node.kubernetes.io/unreachable") in taints
        assert {s.labels["node"] for s in ksm["kube_node_info"].samples} == {"node-1", "node-2"}

        async with http.post(f"{sim.url}/control/clear", json={}) as r:
            assert r.status == 200
        state = sim.state()["nodes"]
        assert state["node-1"]["gpus"][2]["xid"] == 0 and not state["node-1"]["cordoned"]
        assert not state["node-2"]["exporter_down"] and state["node-2"]["ready"] == "true"


# -------------------------------------------- real Prometheus, simulated cluster

WAIT_S = 60.0


class Cluster:
    def __init__(self, sim: GPUClusterSim, prom: RunningService) -> None:
        self.sim = sim
        self.prom = prom

    def firing(self, alertname: str, **labels: str) -> list[dict[str, Any]]:
        return [
            a for a in prom_api.alerts(self.prom.url)
            if a["state"] == "firing"
            and a["labels"].get("alertname") == alertname
            and all(a["labels"].get(k) == v for k, v in labels.items())
        ]

    def active(self, alertname: str, **labels: str) -> list[dict[str, Any]]:
        return [
            a for a in prom_api.alerts(self.prom.url)
            if a["labels"].get("alertname") == alertname
            and all(a["labels"].get(k) == v for k, v in labels.items())
        ]

    def count(self, expr: str) -> int:
        result = prom_api.query(self.prom.url, f"count({expr})")
        return int(float(result[0]["value"][1])) if result else 0

    def wait(self, what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if time.monotonic() > deadline:
                alerts = [(a["labels"].get("alertname"), a["labels"].get("node"), a["state"]) for a in prom_api.alerts(self.prom.url)]
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}; active alerts: {alerts}\n"
                    f"prometheus log:\n{self.prom.log_tail(20)}"
                )
            time.sleep(0.25)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("prometheus")
    sim = GPUClusterSim(nodes=3, gpus_per_node=8, cluster="sim")
    with sim.running_in_thread():
        rules = derive_fast_rules(workdir / "gpu-alerts.fast.yml")
        config = sim.write_prometheus_config(workdir / "prometheus.yml", rule_files=[rules])
        prom = require(start_prometheus, config, workdir)
        try:
            c = Cluster(sim, prom)
            n_targets = 2 * len(sim.node_names) + 1
            n_gpus = sum(len(n.gpus) for n in sim.nodes.values())
            # Every target scraped and healthy, a baseline sample of every GPU (an
            # Xid injected before the first scrape would be an unchanged first
            # sample and, by design, not alert), and rules evaluating.
            c.wait("all targets up", lambda: c.count("up == 1") == n_targets)
            c.wait("two baseline Xid samples of every GPU", lambda: c.count("count_over_time(DCGM_FI_DEV_XID_ERRORS[10s]) >= 2") == n_gpus)
            c.wait("Watchdog firing", lambda: c.firing("Watchdog"))
            assert not [a for a in prom_api.alerts(prom.url) if a["labels"]["alertname"] != "Watchdog"], prom_api.alerts(prom.url)
            yield c
        finally:
            prom.stop()


@needs_prometheus
@pytest.mark.services
def test_xid_79_and_cordon_fire_then_resolve(cluster: Cluster) -> None:
    # A real DCGM cannot report Xid 79 (the GPU is gone; the kernel log is the
    # witness). The simulator reports it anyway: here it only carries a code
    # through the gauge -> `xid` label path.
    sim = cluster.sim
    gpu = sim.gpu("node-1", 3)
    started = time.monotonic()
    try:
        sim.inject_xid("node-1", 3, 79)
        sim.cordon("node-1")
        xid = cluster.wait("GPUXidError xid=79 on node-1", lambda: cluster.firing("GPUXidError", node="node-1", xid="79"))
        cluster.wait("KubeNodeCordoned on node-1", lambda: cluster.firing("KubeNodeCordoned", node="node-1"))
        fired_after = time.monotonic() - started

        labels = xid[0]["labels"]
        assert len(xid) == 1
        assert labels["gpu"] == "3" and labels["UUID"] == gpu.uuid and labels["pci_bus_id"] == gpu.pci_bus_id
        assert labels["cluster"] == "sim" and labels["severity"] == "warning"
        # The exporter pod's name stays in Hostname; `node` comes from the scrape.
        assert labels["Hostname"] == sim.nodes["node-1"].exporter_pod != labels["node"]
        assert labels["pod"] == "llm-pretrain-worker-0" and labels["namespace"] == "ml-train"
        assert xid[0]["annotations"]["runbook_url"].endswith("/runbooks/xid-hardware.md")
        cordoned = cluster.firing("KubeNodeCordoned", node="node-1")[0]["labels"]
        assert cordoned == {"alertname": "KubeNodeCordoned", "cluster": "sim", "node": "node-1", "severity": "info"}
        assert not cluster.active("GPUXidError", node="node-2") and not cluster.active("KubeNodeCordoned", node="node-2")

        sim.clear("node-1")
        cluster.wait(
            "GPUXidError and KubeNodeCordoned on node-1 to resolve",
            lambda: not cluster.active("GPUXidError", node="node-1") and not cluster.active("KubeNodeCordoned", node="node-1"),
        )
        print(f"fired after {fired_after:.1f}s, resolved after {time.monotonic() - started:.1f}s")
    finally:
        sim.clear("node-1")


@needs_prometheus
@pytest.mark.services
def test_sticky_xid_gauge_stops_alerting_by_itself(cluster: Cluster) -> None:
    sim = cluster.sim
    try:
        sim.inject_xid("node-2", 6, 48)
        cluster.wait("GPUXidError xid=48 on node-2", lambda: cluster.firing("GPUXidError", node="node-2", gpu="6", xid="48"))
        # No clear: the gauge keeps 48, the alert must still end (the fast rules'
        # change window is 15s).
        cluster.wait("the sticky Xid alert to resolve", lambda: not cluster.active("GPUXidError", node="node-2"))
        still = prom_api.query(cluster.prom.url, 'DCGM_FI_DEV_XID_ERRORS{node="node-2",gpu="6"}')
        assert still and still[0]["value"][1] == "48"
    finally:
        sim.clear("node-2")


@needs_prometheus
@pytest.mark.services
def test_exporter_down_throttling_and_lost_gpu(cluster: Cluster) -> None:
    sim = cluster.sim
    try:
        sim.exporter_down("node-3")
        sim.throttle("node-1", 5, 0x44)  # HW thermal + SW power cap
        sim.throttle("node-1", 6, 0x5)   # idle + SW power cap: benign
        sim.gpu_lost("node-2", 7)
        cluster.wait("DCGMExporterDown on node-3", lambda: cluster.firing("DCGMExporterDown", node="node-3"))
        throttled = cluster.wait(
            "GPUClockEventThrottling on node-1 GPU 5",
            lambda: cluster.firing("GPUClockEventThrottling", node="node-1", gpu="5"),
        )
        assert throttled[0]["labels"]["clock_event_reasons"] == "64"
        assert throttled[0]["annotations"]["clock_event_reasons_raw"] == "68"
        assert not cluster.active("GPUClockEventThrottling", node="node-1", gpu="6")
        dropped = cluster.wait("GPUCountDropped on node-2", lambda: cluster.firing("GPUCountDropped", node="node-2"))
        assert float(dropped[0]["value"]) == 7
        assert not cluster.active("NodeDown")
    finally:
        sim.clear()
    cluster.wait(
        "everything but the Watchdog to resolve",
        lambda: all(a["labels"]["alertname"] == "Watchdog" for a in prom_api.alerts(cluster.prom.url)),
    )
