"""bench/fleetsim's jobs: a predicate per job rule, the stall rule's three arms with Prometheus's timing,
healthy pauses that never fire, the spell's own values in its annotations, and jobs that leave the rest of a
seed's fleet as it was."""
from __future__ import annotations


import re

import yaml

from bench.fleetsim import job_predicates as jp
from bench.fleetsim import model as m
from bench.fleetsim.faults import Rates, build_fleet
from bench.fleetsim.job_predicates import JOB_PREDICATES
from bench.fleetsim.predicates import Grid, NodeView
from bench.fleetsim.prometheus import alert_instances
from bench.fleetsim.rules import JOB_RULES, load_alert_rules
from bench.fleetsim.sim import check_rules

GRID = Grid(30.0, 0.0)
DAY = 86400.0
RULES = JOB_RULES


def job_node(*facts: m.Fact, pauses: list[m.Pause] | None = None, counters: bool = True) -> NodeView:
    n = m.Node("h100-b-r070-n08", "h100-b", 1128, 70, topology={"rack": "r070", "clique": "c005"})
    n.job = m.Job("llm-pretrain", "PyTorchJob", "llm-050", [n.name], pauses or [], counters)
    n.facts.extend(facts)
    return NodeView(n)


def fired(name: str, view: NodeView) -> list[tuple[float, float | None, dict[str, str], dict[str, str]]]:
    rule = next(r for r in load_alert_rules(RULES) if r.name == name)
    out = []
    for s in JOB_PREDICATES[name](view, GRID):
        for i in alert_instances(rule, s.labels, s.spans, s.value, GRID, DAY, s.queried, s.by_problem):
            out.append((i.starts_at, i.resolved_at, i.labels, i.annotations))
    return out


def test_every_alerting_rule_of_the_job_rules_has_a_predicate():
    names = {r.name for r in load_alert_rules(RULES)}
    assert {"GPUJobStalled", "GPUStraggler", "GPUTelemetryQuiet", "NodeInfiniBandPortDown"} <= names
    check_rules(load_alert_rules(RULES))


def stall_alerts(view: NodeView, grid: Grid = GRID) -> list[tuple[float, float | None, float]]:
    """(fired, resolved, last active evaluation) of each GPUJobStalled spell."""
    rule = next(r for r in load_alert_rules(RULES) if r.name == "GPUJobStalled")
    out = []
    for s in JOB_PREDICATES["GPUJobStalled"](view, grid):
        for i in alert_instances(rule, s.labels, s.spans, s.value, grid, DAY, s.queried, s.by_problem):
            out.append((i.starts_at, i.resolved_at, float(i.annotations["stalled_since"]) - m.EPOCH))
    return out


def test_a_hang_fires_within_three_and_a_half_minutes_of_its_stop_saying_when_it_last_computed():
    # Whatever the stop's phase against the scrapes and the evaluations (30 s each): the last active evaluation
    # is the one before the last node's first idle sample, up to an evaluation plus a scrape after the stop;
    # the rule fires on the first evaluation past it + 120 s, and resolves once the job computes again.
    for k in range(24):
        stop = 7200.0 + k * 1.3
        (at, resolved, last), = stall_alerts(job_node(m.Fact(m.STALL, stop, stop + 1800.0, "P-hang")))
        assert stop <= last < stop + 60.0 and last % 30.0 == 0.0
        assert 120.0 < at - last <= 150.0 and at - stop < 210.0
        assert resolved is not None and stop + 1800.0 < resolved <= stop + 1800.0 + 60.0
    alerts = fired("GPUJobStalled", job_node(m.Fact(m.STALL, 7200.0, 9000.0, "P-hang")))
    labels = alerts[0][2]
    assert (labels["namespace"], labels["owner_kind"], labels["owner_name"], labels["clique"]) == \
        ("llm-pretrain", "PyTorchJob", "llm-050", "c005")


def test_the_timing_follows_the_evaluation_interval():
    view = job_node(m.Fact(m.STALL, 7210.0, 9000.0, "P-hang"))
    for iv in (60.0, 90.0):
        (fired, _, last), = stall_alerts(view, Grid(iv, 0.0))
        assert 7210.0 <= last < 7210.0 + 2 * iv and 120.0 < fired - last <= 120.0 + iv


