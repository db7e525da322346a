"""Exporters besides dcgm-exporter, in the shapes their rule sets use: nvidia_gpu_exporter (nvidia_smi_*),
OpenPAI (nvidiasmi_*), IBM Autopilot's health checks, the GPU Operator's node status exporter; correctable
ECC apart from double-bit; severity words of other tools; a site's "not GPU health"; no false Xid promise."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from alertd.authoring import promrules
from alertd.engine.classify import classify_explained, severity_label
from alertd.engine.normalize import NormalizeConfig
from alertd.rules.ruleset import load_rules
from testkit.builders import ROOT, shipped_rules

NCFG = NormalizeConfig()


def decided(expr: str, name: str = "SiteAlert", **labels: str) -> tuple[str, str, str]:
    alert = promrules.synthetic_alert({"alert": name, "expr": expr, "labels": labels})
    sig = classify_explained(alert, shipped_rules(), NCFG).signal
    return sig.kind, sig.detail, sig.severity


@pytest.mark.parametrize(("expr", "labels", "want"), [
    ("nvidia_smi_temperature_gpu > 85", {}, ("thermal", "temperature", "warning")),
    ('up{job="nvidia_gpu_exporter"} == 0', {}, ("metrics_missing", "exporter_down", "warning")),
    ("nvidia_smi_ecc_errors_uncorrected_volatile_total > 0", {}, ("ecc", "", "error")),
    ("increase(nvidia_smi_ecc_errors_corrected_aggregate_total[1h]) > 100", {}, ("ecc", "correctable", "warning")),
    ("nvidia_smi_clocks_throttle_reasons_hw_thermal_slowdown == 1", {}, ("thermal", "", "warning")),
    ("nvidia_smi_remapped_rows_failure > 0", {}, ("row_remap", "", "critical")),
    ('nvidiasmi_ecc_error_count{type="double"} > 0', {"severity": "fatal"}, ("ecc", "", "critical")),
    ('nvidiasmi_ecc_error_count{type="volatile_single"} > 1000', {}, ("ecc", "correctable", "warning")),
    ("sum(nvidiasmi_retired_page_count) by (instance, minor_number) > 60", {}, ("row_remap", "", "warning")),
    ("nvidiasmi_attached_gpus < 8", {}, ("metrics_missing", "gpu_missing", "critical")),
    ("increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[1h]) > 10", {}, ("ecc", "correctable", "warning")),
    ("increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h]) > 0", {}, ("ecc", "", "error")),
    ('autopilot_health_checks{health="remapped"} == 1', {}, ("row_remap", "", "warning")),
    ('autopilot_health_checks{health="power-slowdown"} == 1', {}, ("thermal", "power_slowdown", "warning")),
    ("gpu_operator_node_device_plugin_devices_total == 0", {"severity": "P1"}, ("metrics_missing", "gpu_missing",
                                                                                "critical")),
])
def test_each_exporters_shape_is_classified(expr: str, labels: dict[str, str], want: tuple[str, str, str]) -> None:
    assert decided(expr, **labels) == want


def test_utilization_of_those_exporters_stays_other() -> None:
    assert decided("avg_over_time(nvidia_smi_utilization_gpu_ratio[1h]) < 0.1")[0] == "other"
    assert decided('autopilot_health_checks{health="ping"} == 1')[0] == "other"


@pytest.mark.parametrize(("word", "want"), [
    ("fatal", "critical"), ("page", "critical"), ("P1", "critical"), ("p2", "error"), ("P3", "warning"),
    ("P4", "info"), ("SEV1", "critical"), ("high", "error"), ("Warn", "warning"), ("disaster", "critical"),
    ("critical", "critical"), ("bogus", ""),
])
def test_severity_words_map_in_one_place(word: str, want: str) -> None:
    assert severity_label(word) == want


def check(tmp_path: Path, rules: list[dict], *extra_rule_files: Path, strict: bool = True) -> tuple[int, str]:
    path = tmp_path / "site-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "site", "rules": rules}]}))
    out = io.StringIO()
    code = promrules.main([str(path)], load_rules([*extra_rule_files, ROOT / "rules"]), NCFG, out, strict=strict)
    return code, out.getvalue()


def test_no_xid_code_promised_from_a_count_or_from_text_without_one(tmp_path: Path) -> None:
    code, out = check(tmp_path, [
        {"alert": "XidFehler", "expr": "increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0",
         "annotations": {"description": "XID-Fehler auf {{ $labels.Hostname }}: {{ $value }}"}},
        {"alert": "XidRaw", "expr": "max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0",
         "annotations": {"summary": "Xid {{ $value }} on {{ $labels.node }}"}},
    ], strict=False)
    fehler, raw = out.split("XidRaw")
    assert "annotation text, once Prometheus renders it" not in fehler and "Xid (code unknown)" in fehler
    assert "Xid code from the annotation text, once Prometheus renders it" in raw


def test_a_site_declares_rules_not_gpu_health_and_strict_passes(tmp_path: Path) -> None:
    rules = [{"alert": "GpuIdleExpensive", "expr": "avg_over_time(DCGM_FI_DEV_GPU_UTIL[6h]) < 5",
              "labels": {"severity": "info"}},
             {"alert": "GPUXidErrors", "expr": "max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0",
              "labels": {"severity": "critical"}, "annotations": {"summary": "Xid {{ $value }} on {{ $labels.node }}"}}]
    code, out = check(tmp_path, rules)
    assert code == 1 and "looks like a GPU alert" in out  # before: a warning, --strict fails
    site = tmp_path / "00-site.yml"
    site.write_text(yaml.safe_dump({"signals": [{"kind": "other", "match": ['alertname="GpuIdleExpensive"']}]}))
    code, out = check(tmp_path, rules, site)
    assert code == 0, out
    assert "-> other (not GPU health)" in out and "WARNING" not in out
    assert "(1 declared not GPU health)" in out
