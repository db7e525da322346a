"""The alerts on alertd itself (deploy/prometheus/alertd-alerts.yml): checked and unit-tested by the real
promtool, routed past alertd by the real amtool, and kept in step with the metrics alertd exports.

Needs the Debian packages prometheus (promtool) and prometheus-alertmanager (amtool); tests skip when a
binary is missing, and fail under CI.
"""
from __future__ import annotations

import functools
import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from alertd.core.service_metrics import REJECT_REASONS, STORE_OPERATIONS, BoundedLabel, Metrics
from alertd.promql.expr import facts_of_expr
from alertd.receive.payload import BadPayload
from testkit import prom as prom_api
from testkit.alertd_proc import AlertdProcess, parse_metrics
from tests.support.fixtures import require
from testkit.pipeline import wait
from testkit.prom import (
    ALERTD_RULES as RULES,
    AMTOOL,
    alerting_rules,
    needs_amtool,
    needs_prometheus,
    needs_promtool,
    promtool_rules,
    run_tool,
    scrape_alertd,
)
from testkit.services import start_prometheus
from testkit.webhooks import UniqueWebhooks

ROOT = Path(__file__).resolve().parents[2]
RULE_TESTS = ROOT / "deploy" / "prometheus" / "tests" / "alertd-alerts.test.yml"
RUNBOOK = ROOT / "runbooks" / "alertd.md"
AM_CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
RUNBOOK_URL = "https://github.com/alertd/alertd/blob/main/runbooks/alertd.md#"
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
SCRAPE_LABELS = {"job", "instance"}


def _rules() -> list[dict[str, Any]]:
    return alerting_rules(RULES.read_text())


@needs_promtool
def test_promtool_checks_and_unit_tests_pass() -> None:
    checked, tested = promtool_rules(RULES, RULE_TESTS)
    assert "SUCCESS" in checked and "SUCCESS" in tested


