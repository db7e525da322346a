"""Clock-event reason bit tests read from alert expressions, benign reasons kept apart, violation counters."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from urllib.parse import quote_plus

import pytest

from alertd.authoring import promrules
from alertd.engine.classify import classify_explained
from alertd.core.model import Alert
from alertd.promql.bittest import clock_test
from alertd.engine.normalize import NormalizeConfig
from alertd.promql.recording import RecordingIndex, collect
from testkit.builders import ROOT, shipped_rules

CORPUS = ROOT / "tests" / "fixtures" / "prometheus-rules"
OLD, NEW, DCGM = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCK_EVENT_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"


@pytest.mark.parametrize(("expr", "bits"), [
    (f"floor({OLD} / 32) % 2 == 1", {0x20}),
    (f"floor({NEW} / 64) % 2 == 1", {0x40}),
    (f"{OLD} % 32 >= 16", {0x10}),
    (f"{OLD} % 256 >= 128", {0x80}),
    (f"{OLD} % 16 >= 8", {0x8}),
    (f"(floor({DCGM} / 64) % 2) != bool 0", {0x40}),  # a bool comparison keeps every series: its 0/1 is read
    (f"{OLD} / 64 % 2 >= 1", {0x40}),  # without floor the fraction stays below 1 until bit 6
    (f"{OLD} == 4", {0x4}),
    (f"{NEW} > 0", {1 << b for b in range(9)}),
    (f"max by (node) (floor(max_over_time({OLD}[5m]) / 8) % 2 == 1) and on (node) kube_node_labels", {0x8}),
    (f"label_replace(floor({OLD} / 32) % 2 == 1, \"reason\", \"sw_thermal\", \"\", \"\")", {0x20}),
    (f"(floor({NEW} / 32) % 2 == 1) or (floor({OLD} / 32) % 2 == 1)", {0x20}),
])
def test_bit_tests_of_every_usual_shape(expr: str, bits: set[int]) -> None:
    test = clock_test(expr)
    assert test is not None and set(test.bits) == bits, (expr, test)


@pytest.mark.parametrize("expr", [
    f"rate({OLD}[5m]) > 0",  # a rate of a mask tests no bit
    f"{OLD} * on (gpu) group_left DCGM_FI_DEV_GPU_UTIL > 0",  # another series in the arithmetic
    "DCGM_FI_DEV_GPU_TEMP > 85",  # no mask at all
    f"{OLD} & 0x40",  # not PromQL (Prometheus refuses it too)
])
def test_what_cannot_be_read_gives_none(expr: str) -> None:
    assert clock_test(expr) is None


def test_bit_tests_through_recording_rules() -> None:
    recorded = collect([("gpu:reasons:max", f"max without (pod) ({NEW})"),
                        ("gpu:reasons:thermal", "floor(gpu:reasons:max / 32) % 4")])
    test = clock_test("gpu:reasons:thermal >= 1", recorded)
    assert test is not None and set(test.bits) == {0x20, 0x40}
    loop = collect([("a:x:y", "b:x:y + 1"), ("b:x:y", "a:x:y")])  # a cycle stops at the depth bound
    assert clock_test("a:x:y > 0", loop) is None


def alert(name: str, expr: str, labels: dict[str, str] | None = None) -> Alert:
    return Alert(fingerprint="f1", status="firing", labels={"alertname": name, "node": "n1", "gpu": "0", **(labels or {})},
                 annotations={}, starts_at=datetime(2026, 12, 1, tzinfo=timezone.utc), ends_at=None,
                 generator_url=f"http://prom:9090/graph?g0.expr={quote_plus(expr)}&g0.tab=1")


def test_benign_reasons_are_kept_apart_from_thermal_and_hardware_slowdown() -> None:
    rules, ncfg = shipped_rules(), NormalizeConfig()
    got = {r.alert: (r.decision.signal.kind, r.decision.signal.detail, r.decision.signal.severity)
           for r in promrules.classify_rules(CORPUS / "dcgm-throttle-bits.yml", rules, ncfg)}
    assert got["GPUSWThermalSlowdown"][:2] == ("thermal", "sw_thermal_slowdown")
    assert got["GPUHWThermalSlowdown"] == ("thermal", "hw_thermal_slowdown", "critical")  # the alert's own severity
    assert got["GPUHWSlowdown"][:2] == ("thermal", "hw_slowdown")
    assert got["GPUPowerBrakeSlowdown"][:2] == ("thermal", "hw_power_brake_slowdown")
    for name, reason in (("GPUSyncBoost", "sync_boost"), ("GPUSWPowerCap", "sw_power_cap"), ("GPUIdleClocks", "gpu_idle")):
        assert got[name] == ("other", reason, "info"), name
    assert got["GPUClockEventAny"][:2] == ("thermal", "any_clock_event_reason")  # cannot tell benign from harmful
    assert got["GPUThermalViolation"][:2] == ("thermal", "thermal_violation")
    assert got["GPUPowerViolation"][:2] == ("thermal", "power_violation")


def test_the_label_still_wins_over_the_expression() -> None:
    a = alert("GPUClockEventThrottling", f"floor({OLD} / 32) % 2 == 1", {"clock_event_reasons": "136"})
    sig = classify_explained(a, shipped_rules(), NormalizeConfig()).signal
    assert (sig.kind, sig.detail) == ("thermal", "hw_slowdown,hw_power_brake_slowdown")


def test_explain_says_which_bits_decided() -> None:
    d = classify_explained(alert("HotGPU", f"floor({OLD} / 32) % 2 == 1"), shipped_rules(), NormalizeConfig())
    assert d.signal.kind == "thermal" and "clock-event reason bits tested: 0x20" in d.signal.basis


def test_a_recorded_mask_without_its_rule_is_other_and_with_it_thermal() -> None:
    rules = shipped_rules()
    a = alert("GpuThermalSlowdown", "floor(gpu:clock_reasons:max / 32) % 2 == 1")
    assert classify_explained(a, rules, NormalizeConfig()).signal.kind == "other"
    known = replace(rules, recorded=RecordingIndex(collect([("gpu:clock_reasons:max", f"max without (pod) ({DCGM})")])))
    sig = classify_explained(a, known, NormalizeConfig()).signal
    assert (sig.kind, sig.detail) == ("thermal", "sw_thermal_slowdown")


def test_a_bitwise_and_is_refused_with_the_way_to_write_it(tmp_path) -> None:
    f = tmp_path / "bitwise.yml"
    f.write_text("groups:\n  - name: g\n    rules:\n"
                 f"      - alert: HwThermal\n        expr: ({OLD} & 0x40) > 0\n"
                 f"      - alert: PowerBrake\n        expr: {OLD} and 128 != bool 0\n")
    warned = {r.alert: r.warnings + r.errors for r in promrules.classify_rules(f, shipped_rules(), NormalizeConfig())}
    assert any("test bit 0x40 with floor(X / 64) % 2 == 1" in w for w in warned["HwThermal"]), warned
    assert any("test bit 0x80 with floor(X / 128) % 2 == 1" in w for w in warned["PowerBrake"]), warned
