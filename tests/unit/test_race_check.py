"""``alertd check --prometheus-rules`` warns of event rules that can race Alertmanager's group_interval."""
from __future__ import annotations

from pathlib import Path

import pytest

from alertd.authoring.race import Timing, race_warning
from alertd.cli.main import main as cli_main
from alertd.promql.hold import event_hold

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "prometheus" / "gpu-alerts.yml"
CORPUS = ROOT / "tests" / "fixtures" / "gpu-rule-corpus"
THROTTLE = ROOT / "tests" / "fixtures" / "prometheus-rules" / "dcgm-throttle-bits.yml"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    cli_main(["check", "--prometheus-rules", *args])
    return capsys.readouterr().out


def races(out: str) -> list[str]:
    return [line for line in out.splitlines() if "fires on an event" in line]


def test_an_increase_rule_of_a_published_site_file_is_warned_with_its_fix(capsys, tmp_path):
    # GPU_XID错误: increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0, no for: firing about 4m < 30s + 5m.
    [line] = races(check(capsys, str(CORPUS / "site-multilingual.rules.yml")))
    assert line.startswith(f"{CORPUS / 'site-multilingual.rules.yml'}:9: WARNING: fires on an event (increase(...[5m]))")
    assert "stays firing about 4m" in line and "(5m30s)" in line and "add keep_firing_for: 2m" in line

    fixed = tmp_path / "site.rules.yml"
    fixed.write_text((CORPUS / "site-multilingual.rules.yml").read_text().replace(
        "        expr: increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0\n",
        "        expr: increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0\n        keep_firing_for: 2m\n", 1))
    assert races(check(capsys, str(fixed))) == []


def test_the_shipped_event_rules_outlast_the_defaults_and_name_their_fix_for_longer_intervals(capsys):
    assert races(check(capsys, str(SHIPPED))) == []
    longer = races(check(capsys, str(SHIPPED), "--group-interval", "10m"))
    lines = SHIPPED.read_text().splitlines()
    events = [str(lines.index(f"      - alert: {name}") + 1)
              for name in ("GPUXidError", "GPUEccDoubleBitErrors", "GPUNVLinkErrors")]
    assert [line.split(": WARNING")[0].rsplit(":", 1)[1] for line in longer] == events
    assert all("(10m30s)" in line and "raise keep_firing_for: 7m" in line for line in longer), longer


def test_the_shipped_xid_rule_without_keep_firing_for_races(capsys, tmp_path):
    text = SHIPPED.read_text()
    at = text.index("      - alert: GPUXidError\n")
    bare = tmp_path / "gpu-alerts.yml"
    bare.write_text(text[:at] + text[at:].replace("        keep_firing_for: 2m\n", "", 1))
    [line] = races(check(capsys, str(bare)))
    assert "fires on an event (last_over_time(...[5m]))" in line and "add keep_firing_for: 2m" in line


def test_a_sustained_rule_and_a_state_are_not_events(capsys):
    # GPUThermalViolation: rate(...[5m]) > 0 for 5m fires only on a sustained rise; temperatures are states.
    out = check(capsys, str(THROTTLE), str(CORPUS / "dcgm-docker-bridge.rules.yml"), "--all")
    assert "GPUThermalViolation" in out and races(out) == []


def test_the_group_interval_and_for_of_the_rule_count():
    rule = {"alert": "GPUXidErrors", "expr": "changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0", "for": "2m"}
    # 10m - 2m - 30s (the group's own interval) = 7m30s: enough for 30s + 5m, 3m short of 30s + 10m
    assert race_warning(rule, "30s", Timing(), {}) == ""
    assert "add keep_firing_for: 3m" in race_warning(rule, "30s", Timing(group_interval=Timing().group_interval * 2), {})


def test_event_windows_as_sites_write_them():
    assert event_hold("DCGM_FI_DEV_XID_ERRORS > 0") is None  # the last-value gauge: a state, for ever
    assert event_hold("sum by (node) (DCGM_FI_DEV_ECC_DBE_AGG_TOTAL - DCGM_FI_DEV_ECC_DBE_AGG_TOTAL offset 10m) > 0"
                      ).seconds == 600.0
    assert event_hold("max_over_time((increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0)[15m:1m])").seconds == 1200.0
    assert event_hold("irate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[5m]) > 0").seconds == 0.0
    both = event_hold("DCGM_FI_DEV_XID_ERRORS > 0 and changes(DCGM_FI_DEV_XID_ERRORS[2m]) > 0")
    assert both is not None and both.seconds == 120.0


def test_a_rule_the_site_declared_not_gpu_health_is_never_warned_on(capsys, tmp_path):
    site = tmp_path / "00-site.yml"
    site.write_text("signals:\n  - kind: other\n    match:\n      - 'alertname=\"GPU_XID错误\"'\n", encoding="utf-8")
    out = check(capsys, str(CORPUS / "site-multilingual.rules.yml"), "--all")
    assert len(races(out)) == 1
    cli_main(["check", str(site), str(ROOT / "rules"), "--prometheus-rules", str(CORPUS / "site-multilingual.rules.yml"),
              "--all"])
    declared = capsys.readouterr().out
    assert "GPU_XID错误" in declared and "other (not GPU health)" in declared and races(declared) == []
