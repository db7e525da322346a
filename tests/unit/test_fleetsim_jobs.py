"""bench/fleetsim's jobs: a predicate per job rule, healthy pauses that never fire, the spell's own values in
its annotations, and jobs that leave the rest of a seed's fleet as it was."""
from __future__ import annotations


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


def job_node(*facts: m.Fact, pauses: list[tuple[float, float, str]] | None = None) -> NodeView:
    n = m.Node("h100-b-r070-n08", "h100-b", 1128, 70, topology={"rack": "r070", "clique": "c005"})
    n.job = m.Job("llm-pretrain", "PyTorchJob", "llm-050", [n.name], pauses or [])
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


def test_a_stall_fires_ten_minutes_in_saying_when_the_job_last_computed_and_a_pause_never_does():
    view = job_node(m.Fact(m.STALL, 7200.0, 9000.0, "P-hang"), m.Fact(m.STALL, 20000.0, 21500.0, "P-later"),
                    pauses=[(3600.0, 3600.0 + 540.0, "P-pause")])  # a 9-minute checkpoint
    alerts = fired("GPUJobStalled", view)
    assert [(a[0], a[1]) for a in alerts] == [(7800.0, 9000.0), (20610.0, 21510.0)]
    assert [a[3]["stalled_since"] for a in alerts] == [f"{m.EPOCH + 7200:.0f}", f"{m.EPOCH + 20000:.0f}"]
    labels = alerts[0][2]
    assert (labels["namespace"], labels["owner_kind"], labels["owner_name"], labels["clique"]) == \
        ("llm-pretrain", "PyTorchJob", "llm-050", "c005")


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
