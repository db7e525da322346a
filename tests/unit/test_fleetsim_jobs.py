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


def test_a_hang_fires_three_minutes_after_the_last_active_evaluation_saying_when_that_was():
    # Stops at 7200 (on a tick: its sample still reads the interval before) and at 20005 (between ticks).
    view = job_node(m.Fact(m.STALL, 7200.0, 9000.0, "P-hang"), m.Fact(m.STALL, 20005.0, 21500.0, "P-later"))
    alerts = fired("GPUJobStalled", view)
    # last active 7200: true from the first tick past 7200 + 150 with [t - 2m, t] after the stop: 7380;
    # the sample at 9000 still reads idle, at 9030 the job computes. Last active 20010: fires at 20190.
    assert [(a[0], a[1]) for a in alerts] == [(7380.0, 9030.0), (20190.0, 21510.0)]
    assert all(a[0] - s <= 240 for a, s in zip(alerts, (7200.0, 20005.0)))
    assert [a[3]["stalled_since"] for a in alerts] == [f"{m.EPOCH + 7200:.0f}", f"{m.EPOCH + 20010:.0f}"]
    labels = alerts[0][2]
    assert (labels["namespace"], labels["owner_kind"], labels["owner_name"], labels["clique"]) == \
        ("llm-pretrain", "PyTorchJob", "llm-050", "c005")


def test_the_timing_follows_the_evaluation_interval():
    # Last active at the first tick at or after the stop, then true from the first tick past it + 150 s: the
    # window [t - 2m, t] (3 samples at 60 s ticks, 2 at 90 s) is by then past the stop.
    view = job_node(m.Fact(m.STALL, 7210.0, 9000.0, "P-hang"))
    rule = next(r for r in load_alert_rules(RULES) if r.name == "GPUJobStalled")
    for grid, first in ((Grid(60.0, 0.0), 7200.0 + 60 + 180), (Grid(90.0, 0.0), 7290.0 + 180)):
        (series,) = JOB_PREDICATES["GPUJobStalled"](view, grid)
        (inst,) = alert_instances(rule, series.labels, series.spans, series.value, grid, DAY, None, series.by_problem)
        assert inst.starts_at == first


def test_healthy_pauses_never_fire_however_long_while_the_wire_is_busy():
    pauses = [m.Pause(3600.0, 3600.0 + 14 * 60, "P-pause", m.CHECKPOINT),  # longer than the 10-minute arm
              m.Pause(9000.0, 9000.0 + 6 * 60, "P-pause", m.DATA_LOADING),
              m.Pause(12000.0, 12000.0 + 9 * 60, "P-pause", m.EVALUATION)]
    assert fired("GPUJobStalled", job_node(pauses=pauses)) == []
    # The same checkpoint on a job without network counters is a stall to the rule from 10 minutes in.
    (alert,) = fired("GPUJobStalled", job_node(pauses=pauses, counters=False))
    assert (alert[0], alert[1]) == (3600.0 + 630.0, 3600.0 + 14 * 60 + 30.0)


def test_a_hang_right_after_a_checkpoint_waits_for_the_wire_to_go_quiet():
    # Idle from 3600 (the checkpoint), silent from 4200 when its writes end: quiet from 4320, 150 s long past.
    view = job_node(m.Fact(m.STALL, 4200.0, 6000.0, "P-hang"),
                    pauses=[m.Pause(3600.0, 4200.0, "P-pause", m.CHECKPOINT)])
    (alert,) = fired("GPUJobStalled", view)
    assert alert[0] == 4320.0 and alert[3]["stalled_since"] == f"{m.EPOCH + 3600:.0f}"


def test_an_idle_job_fires_at_thirty_minutes_whatever_its_network_does():
    pause = m.Pause(3600.0, 3600.0 + 40 * 60, "P-long", m.DATA_LOADING)
    (alert,) = fired("GPUJobStalled", job_node(pauses=[pause]))
    assert alert[0] == 3600.0 + 1830.0


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
