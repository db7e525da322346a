"""The job-level rules (deploy/prometheus/gpu-job-alerts.yml): checked and unit-tested by the real promtool,
and held to the alert contract docs/rules.md writes down for alertd's engine.

Needs the Debian package prometheus (promtool); tests skip when it is missing.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from testkit.prom import alerting_rules, needs_promtool, promtool_rules

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "gpu-job-alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "tests" / "gpu-job-alerts.test.yml"
# The stall rule's timing at a 30 s evaluation interval, where 120 s and 150 s fire apart.
RULE_TESTS_30S = RULE_TESTS.with_name("gpu-job-alerts-30s.test.yml")

# alertname -> signal: the contract with the engine (docs/rules.md, "Job-level alerts").
SIGNALS = {
    "GPUJobStalled": "job_stalled",
    "GPUStraggler": "straggler",
    "GPUTelemetryQuiet": "gpu_quiet",
    "GPUPCIeReplaysGrowing": "link_degraded",
    "GPULinkTrafficCollapsed": "link_degraded",
    "NodeInfiniBandPortDown": "link_degraded",
    "NodeInfiniBandPortFlapping": "link_degraded",
}


@needs_promtool
def test_promtool_checks_and_unit_tests_pass() -> None:
    for tests in (RULE_TESTS, RULE_TESTS_30S):
        checked, tested = promtool_rules(RULES, tests)
        assert "SUCCESS" in checked and "SUCCESS" in tested


def test_every_alert_is_in_the_contract_and_unit_tested() -> None:
    rules = alerting_rules(RULES.read_text())
    assert {r["alert"]: r["labels"]["signal"] for r in rules} == SIGNALS
    assert all(r["labels"]["severity"] in ("critical", "warning") for r in rules)
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {case["alertname"] for t in tests for case in t.get("alert_rule_test", []) if case["exp_alerts"]}
    assert fired == set(SIGNALS)
    docs = (ROOT / "docs" / "rules.md").read_text()
    assert all(f"| `{name}` | `{signal}` |" in docs for name, signal in SIGNALS.items())


def test_stall_and_straggler_annotations_the_engine_reads() -> None:
    rules = {r["alert"]: r for r in alerting_rules(RULES.read_text())}
    assert {"summary", "description", "stalled_since"} <= set(rules["GPUJobStalled"]["annotations"])
    for name in ("GPUStraggler", "GPULinkTrafficCollapsed"):
        assert {"summary", "value", "job_median"} <= set(rules[name]["annotations"])