def test_healthy_pauses_never_fire_however_long_while_the_wire_is_busy():
    pauses = [m.Pause(3600.0, 3600.0 + 14 * 60, "P-pause", m.CHECKPOINT),  # longer than the 10-minute arm
              m.Pause(9000.0, 9000.0 + 6 * 60, "P-pause", m.DATA_LOADING),
              m.Pause(12000.0, 12000.0 + 9 * 60, "P-pause", m.EVALUATION)]
    assert stall_alerts(job_node(pauses=pauses)) == []
    # The same checkpoint on a job without network counters is a stall to the rule from 10 minutes in.
    (fired, resolved, _), = stall_alerts(job_node(pauses=pauses, counters=False))
    assert 600.0 < fired - 3600.0 <= 690.0 and resolved is not None and 0.0 < resolved - (3600.0 + 840.0) <= 60.0


def test_a_hang_right_after_a_checkpoint_waits_for_the_wire_to_go_quiet():
    # Idle from 3600 (the checkpoint), silent from 4200 when its writes end: quiet once each node's last sample
    # of the writes (at most a scrape before 4200) has left the 2-minute window.
    view = job_node(m.Fact(m.STALL, 4200.0, 6000.0, "P-hang"),
                    pauses=[m.Pause(3600.0, 4200.0, "P-pause", m.CHECKPOINT)])
    (fired, _, last), = stall_alerts(view)
    assert 4200.0 + 90.0 < fired <= 4200.0 + 150.0 and 3600.0 <= last < 3660.0


def test_an_idle_job_fires_at_thirty_minutes_whatever_its_network_does():
    (fired, _, _), = stall_alerts(job_node(pauses=[m.Pause(3600.0, 3600.0 + 40 * 60, "P-long", m.DATA_LOADING)]))
    assert 1800.0 < fired - 3600.0 <= 1890.0


def test_the_predicate_mirrors_the_rule_files_arms():
    """The thresholds the predicate uses are the rule's: a change to one without the other fails here."""
    doc = yaml.safe_load(RULES.read_text())
    rules = {r.get("alert") or r.get("record"): r for g in doc["groups"] for r in g["rules"]}
    expr = " ".join(rules["GPUJobStalled"]["expr"].split())
    idle = sorted(float(x) for x in re.findall(r"last_active_time\[6h\]\) < time\(\) - (\d+)", expr))
    assert idle == [jp.IDLE_QUIET, jp.IDLE_BLIND, jp.IDLE_ANY]
    assert float(re.search(r"max_rate2m < ([0-9.e]+)\)", expr).group(1)) == jp.QUIET_BYTES  # type: ignore[union-attr]
    windows = set(re.findall(r"\[(\w+)\]\)", rules["node:network_bytes:rate2m"]["expr"]))
    assert windows == {"2m"} and jp.RATE_WINDOW == 120.0


def test_a_straggler_says_its_reading_and_its_jobs_median():
    slow = m.Fact(m.SLOW, 1000.0, 4600.0, "P-slow", gpu=3, value=0.4659, label="tensor_active")
    (start, _, labels, notes), = fired("GPUStraggler", job_node(slow))
    assert start >= 1000.0 + 900.0 and labels["gpu"] == "3" and labels["metric"] == "tensor_active"
    assert (notes["value"], notes["job_median"]) == ("0.41", "0.88")


def test_a_port_down_names_its_device_and_the_job_its_node_runs():
    (_, _, labels, _), = fired("NodeInfiniBandPortDown", job_node(m.Fact(m.IB_DOWN, 100.0, 900.0, "P", value=2)))
    assert (labels["device"], labels["port"], labels["owner_name"]) == ("mlx5_2", "1", "llm-050")


def test_jobs_leave_the_rest_of_a_seeds_fleet_as_it_was():
    plain, with_jobs = build_fleet(2048, 7, 3), build_fleet(2048, 7, 3, Rates(jobs=True))
    before = {p.id: (p.cause, p.nodes, p.start) for p in plain.problems.values()}
    after = {p.id: (p.cause, p.nodes, p.start) for p in with_jobs.problems.values() if p.id in before}
    assert after == before
    causes = {p.cause for p in with_jobs.problems.values()} - {p.cause for p in plain.problems.values()}
    assert {"healthy_pauses", "straggler", "clique_nvlink"} <= causes
    assert with_jobs.jobs and all(len(j.nodes) >= 4 for j in with_jobs.jobs)
