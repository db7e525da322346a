"""One scored run: a fleet from a seed, delivered through one route, replayed through alertd, scored."""
from __future__ import annotations

import dataclasses
import time
from datetime import timedelta
from dataclasses import dataclass
from typing import Any

from alertd.authoring.replay import Recording, as_json, replay
from alertd.authoring.virtual import build_router, load_rule_set
from alertd.rules.shipped import default_rule_paths
from alertd.rules.ruleset import RuleSet

from bench.fleetsim.alertmanager import ROUTES
from bench.fleetsim.faults import Rates, build_fleet
from bench.fleetsim.model import Fleet
from bench.fleetsim.job_score import JobScore, job_score
from bench.fleetsim.score import Score, score
from bench.fleetsim.sim import RECONCILE_EVERY, START, Delivery, deliver
from bench.fleetsim.rules import JOB_RULES, SHIPPED


@dataclass(slots=True)
class RunResult:
    seed: int
    route: str
    score: Score
    fleet: Fleet
    delivery: Delivery
    report: dict[str, Any]
    simulate_s: float
    replay_s: float
    jobs: JobScore | None = None  # --jobs: the job and domain kinds


def unmuted(rules: RuleSet) -> RuleSet:
    """The rules with the routes' mute and active windows taken off.

    Mute windows make paging depend on the hour (the shipped errors route is
    quiet at night and at weekends); the simulation scores correlation and
    paging decisions, so it pages at every hour.
    """
    routing = rules.routing
    if routing is None:
        return rules
    routes = tuple(dataclasses.replace(r, mute=(), active=()) for r in routing.routes)
    return dataclasses.replace(rules, routing=dataclasses.replace(routing, routes=routes))


def rules_reopen_window(rules: RuleSet) -> float:
    """The correlation's reopen window when the rules have one, else the hold-down."""
    corr = rules.correlation
    window = getattr(corr, "reopen_window", None) or getattr(corr, "reopen", None) or corr.hold_down
    if isinstance(window, timedelta):
        return window.total_seconds()
    return float(window)


def run_one(*, nodes: int, days: float, seed: int, route: str, interval: float = 30.0,
            rule_paths: list[str] | None = None, prometheus_rules: str = str(SHIPPED),
            rates: Rates = Rates(), dup_probability: float | None = None,
            reopen_window: float | None = None, lookback: float = 0.0, job_rules: str | None = None,
            reconcile_every: float = RECONCILE_EVERY) -> RunResult:
    """``job_rules``: the job rules file (default the shipped one, when ``rates.jobs``)."""
    t0 = time.perf_counter()
    fleet = build_fleet(nodes, days, seed, rates)
    cfg = ROUTES[route]
    if dup_probability is not None:
        cfg = dataclasses.replace(cfg, dup_probability=dup_probability)
    jobs_file = (job_rules or str(JOB_RULES)) if rates.jobs else None
    delivery = deliver(fleet, cfg, seed, interval=interval, rule_file=prometheus_rules, lookback=lookback,
                       job_rule_file=jobs_file, reconcile_every=reconcile_every)
    rules = unmuted(load_rule_set(rule_paths or default_rule_paths()))
    t1 = time.perf_counter()
    res = replay(Recording(webhooks=delivery.webhooks), rules, router=build_router(rules), source=f"seed {seed}")
    report = as_json(res)
    t2 = time.perf_counter()
    window = reopen_window if reopen_window is not None else rules_reopen_window(rules)
    sc = score(report, fleet.problems, START, window)
    jobs = job_score(report, fleet, delivery.instances, START) if rates.jobs else None
    return RunResult(seed, route, sc, fleet, delivery, report, t1 - t0, t2 - t1, jobs)
