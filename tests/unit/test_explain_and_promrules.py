"""`alertd explain` (webhook, recording, stored incident) and `alertd check --prometheus-rules`."""
from __future__ import annotations

import io
import json
from pathlib import Path
from urllib.parse import quote_plus

import pytest

from alertd.authoring import explain, promrules
from alertd.cli.main import main as cli_main
from alertd.engine.normalize import NormalizeConfig
from testkit.builders import ROOT, shipped_rules

CORPUS = ROOT / "tests" / "fixtures" / "prometheus-rules"


def webhook(*alerts: dict) -> dict:
    return {"receiver": "alertd", "status": "firing", "alerts": list(alerts), "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://am:9093", "version": "4", "groupKey": "{}:{}",
            "truncatedAlerts": 0}


def one(name: str, labels: dict, expr: str = "", annotations: dict | None = None, fp: str = "00000000000000a1") -> dict:
    return {"status": "firing", "labels": {"alertname": name, **labels}, "annotations": annotations or {},
            "startsAt": "2026-11-30T12:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": f"http://prom:9090/graph?g0.expr={quote_plus(expr)}&g0.tab=1" if expr else "",
            "fingerprint": fp}


XID = one("GPU_Hardware_Error", {"node": "gpu-node-07", "gpu": "3", "UUID": "GPU-1", "severity": "page",
                                 "Hostname": "dcgm-exporter-x7k2p"},
          "DCGM_FI_DEV_XID_ERRORS != 0", {"summary": "gpu-node-07 gpu3: XID 79"})
POWER = one("GPUPowerDrawAtLimit", {"instance": "gpu-node-08:9400", "gpu": "1"}, "DCGM_FI_DEV_POWER_USAGE > 690",
            fp="00000000000000a2")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli_main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_explain_a_webhook_names_rule_and_evidence_for_every_field(tmp_path: Path, capsys):
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(webhook(XID, POWER)))
    code, out, _ = run(["explain", str(path), "--rules", str(ROOT / "rules")], capsys)
    assert code == 0
    first, second = out.split("\n\n")[:2]
    assert "signal  xid  Xid 79: GPU has fallen off the bus  (critical, hardware)" in first
    assert "by expression " in first and "evidence.yml:" in first and "metric DCGM_FI_DEV_XID_ERRORS" in first
    assert "Xid 79 from annotation summary 'XID 79'" in first
    assert "node    gpu-node-07  from label node" in first  # not dcgm's Hostname
    assert "gpu     index 3  uuid GPU-1  from labels UUID, gpu" in first
    assert "group   node  key node|cluster=default|node=gpu-node-07" in first
    assert "signal  other" in second and "WARNING: looks like a GPU alert (metric DCGM_FI_DEV_POWER_USAGE)" in second
    assert "node    gpu-node-08  from label instance (port stripped)" in second


def test_explain_a_recording(tmp_path: Path, capsys):
    path = tmp_path / "rec.jsonl"
    lines = [{"received_at": "2026-11-30T12:00:01Z", "body": webhook(XID)},
             {"received_at": "2026-11-30T12:00:05Z", "body": webhook(POWER)}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, _ = run(["explain", str(path)], capsys)
    assert code == 0 and out.count("fingerprint ") == 2


def test_explain_refuses_bad_input_clearly(tmp_path: Path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"alerts": [{"labels": {}}]}))
    code, _, err = run(["explain", str(path)], capsys)
    assert code == 1 and "not an Alertmanager webhook" in err
    code, _, err = run(["explain"], capsys)
    assert code == 2 and "needs a FILE" in err


def test_explain_a_stored_incident_shows_when_classification_changed():
    stored = {"id": "INC-7", "status": "open", "severity": "warning", "title": "GPU_Hardware_Error on n1",
              "key": "other|alertname=GPU_Hardware_Error|cluster=prod|node=n1", "group": "other", "signals": ["other"],
              "members": [{"fingerprint": "abc", "alertname": "GPU_Hardware_Error", "status": "firing",
                           "labels": {"alertname": "GPU_Hardware_Error", "node": "n1", "gpu": "2"},
                           "startsAt": "2026-11-30T12:00:00Z", "endsAt": None, "summary": "n1 gpu2: XID 48",
                           "generatorURL": "http://prom/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS+%21%3D+0",
                           "signal": {"kind": "other", "severity": "warning"}}]}
    out, err = io.StringIO(), io.StringIO()
    code = explain.main(file=None, incident="INC-7", rule_paths=[str(ROOT / "rules")], config=None, out=out, err=err,
                        fetch=lambda _id: stored)
    text = out.getvalue()
    assert code == 0, err.getvalue()
    assert text.startswith("INC-7  open  warning")
    assert "signal  xid  Xid 48:" in text and "when received: other" in text
    assert "group   node  key node|cluster=default|node=n1" in text


