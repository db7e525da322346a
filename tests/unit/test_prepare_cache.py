"""The engine remembers each alert's subject and signal by fingerprint; these are the ways that memory
could show a stale answer: changed annotations, a changed expression, a rule reload, and its bound."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import alertd.engine.pipeline as pipeline
from alertd.rules.ruleset import load_rules
from testkit.builders import ROOT, alert, at, engine, shipped_rules, xid

SITE_RULE = """signals:
  - kind: ecc
    match: ['alertname="SiteGpuFault"']
    severity: critical
"""


def test_an_alert_sent_again_unchanged_gets_what_was_worked_out_before():
    eng = engine()
    first = eng.prepare(xid(79))
    again = eng.prepare(xid(79))
    assert again.signal is first.signal and again.subject is first.subject
    assert again.signal.xid == 79 and again.subject.node == "gpu-node-1"


def test_changed_annotations_under_the_same_fingerprint_are_classified_again():
    """The fingerprint covers labels only: an Xid named later in the text must still upgrade the signal."""
    eng = engine()
    before = eng.prepare(alert("GPUXidError", node="gpu-node-1", gpu="0"))
    named = alert("GPUXidError", node="gpu-node-1", gpu="0", annotations={"xid": "48"})
    assert named.fingerprint == before.fingerprint
    assert before.signal.xid is None
    assert eng.prepare(named).signal.xid == 48
    for text in ("disk 91% full", "disk 97% full"):  # {{ $value }} in a description: each text is shown
        assert eng.prepare(alert("DiskFull", node="n1", annotations={"description": text})).signal.meaning == text


def test_a_changed_expression_is_classified_again():
    eng = engine()
    plain = eng.prepare(alert("SiteTempHigh", node="n1", gpu="0"))
    assert plain.signal.kind == "other"
    with_expr = replace(alert("SiteTempHigh", node="n1", gpu="0"),
                        generator_url="http://prometheus:9090/graph?g0.expr=DCGM_FI_DEV_GPU_TEMP%20%3E%2085")
    assert eng.prepare(with_expr).signal.kind == "thermal"


def test_a_rule_reload_forgets_what_the_old_rules_decided(tmp_path: Path):
    eng = engine()
    assert eng.prepare(alert("SiteGpuFault", node="n1", gpu="0")).signal.kind == "other"
    site = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", site, ignore=shutil.ignore_patterns("tests"))
    (site / "00-site.yml").write_text(SITE_RULE)
    eng.set_rules(load_rules([site]))
    again = eng.prepare(alert("SiteGpuFault", node="n1", gpu="0"))
    assert (again.signal.kind, again.signal.severity) == ("ecc", "critical")


def test_the_memory_is_bounded_and_forgets_the_oldest_first(monkeypatch):
    monkeypatch.setattr(pipeline, "PREPARED_LIMIT", 3)
    eng = pipeline.Engine(shipped_rules())
    alerts = [xid(79, node=f"n{i}") for i in range(5)]
    for a in alerts:
        eng.prepare(a)
    assert len(eng._prepared) == 3
    assert list(eng._prepared) == [a.fingerprint for a in alerts[2:]]
    eng.prepare(xid(79, node="n4"))  # known: stays, nothing else goes
    assert list(eng._prepared) == [a.fingerprint for a in alerts[2:]]


def test_ingest_through_the_memory_keeps_one_incident_per_node():
    eng = engine()
    for round_ in range(3):
        eng.ingest([xid(79, node=f"n{i}", gpu=str(g)) for i in range(4) for g in range(2)], at(round_ * 60))
    assert len(eng.state.incidents) == 4
    assert all(len(inc.members) == 2 for inc in eng.state.incidents.values())