def test_every_alert_is_labelled_documented_and_tested() -> None:
    """Routing keys on `component`; every alert links its own section of the runbook, and has a unit test
    that expects it to fire."""
    rules = _rules()
    names = {r["alert"] for r in rules}
    anchors = {line[3:].strip().lower() for line in RUNBOOK.read_text().splitlines() if line.startswith("## ")}
    for r in rules:
        assert r["labels"]["component"] == "alertd", r["alert"]
        assert r["labels"]["severity"] in {"critical", "warning", "info"}, r["alert"]
        assert {"summary", "description", "runbook_url"} <= set(r["annotations"]), r["alert"]
        assert r["annotations"]["runbook_url"] == RUNBOOK_URL + r["alert"].lower(), r["alert"]
        assert r["alert"].lower() in anchors, f"runbooks/alertd.md has no section ## {r['alert']}"
    tested = {t["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
    assert tested == names


def _exported() -> dict[str, MetricWrapperBase]:
    """Sample name -> the metric alertd exports under it (a fresh, unregistered set of alertd's metrics)."""
    out: dict[str, MetricWrapperBase] = {}
    for metric in vars(Metrics()).values():
        if isinstance(metric, BoundedLabel):
            metric = metric.metric  # a label kept to its first values: the metric it exports under
        if isinstance(metric, MetricWrapperBase):
            for family in metric.describe():
                for suffix in SUFFIXES[family.type]:
                    out[family.name + suffix] = metric
    return out


@functools.cache
def _code() -> str:
    return "\n".join(path.read_text() for path in (ROOT / "alertd").rglob("*.py"))


def _label_values_in_code() -> set[str]:
    """String literals passed where alertd sets a metric's labels (``.labels(...)`` calls)."""
    return {value for call in re.findall(r"\.labels\(([^)]*)\)", _code())
            for value in re.findall(r'"([a-z_]+)"', call)}


def test_rules_name_only_metrics_labels_and_values_alertd_exports() -> None:
    """A renamed metric, label or reason in alertd would leave an alert that can never fire: every selector
    must name a metric alertd exports, labels it has, and (for its own labels) values its code sets."""
    exported = _exported()
    values_in_code = _label_values_in_code()
    seen = 0
    for rule in _rules():
        for selector in facts_of_expr(rule["expr"]).selectors:
            seen += 1
            if selector.metric == "up":
                continue
            assert selector.metric in exported, f"{rule['alert']}: alertd exports no {selector.metric}"
            labelnames = set(exported[selector.metric]._labelnames)  # noqa: SLF001 (no public accessor)
            for name, op, value in selector.labels:
                if name in SCRAPE_LABELS:
                    continue
                assert name in labelnames, f"{rule['alert']}: {selector.metric} has no label {name}"
                for alternative in value.split("|"):
                    assert alternative in values_in_code, (
                        f"{rule['alert']}: alertd never sets {selector.metric}{{{name}={alternative!r}}}")
    assert seen >= len(_rules())


def test_the_metric_check_catches_a_renamed_label_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a reason alertd does not use is caught."""
    original = RULES.read_text()
    broken = original.replace('reason=~"backlog|store_unavailable"', 'reason=~"backlog|store_down"', 1)
    assert broken != original
    monkeypatch.setattr(f"{__name__}._rules", lambda: alerting_rules(broken))
    with pytest.raises(AssertionError, match="store_down"):
        test_rules_name_only_metrics_labels_and_values_alertd_exports()


@needs_amtool
def test_alertd_alerts_go_past_alertd_and_gpu_alerts_to_it() -> None:
    def route(*labels: str) -> str:
        return run_tool([AMTOOL, "config", "routes", "test", f"--config.file={AM_CONFIG}", *labels]).stdout.strip()

    for rule in _rules():
        assert route(f"alertname={rule['alert']}", "component=alertd", "severity=critical") == "alertd-health"
    assert route("alertname=GPUXidError", "cluster=prod-a", "node=gpu-node-1") == "alertd"
    receivers = {r["name"]: r for r in yaml.safe_load(AM_CONFIG.read_text())["receivers"]}
    assert "webhook_configs" not in receivers["alertd-health"], "alerts about alertd must not depend on alertd"


def test_label_values_alertd_sets_start_at_zero() -> None:
    """increase() sees no change in a series first scraped at 1: every reason and operation alertd's code
    sets must be exported at 0 from the start, or the first refusal after a start raises no alert."""
    code = _code()
    reasons = set(re.findall(r'rejected\.labels\("([a-z_]+)"\)', code))
    reasons |= {BadPayload("x").reason, BadPayload("x", "field").reason}
    operations = set(re.findall(r'store_errors\.labels\("([a-z_]+)"\)', code))
    operations |= set(re.findall(r'_step_failed\("([a-z_]+)"', code))
    assert reasons and operations
    assert reasons <= set(REJECT_REASONS), reasons - set(REJECT_REASONS)
    assert operations <= set(STORE_OPERATIONS), operations - set(STORE_OPERATIONS)
    metrics = Metrics()
    metrics.expect_deliveries(["slack"])
    exposed = parse_metrics(metrics.exposition().decode())
    for reason in REJECT_REASONS:
        assert exposed[f'alertd_webhooks_rejected_total{{reason="{reason}"}}'] == 0
    for operation in STORE_OPERATIONS:
        assert exposed[f'alertd_store_errors_total{{operation="{operation}"}}'] == 0
    assert exposed['alertd_notifications_total{outcome="failed",target="slack"}'] == 0


def _post(url: str, body: bytes, token: str) -> int:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json",
                                                              "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@needs_prometheus
@pytest.mark.services
def test_a_real_prometheus_scraping_alertd_fires_on_rejected_webhooks(tmp_path: Path) -> None:
    """The rule pack as shipped, a real Prometheus scraping a real alertd (one receiver process beside the
    engine): webhooks with a wrong token fire AlertdWebhooksRejected (reason unauthorized), while the
    engine runs and nothing else fires."""
    alertd = AlertdProcess(tmp_path / "alertd", {"receiver": {"auth": {"bearer_token": "right-token"}}}).start()
    try:
        config = scrape_alertd(tmp_path / "prometheus.yml", [alertd.address])
        prom = require(start_prometheus, config, tmp_path / "prom")
        try:
            body = UniqueWebhooks(run="self", nodes=1, seed=3).next()
            raw = json.dumps(body).encode()
            assert _post(alertd.receiver_url, raw, "right-token") == 200
            wait("the refusal counter scraped at 0", lambda: prom_api.query(
                prom.url, 'alertd_webhooks_rejected_total{reason="unauthorized"}'), 20, 0.5)
            time.sleep(2.5)  # two scrapes at 0 first: the increase is what fires
            for _ in range(3):
                assert _post(alertd.receiver_url, raw, "wrong-token") == 401

            def firing() -> dict[str, dict[str, str]]:
                return {a["labels"]["alertname"]: a["labels"] for a in prom_api.alerts(prom.url) if a["state"] == "firing"}

            def once_rejected_fires() -> dict[str, dict[str, str]] | None:
                now = firing()
                return now if "AlertdWebhooksRejected" in now else None
            fired = wait("AlertdWebhooksRejected firing", once_rejected_fires, 30, 0.5, firing)
            assert fired["AlertdWebhooksRejected"].get("reason") == "unauthorized", fired
            assert set(fired) == {"AlertdWebhooksRejected"}, fired
            assert prom_api.query(prom.url, "sum(alertd_engine_leader)")[0]["value"][1] == "1"
        finally:
            prom.stop()
    finally:
        alertd.stop()