def test_prometheus_rules_map_every_style_of_the_corpus():
    rules, ncfg = shipped_rules(), NormalizeConfig()
    got = {}
    for f in sorted(CORPUS.glob("*.yml")):
        for r in promrules.classify_rules(f, rules, ncfg):
            got[r.alert] = (r.decision.signal.kind, r.decision.signal.detail if r.decision.signal.kind == "metrics_missing" else "",
                            r.xid_from, bool(r.warnings), r.runtime != "")
    assert got["GPUXidErrorReported"][:3] == ("xid", "", "annotation text, once Prometheus renders it")
    assert got["NvidiaGpuXidError"][:3] == ("xid", "", "label set by count_values in the expression")
    assert got["GPU_Hardware_Error"][0] == "xid" and got["XidOnHost"][0] == "xid"
    for name in ("GPUExporterTargetDown", "NvidiaDcgmExporterUnavailable", "gpu_exporter_missing", "DcgmScrapeDown"):
        assert got[name][:2] == ("metrics_missing", "exporter_down"), name
    for name in ("GPUNodeCordoned", "KubeNodeUnschedulable", "node_drained", "HostCordoned"):
        assert got[name][0] == "node_cordoned", name
    assert got["KubeNodeUnreachable"][0] == "node_not_ready"
    # decided by its job label once it fires; warned: `by (cluster, job, namespace, service)` names no node
    assert got["TargetDown"] == ("other", "", "", True, True)
    assert got["GPUPowerDrawAtLimit"][0] == "other" and got["GPUPowerDrawAtLimit"][3]  # GPU-looking: warned
    assert got["gpu_util_stuck_zero"][3]


def test_check_prometheus_rules_output_and_exit_codes(tmp_path: Path, capsys):
    code, out, _ = run(["check", "--prometheus-rules", str(CORPUS / "nvidia-dcgm.yml")], capsys)
    assert code == 0
    assert "GPUXidErrorReported" in out and "-> xid" in out
    assert "WARNING: looks like a GPU alert (metric DCGM_FI_DEV_POWER_USAGE)" in out
    assert out.rstrip().endswith("6 alerting rules: 5 classified, 1 other, 1 with warnings")
    code, _, _ = run(["check", "--strict", "--prometheus-rules", str(CORPUS / "nvidia-dcgm.yml")], capsys)
    assert code == 1  # a warning fails under --strict
    code, out, _ = run(["check", "--prometheus-rules", str(tmp_path / "missing.yml")], capsys)
    assert code == 1 and "cannot read Prometheus rules" in out


def test_an_unparseable_expression_is_reported(tmp_path: Path):
    f = tmp_path / "r.yml"
    f.write_text("groups:\n  - name: g\n    rules:\n      - alert: Broken\n        expr: 'DCGM_FI_DEV_GPU_TEMP{ > 1'\n")
    [r] = promrules.classify_rules(f, shipped_rules(), NormalizeConfig())
    assert r.decision.signal.kind == "other" and r.line == 4
    assert any(e.startswith("expression does not parse:") for e in r.errors)


def test_check_prometheus_rules_fails_like_promtool_and_names_file_and_line(tmp_path: Path, capsys):
    """An expression that does not parse fails the check (promtool fails it too); every line says file:line."""
    f = tmp_path / "r.yml"
    f.write_text("groups:\n  - name: g\n    rules:\n      - alert: Broken\n        expr: 'DCGM_FI_DEV_GPU_TEMP{ > 1'\n")
    code, out, _ = run(["check", "--prometheus-rules", str(f)], capsys)
    assert code == 1 and f"{f}:4: ERROR: expression does not parse:" in out, out
    code, out, _ = run(["check", "--prometheus-rules", str(CORPUS / "nvidia-dcgm.yml")], capsys)
    assert all(line.startswith(f"{CORPUS / 'nvidia-dcgm.yml'}:") for line in out.splitlines()[:-1]), out


def test_check_prometheus_rules_refuses_a_non_rule_file_and_reads_a_directory(tmp_path: Path, capsys):
    (tmp_path / "alertmanager.yml").write_text("route:\n  receiver: x\nreceivers:\n  - name: x\n")
    code, out, _ = run(["check", "--prometheus-rules", str(tmp_path / "alertmanager.yml")], capsys)
    assert code == 1 and "not a Prometheus rule file" in out and "0 alerting rules" in out
    code, out, _ = run(["check", "--prometheus-rules", str(CORPUS)], capsys)
    assert code == 0 and "site-handwritten.yml:37: gpu_util_stuck_zero" in out
    assert f"{len(list(CORPUS.glob('*.yml')))}" and out.rstrip().splitlines()[-1].startswith("35 alerting rules")


