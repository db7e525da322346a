"""Public-shaped GPU rule sets, the alerts rendered by promtool from firing series, read by alertd.

tests/fixtures/gpu-rule-corpus: dcgm-exporter on Kubernetes (GPU Operator 4.x, Helm 3.x, kube-prometheus-stack,
a multilingual site) and in Docker (Compose, host network, bridge by address), nvidia_gpu_exporter, OpenPAI, IBM
Autopilot and the GPU Operator's own metrics. What the done-when of this work asks of them: >= 95 % of the
GPU rules classified right, no alert on a wrong node, every GPU rule whose alerts end with no node named
by `check`, no warning on a rule the site declared not GPU health, promtool and check agreeing on every
file's exit code. bench/rule_corpus.py prints the same measurement as a table (docs/rules.md).
"""
from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import yaml

from alertd.engine.pipeline import Engine
from alertd.promql.recording import rule_groups
from alertd.rules.ruleset import load_rules
from testkit.prom import needs_promtool
from testkit.rule_corpus import CORPUS, ROOT, SITE_RULES, render, run_corpus, table, webhook_alert

EXPORTERS = {"dcgm-exporter on Kubernetes", "dcgm-exporter in Docker", "dcgm-exporter 1.x", "nvidia_gpu_exporter",
             "OpenPAI nvidiasmi_*", "IBM Autopilot", "GPU Operator"}


@needs_promtool
def test_the_rendered_corpus_meets_the_bar() -> None:
    outcomes = run_corpus()
    rows = table(outcomes)
    total = rows[-1]
    print("\n" + "\n".join(f"{vars(r)}" for r in rows))
    assert {r.exporter for r in rows[:-1]} == EXPORTERS
    assert all(r.fired for case in outcomes for r in case.rules), "a fixture rule did not fire"
    assert total.right >= 0.95 * total.gpu_rules, [(c.name, r.alert, r.why) for c in outcomes for r in c.rules
                                                   if r.gpu_health and not r.right]
    assert total.wrong_node == 0, [(c.name, r.alert, r.why) for c in outcomes for r in c.rules if r.wrong_node]
    assert total.unknown_named == total.node_unknown_rules > 0
    assert total.declared > 0 and total.declared_warned == 0
    assert total.exit_codes_agree == total.files == len(list(CORPUS.glob("*.rules.yml")))


@needs_promtool
def test_check_and_explain_read_every_rule_alike() -> None:
    """`alertd check --prometheus-rules` on each file and `alertd explain` on the alerts promtool rendered from
    it: the same kind and detail for every rule, and for an Xid rule the same answer to "is the code known"."""
    outcomes = run_corpus()
    differ = [(c.name, r.alert, r.checked, sorted(r.explained)) for c in outcomes for r in c.rules if not r.agree]
    assert not differ, differ
    assert sum(len(c.rules) for c in outcomes) == table(outcomes)[-1].check_explain_agree > 90


@needs_promtool
def test_a_wrong_expectation_is_caught(tmp_path: Path) -> None:
    """The measurement can fail: a case expecting another host counts its alerts as on a wrong node."""
    for suffix in (".rules.yml", ".series.yml"):
        shutil.copy(CORPUS / f"dcgm-docker-bridge{suffix}", tmp_path / f"dcgm-docker-bridge{suffix}")
    series = tmp_path / "dcgm-docker-bridge.series.yml"
    series.write_text(series.read_text().replace("node: 10.0.0.5}", "node: gpu-host-5}")
                      .replace("GPUThermalViolation: {kind: thermal", "GPUThermalViolation: {kind: ecc"))
    (case,) = run_corpus(tmp_path)
    by_rule = {r.alert: r for r in case.rules}
    assert by_rule["GPUXidErrorDetected"].wrong_node == 1 and not by_rule["GPUThermalViolation"].right


@needs_promtool
def test_a_docker_hosts_xid_and_exporter_down_are_one_incident_with_the_refusals_shown(tmp_path: Path) -> None:
    """dcgm-exporter in Compose without NODE_NAME: Hostname is the container ID, instance the service name.
    Neither is taken as a node; the target's alerts share one incident, its subject showing why."""
    rule_file = CORPUS / "dcgm-docker-compose.rules.yml"
    case = yaml.safe_load((CORPUS / "dcgm-docker-compose.series.yml").read_text())
    rules = {r["alert"]: r for g in rule_groups(yaml.safe_load(rule_file.read_text())) for r in g["rules"]}
    fired = render(rule_file, case, tmp_path)
    alerts = [webhook_alert(rules[name], fired[name][0], i) for i, name in enumerate(["GPUXidError", "DcgmExporterDown"])]
    engine = Engine(load_rules([SITE_RULES, ROOT / "rules"]))
    changes = engine.ingest(alerts, datetime.now(timezone.utc))
    (incident,) = {id(c.incident): c.incident for c in changes}.values()
    subjects = [a.subject for a in alerts]
    assert {s.node for s in subjects} == {""} and {s.origin for s in subjects} == {"target dcgm-exporter:9400"}
    assert subjects[0].node_refused.startswith("Hostname=5f3c9a1e7b2d: a container ID")
    assert "instance=dcgm-exporter:9400: an exporter's service" in subjects[1].node_refused
    assert set(incident.signals) == {"xid", "metrics_missing"} and incident.xids == [31]
