"""Rule shapes once misread, from the corpus files (tests/fixtures/gpu-rule-corpus, their headers name the public
sources), read by `alertd check --prometheus-rules` and by the runtime (`alertd explain`) on the alert as promtool
rendered it: both must give the same reading, and the right one. (The integration tier renders the whole corpus
with promtool: tests/integration/test_rule_corpus_render.py.)"""
from __future__ import annotations

import pytest
import yaml

from alertd.authoring import explain, promrules
from alertd.engine.normalize import NormalizeConfig
from alertd.promql.expr import facts_of_expr
from alertd.promql.recording import rule_groups
from alertd.rules.ruleset import load_rules
from testkit.rule_corpus import CORPUS, ROOT, SITE_RULES, checked_reading, reading, webhook_alert

RULES = load_rules([SITE_RULES, ROOT / "rules"])
NCFG = NormalizeConfig()
H100 = {"Hostname": "h100-node-12", "instance": "10.244.12.9:9400", "job": "nvidia-dcgm-exporter",
        "modelName": "NVIDIA H100 80GB HBM3", "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-q8w2n"}
DGX = {"instance": "dgx-07:9100", "job": "node"}

# (file, alert, labels and annotations as promtool rendered them, the right reading, its title)
CASES = [
    ("dcgm-site-readings", "GpuXidErrorCount", {**H100, "gpu": "2", "severity": "critical"},
     {"summary": "xid error 38.88888888888889"}, "xid/ code unknown", "Xid (code unknown)"),
    ("dcgm-site-readings", "GpuXidReported", {"Hostname": "h100-node-12", "gpu": "2", "severity": "critical",
                                              "modelName": "NVIDIA H100 80GB HBM3"},
     {"summary": "GPU 2 on h100-node-12: XID error detected: 48"}, "xid/ code known", "Xid 48: "),
    ("dcgm-site-readings", "GPUIsDown", {**H100, "gpu": "5", "severity": "critical"},
     {"summary": "GPU 5 on h100-node-12 is down: its readings stopped changing"}, "metrics_missing/telemetry_frozen",
     "GPU telemetry frozen"),
    ("dcgm-site-readings", "GpuCoolingFault", {**H100, "gpu": "6", "severity": "warning"},
     {"summary": "GPU 6 on h100-node-12 is hot while drawing 73.5 W"}, "thermal/temperature", "GPU temperature high"),
    ("dcgm-exporter-1x", "GPUHighTemperature", {**DGX, "gpu": "0", "severity": "critical"},
     {"summary": "GPU 0 temperature is high", "description": "GPU 0 on dgx-07:9100 is running at 91°C"},
     "thermal/temperature", "GPU temperature high"),
    ("dcgm-exporter-1x", "GPUXidError", {**DGX, "gpu": "0", "severity": "critical"},
     {"summary": "GPU 0 on dgx-07:9100 XID error detected: 79"}, "xid/ code known", "Xid 79: "),
    ("dcgm-exporter-1x", "GPUDoubleBitEcc", {**DGX, "gpu": "1", "severity": "critical"},
     {"summary": "Double-bit ECC errors on GPU 1 of dgx-07:9100"}, "ecc/", "GPU uncorrectable ECC errors"),
    ("dcgm-exporter-1x", "NVLinkError", {**DGX, "gpu": "1", "severity": "warning"},
     {"summary": "NVLink replays on GPU 1 of dgx-07:9100"}, "nvlink/", "NVLink errors"),
    ("nvidia-gpu-exporter-ecc", "GpuMemoryErrors", {"instance": "gpu-ws-04:9835", "job": "nvidia_gpu_exporter",
                                                    "uuid": "3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c7d",
                                                    "severity": "critical"},
     {"summary": "Uncorrected memory errors on gpu-ws-04:9835 GPU 3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c7d"}, "ecc/",
     "GPU uncorrectable ECC errors"),
    ("openpai", "NvidiaSmiLatencyTooLarge", {"instance": "10.151.40.5:9102", "type": "pai_service", "severity": "warn"},
     {"summary": "95th nvidia-smi call latency is larger than 40s in 10.151.40.5:9102, value is 60"},
     "gpu_check/driver_slow", "GPU driver slow"),
]