def test_check_prometheus_rules_lists_gpu_rules_unless_all(tmp_path: Path, capsys):
    f = tmp_path / "mixed.yml"
    f.write_text("groups:\n  - name: g\n    rules:\n"
                 "      - alert: KubeJobFailed\n        expr: kube_job_failed > 0\n"
                 "      - alert: GPUXid\n        expr: DCGM_FI_DEV_XID_ERRORS > 0\n"
                 "        annotations: {summary: 'Xid {{ $value }}'}\n")
    code, out, _ = run(["check", "--prometheus-rules", str(f)], capsys)
    assert code == 0 and "GPUXid" in out and "KubeJobFailed" not in out
    assert "1 other rules not GPU-related not listed: --all lists them" in out
    from alertd.authoring.check import main as check_main

    listing = io.StringIO()
    assert check_main([], listing, prometheus_rules=[str(f)], show_all=True) == 0  # `alertd check --all`
    assert f"{f}:4: KubeJobFailed" in listing.getvalue()


def test_a_whole_mask_throttle_rule_is_warned_with_its_benign_bits(capsys):
    code, out, _ = run(["check", "--prometheus-rules", str(CORPUS / "dcgm-throttle-bits.yml")], capsys)
    lines = [line for line in out.splitlines() if ":58:" in line]
    assert any("harmful hw_slowdown" in line and "benign gpu_idle" in line for line in lines), lines
    assert any("WARNING: fires on benign clock reasons too" in line and "sync_boost" in line for line in lines)
    sync = [line for line in out.splitlines() if "GPUSyncBoost" in line]
    assert sync and "other/info (sync_boost)" in sync[0]  # a benign reason alone is no thermal signal


def test_bad_evidence_rules_are_named_with_file_and_line(tmp_path: Path):
    from alertd.authoring.check import check

    f = tmp_path / "evidence.yml"
    f.write_text("evidence:\n"
                 "  expressions:\n"
                 "    - kind: xid\n"
                 "      metric: 'DCGM_FI_DEV_XID_ERRORS('\n"
                 "  annotations:\n"
                 "    xid_patterns: ['xid (\\d+)']\n")
    errors = [str(p) for p in check([f]).errors]
    assert any(":4:" in e and "invalid regex" in e for e in errors), errors
    assert any(":6:" in e and "named group (?P<xid>" in e for e in errors), errors
    f.write_text("evidence:\n  alertnames:\n    - kind: metrics_missing\n      names: [X]\n      nmes: [Y]\n")
    errors = [str(p) for p in check([f]).errors]
    assert any(":3:" in e and "'detail' is a required property" in e for e in errors), errors
    assert any("unknown key(s) 'nmes'" in e for e in errors), errors


@pytest.mark.parametrize("expr, drops", [
    ("100 * (count(up == 0) BY (cluster, job) / count(up) BY (cluster, job)) > 10", True),
    ("sum(DCGM_FI_DEV_GPU_UTIL) > 1", True),
    ("sum by (cluster, node) (up) == 0", False),
    ("max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0", False),
    ('count_values without () ("xid", DCGM_FI_DEV_XID_ERRORS > 0)', False),
    ("sum without (instance, node, Hostname, hostname, kubernetes_node) (x) > 0", True),
    ("sum by (node) (x) or sum(y)", False),
    ("8 > count by (node) (DCGM_FI_DEV_GPU_TEMP)", False),
    ("DCGM_FI_DEV_GPU_TEMP{", False),
])
def test_aggregations_that_drop_the_node(expr, drops):
    from alertd.promql.expr import drops_labels

    assert drops_labels(expr, ("node", "kubernetes_node", "Hostname", "hostname", "instance")) is drops


@pytest.mark.parametrize("expr", ["(" * 3000 + "x" + ")" * 3000, "-" * 5000 + "x", " + ".join(["x"] * 3000),
                                  "(" * 65 + "x" + ")" * 65, "-" * 40 + "x", "x" + " or x" * 600])
def test_absurd_expressions_are_an_error_not_a_crash(expr):
    """Refused before parsing: the parser's time grows steeply with nesting (seconds for these)."""
    from alertd.promql.expr import drops_labels, facts_of_expr

    facts = facts_of_expr(expr)
    assert facts.error and not facts.selectors
    assert drops_labels(expr, ("node",)) is False
