"""Recording rules: the site's files from the config, the rules API of the alert's Prometheus, the engine's use."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from urllib.parse import quote_plus

import pytest
import yaml

from alertd.authoring import promrules
from alertd.authoring.ruletest import run_file
from alertd.app.assemble import build_service
from alertd.cli.main import main as cli_main
from alertd.config.settings import load_config
from alertd.engine.pipeline import Engine
from alertd.core.errors import InvalidDocument
from alertd.core.model import Alert
from alertd.engine.normalize import NormalizeConfig
from alertd.promql.recording import RecordingIndex, base_url, collect, expand_facts, load_files
from alertd.promql.expr import facts_of_expr
from alertd.store.sqlite import SqliteStore
from alertd.app.recording_rules import RulesApiSettings, RulesFetcher, parse_rules_response, with_site_recordings
from testkit.builders import ROOT, alert, at, shipped_rules

SITE = ROOT / "tests" / "fixtures" / "prometheus-rules" / "site-recording-rules.yml"
PROM = "http://prometheus.monitoring:9090"


def reading(expr: str, name: str = "GpuTelemetryLost", prom: str = PROM, **labels: str) -> Alert:
    a = alert(name, node="gpu-node-3", **labels)
    a.generator_url = f"{prom}/graph?g0.expr={quote_plus(expr)}&g0.tab=1"
    return a


def api_answer(*rules: tuple[str, str]) -> bytes:
    """A /api/v1/rules?type=record answer as Prometheus 2.42 writes it."""
    return json.dumps({"status": "success", "data": {"groups": [{
        "name": "gpu-recording", "file": "/etc/prometheus/rules/site.yml", "interval": 30, "limit": 0,
        "rules": [{"name": n, "query": q, "health": "ok", "evaluationTime": 0.0004, "type": "recording",
                   "lastEvaluation": "2026-12-01T08:00:00Z"} for n, q in rules],
        "evaluationTime": 0.001, "lastEvaluation": "2026-12-01T08:00:00Z"}]}}).encode()


def test_expansion_carries_matchers_functions_and_comparison_over() -> None:
    recorded = collect([("node:dcgm_up:min", 'min by (cluster, node) (up{job="dcgm-exporter"})')])
    facts = expand_facts(facts_of_expr('node:dcgm_up:min{cluster="a"} == 0'), recorded)
    first = facts.selectors[0]
    assert (first.metric, first.inside, first.compare) == ("up", ("min",), "== 0")
    assert ("job", "=", "dcgm-exporter") in first.labels and ("cluster", "=", "a") in first.labels
    assert facts.selectors[-1].metric == "node:dcgm_up:min"  # the name stays for name-based evidence
    loop = collect([("a:b:c", "d:e:f"), ("d:e:f", "a:b:c + 1")])
    assert len(expand_facts(facts_of_expr("a:b:c > 0"), loop).selectors) < 40  # bounded depth, no recursion error


def test_one_name_recorded_twice_reads_both_expressions() -> None:
    recorded = collect([("gpu:temp:max", "max(DCGM_FI_DEV_GPU_TEMP)"), ("gpu:temp:max", "max(DCGM_FI_DEV_MEMORY_TEMP)")])
    metrics = {s.metric for s in expand_facts(facts_of_expr("gpu:temp:max > 85"), recorded).selectors}
    assert {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP"} <= metrics


def test_configured_files_are_read_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "prom").mkdir()
    (tmp_path / "prom" / "site.yml").write_text(SITE.read_text())
    (tmp_path / "alertd.yml").write_text("classify:\n  prometheus_rules: ['prom/*.yml']\n")
    rules = with_site_recordings(shipped_rules(), load_config(tmp_path / "alertd.yml"))
    assert "node:dcgm_up:min" in rules.recorded.files
    engine = Engine(rules)
    changes = engine.ingest([reading("node:dcgm_up:min == 0")], at(0))
    assert engine.prepare(reading("node:dcgm_up:min == 0")).signal.detail == "exporter_down"
    assert changes  # an incident opened, of the right kind
    (tmp_path / "alertd.yml").write_text("classify:\n  prometheus_rules: ['nothing/*.yml']\n")
    with pytest.raises(InvalidDocument, match="matches no file"):
        with_site_recordings(shipped_rules(), load_config(tmp_path / "alertd.yml"))


def test_unreadable_rule_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.yml").write_text("groups: [\n")
    _, problems = load_files(["bad.yml"], tmp_path)
    assert problems and problems[0].source.endswith("bad.yml") and "cannot read Prometheus rules" in problems[0].message


def test_base_url_of_generator_urls() -> None:
    assert base_url("http://prom:9090/graph?g0.expr=up&g0.tab=1") == "http://prom:9090"
    assert base_url("https://mon.example/prometheus/graph?g0.expr=up") == "https://mon.example/prometheus"
    assert base_url("javascript:alert(1)") == "" and base_url("not a url") == ""


def test_rules_api_answer_is_parsed_and_bad_ones_refused() -> None:
    rules = parse_rules_response(api_answer(("node:dcgm_up:min", 'min by (node) (up{job="dcgm-exporter"})')))
    assert dict(rules) == {"node:dcgm_up:min": 'min by (node) (up{job="dcgm-exporter"})'}
    for bad in (b"<html>", b'{"status":"error","error":"nope"}', b"[]"):
        with pytest.raises(ValueError):
            parse_rules_response(bad)


class FakeProm:
    """The rules API seam: answers, failures and a gate that holds the answer back."""

    def __init__(self, answer: bytes):
        self.answer, self.asked, self.fail = answer, [], False
        self.gate = asyncio.Event()
        self.gate.set()

    async def get(self, url: str) -> bytes:
        self.asked.append(url)
        await self.gate.wait()
        if self.fail:
            raise ValueError("HTTP 503")
        return self.answer


def fetcher_for(prom: FakeProm, index: RecordingIndex, now: list[float], wait: str = "2s") -> RulesFetcher:
    settings = RulesApiSettings.from_doc({"prometheus": [PROM], "wait": wait, "ttl": "10m", "retry": "1m"})
    return RulesFetcher(settings, lambda: index, get=prom.get, clock=lambda: now[0])


async def test_first_webhook_waits_for_the_rules_then_they_are_cached() -> None:
    prom, index, now = FakeProm(api_answer(("node:dcgm_up:min", 'min by (node) (up{job="dcgm-exporter"})'))), \
        RecordingIndex(), [0.0]
    fetcher = fetcher_for(prom, index, now)
    a = reading("node:dcgm_up:min == 0")
    await fetcher.prepare([a])
    assert prom.asked == [f"{PROM}/api/v1/rules?type=record"]
    assert "node:dcgm_up:min" in index.for_url(a.generator_url)
    rules = shipped_rules()
    rules.recorded = index
    assert Engine(rules).prepare(a).signal.detail == "exporter_down"
    now[0] = 599.0
    await fetcher.prepare([a])
    assert len(prom.asked) == 1  # within the TTL: no request
    now[0] = 601.0
    await fetcher.prepare([a])
    await asyncio.sleep(0)
    assert len(prom.asked) == 2  # refreshed after the TTL


async def test_a_slow_or_failing_prometheus_costs_one_bounded_wait() -> None:
    prom, index, now = FakeProm(api_answer(("node:dcgm_up:min", "min(up)"))), RecordingIndex(), [0.0]
    fetcher = fetcher_for(prom, index, now, wait="20ms")
    prom.gate.clear()  # the answer does not come
    a = reading("node:dcgm_up:min == 0")
    await asyncio.wait_for(fetcher.prepare([a]), 1.0)  # returns after `wait`, not after the answer
    assert "node:dcgm_up:min" not in index.for_url(a.generator_url)
    prom.fail = True
    prom.gate.set()
    await asyncio.sleep(0.01)
    assert fetcher.failures == 1
    await fetcher.prepare([a])
    assert len(prom.asked) == 1  # failed: not asked again before `retry`
    now[0] = 61.0
    prom.fail = False
    await fetcher.prepare([a])
    assert len(prom.asked) == 2 and "node:dcgm_up:min" in index.for_url(a.generator_url)
    await fetcher.close()


async def test_only_listed_prometheus_servers_are_asked() -> None:
    prom, index, now = FakeProm(api_answer()), RecordingIndex(), [0.0]
    fetcher = fetcher_for(prom, index, now)
    await fetcher.prepare([reading("node:dcgm_up:min == 0", prom="http://169.254.169.254"),
                           reading("node:dcgm_up:min == 0", prom=PROM + ".evil.example"),
                           reading("node:dcgm_up:min == 0", prom=PROM + "/../admin"),
                           reading("up == 0")])
    await asyncio.sleep(0)  # the listed one is asked in the background: nothing it reads is missing
    assert prom.asked == [f"{PROM}/api/v1/rules?type=record"]


async def test_rules_that_arrive_late_reclassify_the_next_delivery() -> None:
    prom, index, now = FakeProm(api_answer(("node:dcgm_up:min", 'min(up{job="dcgm-exporter"})'))), \
        RecordingIndex(), [0.0]
    rules = shipped_rules()
    rules.recorded = index
    engine = Engine(rules)
    changed: list[bool] = []
    fetcher = RulesFetcher(fetcher_for(prom, index, now).settings, lambda: index, get=prom.get,
                           clock=lambda: now[0], on_change=lambda: (changed.append(True), engine.set_rules(rules)))
    a = reading("node:dcgm_up:min == 0")
    assert engine.prepare(a).signal.kind == "other"
    await fetcher.prepare([a])
    assert changed and engine.prepare(reading("node:dcgm_up:min == 0")).signal.detail == "exporter_down"


def test_check_and_the_service_agree(tmp_path: Path) -> None:
    """`check --prometheus-rules FILE` and the service configured with the same file decide alike."""
    checked = {r.alert: r for r in promrules.classify_rules(SITE, shipped_rules(), NormalizeConfig())}
    (tmp_path / "alertd.yml").write_text(f"classify:\n  prometheus_rules: ['{SITE}']\n")
    engine = Engine(with_site_recordings(shipped_rules(), load_config(tmp_path / "alertd.yml")))
    rules = [r for g in promrules.rule_groups(yaml.safe_load(SITE.read_text())) for r in g["rules"] if "alert" in r]
    assert len(rules) == len(checked) == 4
    for rule in rules:
        served = engine.prepare(promrules.synthetic_alert(rule)).signal
        decided = checked[rule["alert"]].decision.signal
        assert (served.kind, served.detail) == (decided.kind, decided.detail) != ("other", ""), rule["alert"]
    assert "(through recording rule node:dcgm_up:min)" in checked["GpuTelemetryLost"].decision.evidence


def test_rule_tests_read_the_sites_recording_rules(tmp_path: Path) -> None:
    body = f"""rule_files: [{ROOT / 'rules'}]
