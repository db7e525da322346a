"""From the fleet's state to the webhooks alertd receives, with the ground truth filled in."""
from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from alertd.core.model import HELD_BY

from bench.fleetsim import model as m
from bench.fleetsim.alertmanager import Dispatcher, Flush, RouteConfig
from bench.fleetsim.job_predicates import JOB_PREDICATES
from bench.fleetsim.predicates import PREDICATES, NodeView, Series
from bench.fleetsim.prometheus import Instance, alert_instances, group_grid, sends
from bench.fleetsim.reconcile import DEFAULTS as RECONCILE_DEFAULTS, reconcile_webhooks
from bench.fleetsim.rules import SHIPPED, AlertRule, load_alert_rules

START = m.START
RECONCILE_EVERY = RECONCILE_DEFAULTS.reconcile_interval.total_seconds()
LEFT_OUT = frozenset({"Watchdog"})  # always firing, about no node: its own route at real sites
ALL_PREDICATES = {**PREDICATES, **JOB_PREDICATES}


class MissingPredicate(LookupError):
    """An alerting rule of the rule file has no predicate in predicates.PREDICATES."""


@dataclass(slots=True)
class Delivery:
    """What one run hands to alertd, and how it came about."""

    webhooks: list[tuple[datetime, dict[str, Any]]]
    flushes: list[Flush]
    instances: list[Instance]
    rules: list[AlertRule]

    def stats(self) -> dict[str, int]:
        """How Alertmanager's cadence treated the alerts Prometheus fired, and what reconciliation took in
        (``api_only``: alerts no webhook of Alertmanager ever carried)."""
        first: dict[tuple[str, str], str] = {}
        for f in self.flushes:
            for a in f.body["alerts"]:
                first.setdefault((a["fingerprint"], a["startsAt"]), a["status"])
        held = {(a["fingerprint"], a["startsAt"]) for _, b in self.webhooks if b["receiver"] == HELD_BY
                for a in b["alerts"]}
        return {
            "alerts_fired": len(self.instances),
            "alerts_delivered": len(first),
            "first_seen_resolved": sum(1 for status in first.values() if status == "resolved"),
            "never_delivered": max(0, len(self.instances) - len(first)),
            "webhooks": len(self.webhooks),
            "ha_copies": sum(1 for f in self.flushes if f.peer),
            "taken_from_api": len(held),
            "api_only": len(held - first.keys()),
        }


def check_rules(rules: list[AlertRule]) -> None:
    missing = sorted({r.name for r in rules} - set(ALL_PREDICATES))
    if missing:
        raise MissingPredicate("alerting rules without a predicate in bench/fleetsim/predicates.py or "
                               f"job_predicates.py: {', '.join(missing)}")


def evaluate(fleet: m.Fleet, rules: list[AlertRule], interval: float, lookback: float = 0.0) -> list[Instance]:
    """Every alert Prometheus would fire over the run, each credited to its problem."""
    check_rules(rules)
    out: list[Instance] = []
    grids = {r.group: group_grid(r.group, interval) for r in rules}
    for node in fleet.nodes:
        if not node.facts and node.job is None:
            continue
        view = NodeView(node, lookback)
        for rule in rules:
            if rule.name in LEFT_OUT:
                continue
            grid = grids[rule.group]
            for series in _one_per_label_set(ALL_PREDICATES[rule.name](view, grid)):
                out.extend(alert_instances(rule, series.labels, series.spans, series.value, grid, fleet.horizon,
                                           series.queried, series.by_problem))
    for inst in out:
        p = fleet.problems[inst.problem]
        p.alerts.append((inst.fingerprint, inst.starts_at))
        p.spells.append((inst.starts_at, inst.resolved_at if inst.resolved_at is not None else fleet.horizon))
    return out


def deliver(fleet: m.Fleet, route: RouteConfig, seed: int, *, interval: float = 30.0,
            rule_file: Path | str = SHIPPED, start: datetime = START, lookback: float = 0.0,
            job_rule_file: Path | str | None = None, reconcile_every: float = RECONCILE_EVERY) -> Delivery:
    """``lookback``: seconds series of a failed scrape stay visible (0: staleness markers end them at once).
    ``job_rule_file``: the job rules (gpu-job-alerts.yml), evaluated the same way;
    ``reconcile_every``: alertd's reconcile_interval, seconds (0: no reconciliation, webhooks only)."""
    rules = load_alert_rules(rule_file) + (load_alert_rules(job_rule_file) if job_rule_file else [])
    instances = evaluate(fleet, rules, interval, lookback)
    grids = {r.group: group_grid(r.group, interval) for r in rules}
    puts = [(at, inst, resolved) for inst in instances for at, resolved in sends(inst, grids[inst.rule.group])]
    puts.sort(key=lambda x: x[0])
    rng = random.Random(f"{seed}/{route.name}")
    dispatcher = Dispatcher(route, start, rng, cleanup_offset=rng.uniform(0.0, 30.0))
    flushes = dispatcher.run(puts, fleet.horizon + 3600.0)
    sent = [(f.at + rng.uniform(0.003, 0.040), f.body) for f in flushes]
    if reconcile_every:
        polls = random.Random(f"{seed}/{route.name}/reconcile")
        sent += reconcile_webhooks(instances, flushes, route, start, fleet.horizon, interval=reconcile_every,
                                   offset=polls.uniform(0.0, reconcile_every))
        sent.sort(key=lambda x: x[0])
    webhooks = []
    by_alert = {(fp, round(t, 3)): p.id for p in fleet.problems.values() for fp, t in p.alerts}
    nodes_received: dict[str, dict[str, float]] = {}  # problems page-worthy by extent: node -> first received
    for received, body in sent:
        webhooks.append((start + timedelta(seconds=received), body))
        for a in body["alerts"]:
            at = _seconds(start, a["startsAt"])
            pid = by_alert.get((a["fingerprint"], at))
            if pid is not None:
                p = fleet.problems[pid]
                if p.first_received is None or received < p.first_received:
                    p.first_received = received
                if p.extent_nodes:
                    nodes_received.setdefault(pid, {}).setdefault(a["labels"].get("node", ""), received)
    for pid, by_node in nodes_received.items():
        p = fleet.problems[pid]
        times = sorted(by_node.values())
        p.extent_received = times[p.extent_nodes - 1] if len(times) >= p.extent_nodes else None
    return Delivery(webhooks, flushes, instances, rules)


def _one_per_label_set(found: list[Series]) -> list[Series]:
    """A predicate may give one label set several series (two problems heating one GPU); Prometheus has one
    alert per label set (rules/alerting.go: ``active`` keyed by the labels' hash), whose spells all of them
    make, so their spans are evaluated together: a new spell ends the resolved re-sends of the one before."""
    merged: dict[tuple[tuple[str, str], ...], Series] = {}
    for series in found:
        key = tuple(sorted(series.labels.items()))
        if key in merged:
            merged[key] = Series(merged[key].labels, sorted(merged[key].spans + series.spans), merged[key].value,
                                 merged[key].queried, {**merged[key].by_problem, **series.by_problem})
        else:
            merged[key] = series
    return list(merged.values())


def _seconds(start: datetime, text: str) -> float:
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round((when - start).total_seconds(), 3)