def _rule(name: str, alert: str) -> dict[str, object]:
    doc = yaml.safe_load((CORPUS / f"{name}.rules.yml").read_text())
    (rule,) = [r for g in rule_groups(doc) for r in g["rules"] if r.get("alert") == alert]
    return dict(rule)


@pytest.mark.parametrize("name, alert, labels, annotations, want, title", CASES, ids=[c[1] for c in CASES])
def test_check_and_the_runtime_read_the_rule_alike_and_right(name: str, alert: str, labels: dict[str, str],
                                                              annotations: dict[str, str], want: str,
                                                              title: str) -> None:
    rules = promrules.with_recorded(RULES, [yaml.safe_load((CORPUS / f"{name}.rules.yml").read_text())])
    (checked,) = [r for r in promrules.classify_rules(CORPUS / f"{name}.rules.yml", rules, NCFG) if r.alert == alert]
    rendered = {"labels": {"alertname": alert, **labels}, "annotations": annotations}
    seen = explain.explain(webhook_alert(_rule(name, alert), rendered, 1), rules, NCFG)
    sig = seen.decision.signal
    assert checked_reading(checked) == want
    assert reading(sig.kind, sig.detail if sig.kind != "xid" else "", sig.xid is not None) == want
    assert sig.title.startswith(title), sig.title


def test_a_temperature_alert_named_so_is_never_titled_clocks_throttled() -> None:
    """dcgm-exporter 1.x names no DCGM_FI_* metric: the alert name alone says thermal, and says temperature."""
    rendered = {"labels": {"alertname": "GPUHighTemperature", "gpu": "0", **DGX}, "annotations": {}}
    sig = explain.explain(webhook_alert({"expr": "gpu_temperature_c > 85"}, rendered, 1), RULES, NCFG).decision.signal
    assert (sig.kind, sig.detail, sig.title) == ("thermal", "temperature", "GPU temperature high")


def test_the_right_of_and_is_a_condition_and_the_right_of_unless_is_not_read() -> None:
    facts = facts_of_expr("DCGM_FI_DEV_POWER_USAGE < 100 and DCGM_FI_DEV_GPU_TEMP > 80 "
                          "unless on(Hostname) kube_node_spec_unschedulable == 1")
    assert [s.metric for s in facts.selectors] == ["DCGM_FI_DEV_POWER_USAGE"]
    assert [(s.metric, s.compare) for s in facts.conditions] == [("DCGM_FI_DEV_GPU_TEMP", "> 80")]
    # an idle-GPU rule silenced while the GPU has an Xid is no Xid alert
    rendered = {"labels": {"alertname": "GpuIdle", **H100, "gpu": "1"}, "annotations": {}}
    idle = webhook_alert({"expr": "DCGM_FI_DEV_GPU_UTIL < 5 unless DCGM_FI_DEV_XID_ERRORS > 0"}, rendered, 1)
    assert explain.explain(idle, RULES, NCFG).decision.signal.kind == "other"


def test_a_gpu_idle_for_hours_is_no_frozen_telemetry() -> None:
    """Utilization reads 0 all along on an idle GPU: flat utilization is no sign its readings froze."""
    rendered = {"labels": {"alertname": "GpuIdle", **H100, "gpu": "1"}, "annotations": {}}
    idle = webhook_alert({"expr": "stddev_over_time(DCGM_FI_DEV_GPU_UTIL[1h]) == 0"}, rendered, 1)
    assert explain.explain(idle, RULES, NCFG).decision.signal.detail != "telemetry_frozen"