prometheus_rules: [{SITE}]
tests:
  - name: telemetry lost through node:dcgm_up:min
    input:
      - at: 0s
        labels: {{alertname: GpuTelemetryLost, node: n1, cluster: c}}
        expr: node:dcgm_up:min == 0
    expect:
      - at: 1s
        incidents:
          - {{node: n1, signals: [metrics_missing], detail: exporter_down}}
"""
    (tmp_path / "site.test.yml").write_text(body)
    result = run_file(tmp_path / "site.test.yml")
    assert result.ok and result.passed == 1, [str(p) for p in result.problems + result.failures]
    (tmp_path / "site.test.yml").write_text(body.replace(str(SITE), "missing/*.yml"))
    result = run_file(tmp_path / "site.test.yml")
    assert any("matches no file" in p.message for p in result.problems), result.problems


def test_check_reads_the_configured_recording_rules(tmp_path: Path, capsys) -> None:
    """Alerts in one file, recording rules in another that only the config names."""
    doc = yaml.safe_load(SITE.read_text())
    alerts = {"groups": [g for g in doc["groups"] if g["name"] == "gpu-alerts"]}
    records = {"groups": [g for g in doc["groups"] if g["name"] == "gpu-recording"]}
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(alerts))
    (tmp_path / "prom").mkdir()
    (tmp_path / "prom" / "records.yml").write_text(yaml.safe_dump(records))
    (tmp_path / "alertd.yml").write_text(f"rules:\n  paths: ['{ROOT / 'rules'}']\n"
                                         "classify:\n  prometheus_rules: ['prom/*.yml']\n")
    assert cli_main(["check", "--prometheus-rules", str(tmp_path / "alerts.yml")]) == 0
    alone = capsys.readouterr().out
    assert "4 alerting rules: 0 classified, 4 other, 4 with warnings" in alone and "whose recording rule is in none" in alone
    assert cli_main(["check", str(tmp_path / "alertd.yml"), "--prometheus-rules", str(tmp_path / "alerts.yml")]) == 0
    read = capsys.readouterr().out
    assert "4 alerting rules: 4 classified, 0 other, 1 with warnings" in read  # GpuXid: its event is recorded
    assert "fires on an event (changes(...[5m]) in gpu:xid_changed:5m)" in read and "keep_firing_for: 2m" in read


def test_a_reload_rereads_the_files_and_keeps_what_prometheus_told(tmp_path: Path) -> None:
    (tmp_path / "records.yml").write_text("groups: [{name: g, rules: [{record: 'a:b:c', expr: 'up'}]}]\n")
    (tmp_path / "alertd.yml").write_text(f"rules:\n  paths: ['{ROOT / 'rules'}']\n"
                                         "classify:\n  prometheus_rules: [records.yml]\n")
    svc = build_service(load_config(tmp_path / "alertd.yml"), SqliteStore(tmp_path / "db.sqlite3"))
    assert dict(svc.rules.recorded.files) == {"a:b:c": "up"}
    svc.rules.recorded.set_fetched(PROM, collect([("x:y:z", "DCGM_FI_DEV_GPU_TEMP")]))
    (tmp_path / "records.yml").write_text("groups: [{name: g, rules: [{record: 'a:b:c', expr: 'min(up)'}]}]\n")
    assert svc.reload_rules() == (True, "")
    assert dict(svc.rules.recorded.for_url(f"{PROM}/graph?g0.expr=x")) == {"a:b:c": "min(up)", "x:y:z": "DCGM_FI_DEV_GPU_TEMP"}
    (tmp_path / "records.yml").write_text("groups: [\n")
    ok, error = svc.reload_rules()
    assert not ok and "records.yml" in error and svc.rules.recorded.files["a:b:c"] == "min(up)"  # the old ones stay


def test_check_config_names_a_glob_that_matches_nothing(tmp_path: Path, capsys) -> None:
    (tmp_path / "alertd.yml").write_text("classify:\n  prometheus_rules: ['prom/*.yml']\n")
    assert cli_main(["check", str(ROOT / "rules"), str(tmp_path / "alertd.yml")]) == 1
    assert "alertd.yml:2:22: classify.prometheus_rules[0]: prom/*.yml: matches no file" in capsys.readouterr().out
