"""The simulation's page-worthy flags agree with what alertd's shipped rules make of the alerts.

The site's intent is alertd's rules: the Xid catalog, rules/signals.yml and
the alert rules' severity labels decide a signal's severity, and
rules/routing.yml pages critical and error. A problem is page-worthy when one
of the alerts it causes by itself (before anybody acts on it) is classified
critical or error, or when it is a storm whose extent (nodes and GPUs) reaches an escalate step of its
event that is (rules/correlation.yml). Maintenance is never page-worthy, whatever its reboot raises.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from alertd.authoring.virtual import load_rule_set
from alertd.rules.shipped import default_rule_paths
from alertd.engine.classify import classify
from alertd.core.matchers import match_all
from alertd.core.model import Alert, Signal
from alertd.rules.ruleset import StormEvent
from alertd.rules.storm_says import escalated
from alertd.engine.normalize import NormalizeConfig

from bench.fleetsim.faults import STORM_NODES, UNOBSERVED, Rates, build_fleet
from bench.fleetsim.rules import load_alert_rules
from bench.fleetsim.sim import evaluate

PLANNED = {"maintenance", "host_maintenance"}
START = datetime(2026, 11, 2, tzinfo=timezone.utc)


def test_page_worthy_means_a_critical_or_error_signal_of_the_problem_itself():
    fleet = build_fleet(512, 14, 5, Rates(flaps=400, exporter_hangs=100))
    rules, ncfg = load_rule_set(default_rule_paths()), NormalizeConfig()
    own: dict[str, set[str]] = {}
    spans: dict[str, set[tuple[str, str, Signal]]] = {}  # a storm's GPUs: node, GPU, what its alert is
    for inst in evaluate(fleet, load_alert_rules(), 30.0):
        p = fleet.problems[inst.problem]
        if p.acted_at is not None and inst.starts_at >= p.acted_at:
            continue
        alert = Alert(inst.fingerprint, "firing", inst.labels, inst.annotations,
                      START + timedelta(seconds=inst.starts_at), None, inst.rule.generator_url)
        signal = classify(alert, rules, ncfg)
        own.setdefault(p.id, set()).add(signal.severity)
        if p.storm:
            spans.setdefault(p.id, set()).add((inst.labels.get("node", ""), inst.labels.get("gpu", ""), signal))
    for pid, span in spans.items():
        own[pid].add(storm_severity(rules.correlation.storm.events, span))
    causes = {p.cause for p in fleet.problems.values()}
    assert {"faulty_gpu", "gpu_hbm3", "flap_xid", "flap_nvlink", "storm_driver_rollout"} <= causes
    wrong = []
    for p in fleet.problems.values():
        if p.cause in UNOBSERVED or p.id not in own:
            continue
        worthy = p.cause not in PLANNED and bool(own[p.id] & {"critical", "error"})
        if worthy != p.page_worthy:
            wrong.append(f"{p.id}: page_worthy={p.page_worthy}, its alerts classify as {sorted(own[p.id])}")
    assert not wrong, "\n".join(wrong)


def storm_severity(events: tuple[StormEvent, ...], span: set[tuple[str, str, Signal]]) -> str:
    """The most severe escalate step a storm's alerts reach, per event, by the nodes and GPUs they name."""
    out = ""
    for event in events:
        mine = {(node, gpu) for node, gpu, sig in span
                if match_all(event.matchers, {"signal": sig.kind, "category": sig.category, "severity": sig.severity})}
        step = escalated(event.escalate, len({node for node, _ in mine}), len(mine)) if mine else None
        out = step.severity if step is not None and (not out or step.severity == "critical") else out
    return out


def test_a_storm_page_worthy_by_its_extent_counts_from_the_nodes_that_make_it_one():
    rules = load_rule_set(default_rule_paths())
    [thermal] = [e for e in rules.correlation.storm.events if e.name == "thermal"]
    error = next(s for s in thermal.escalate if s.severity in ("error", "critical"))
    assert STORM_NODES == max(rules.correlation.storm.min_nodes, error.nodes)
