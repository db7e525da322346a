"""Prometheus's rule evaluation and alert sending, on the evaluation grid.

Per rule and series (rules/alerting.go, AlertingRule.Eval): an expression true
at an evaluation makes the alert pending (ActiveAt); it fires at the first
evaluation with ``ts - ActiveAt >= for`` (FiredAt, which becomes the
Alertmanager alert's startsAt); a pending alert whose expression turns false is
dropped; a firing one stays firing for ``keep_firing_for`` after its
expression turned false (the first false evaluation starts the count), then
resolves (ResolvedAt). A resolved alert is kept 15 minutes and replaced by a
new one when the expression is true again.

Sending (sendAlerts, needsSending): a firing alert at once and again whenever
``LastSentAt + resend_delay < ts``; a resolved one at its resolving evaluation
and, while kept, on the same resend schedule. Firing re-sends change nothing
in Alertmanager and are not emitted; resolved re-sends are (each one puts the
alert into its aggregation group again).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

from bench.fleetsim.intervals import Span
from bench.fleetsim.labelset import fingerprint
from bench.fleetsim.predicates import Grid
from bench.fleetsim.rules import AlertRule, expand

RESOLVED_RETENTION = 900.0
SEND_LATENCY = 0.004  # evaluation to Alertmanager's API, seconds


@dataclass(slots=True)
class Instance:
    """One alert as Prometheus sends it: one firing spell of one series."""

    rule: AlertRule
    labels: dict[str, str]
    fingerprint: str
    annotations: dict[str, str]
    active_at: float
    starts_at: float          # FiredAt
    resolved_at: float | None  # None: still firing at the end of the run
    problem: str
    retained_until: float = 0.0  # resolved re-sends stop here (retention, or a new spell of the series)


def group_grid(group: str, interval: float) -> Grid:
    """Each rule group is evaluated on its own offset within the interval (Prometheus hashes the group)."""
    return Grid(interval, (zlib.crc32(group.encode()) % 997) / 997.0 * interval)


def _tick_ranges(spans: list[Span], grid: Grid, horizon: float) -> list[tuple[int, int, str]]:
    """Spans as ranges of evaluation indexes [a, b] at which the expression is true, merged."""
    iv, off = grid.interval, grid.offset
    ranges: list[tuple[int, int, str]] = []
    for s, e, p in sorted(spans):
        a = math.ceil((s - off) / iv)
        b = math.ceil((min(e, horizon) - off) / iv) - 1
        if b < a:
            continue
        if ranges and a <= ranges[-1][1] + 1:
            if b > ranges[-1][1]:
                ranges[-1] = (ranges[-1][0], b, ranges[-1][2])
        else:
            ranges.append((a, b, p))
    return ranges


def alert_instances(rule: AlertRule, labels: dict[str, str], spans: list[Span], value: float, grid: Grid,
                    horizon: float, queried: float | None = None,
                    by_problem: dict[str, float] | None = None) -> list[Instance]:
    """The firing spells of one series of one rule (see the module doc)."""
    iv, off = grid.interval, grid.offset
    hold = math.ceil(rule.hold / iv - 1e-9)
    keep = math.ceil(rule.keep_firing_for / iv - 1e-9)
    full = {**labels, **rule.labels, "alertname": rule.name}
    fp = fingerprint(full)
    values = by_problem or {}
    out: list[Instance] = []
    resolve_tick = -1
    for a, b, problem in _tick_ranges(spans, grid, horizon):
        if out and out[-1].resolved_at is not None and a <= resolve_tick:
            resolve_tick = b + 1 + keep  # still kept firing: the same alert goes on
            out[-1].resolved_at = off + resolve_tick * iv
            continue
        fire = a + hold
        if fire > b:
            continue  # pending only
        if out:
            out[-1].retained_until = min(out[-1].retained_until, off + a * iv - 0.001)
        resolve_tick = b + 1 + keep
        resolved = off + resolve_tick * iv
        annotations = {k: expand(v, full, values.get(problem, value), queried) for k, v in rule.annotations.items()}
        out.append(Instance(rule, full, fp, annotations, off + a * iv, off + fire * iv,
                            resolved if resolved < horizon else None, problem,
                            retained_until=resolved + RESOLVED_RETENTION))
    return out


def sends(inst: Instance, grid: Grid, resend_delay: float = 60.0) -> list[tuple[float, bool]]:
    """(time Alertmanager receives it, resolved?) for what Prometheus sends of one alert."""
    out = [(inst.starts_at + SEND_LATENCY, False)]
    if inst.resolved_at is None:
        return out
    iv = grid.interval
    t = inst.resolved_at
    while t <= inst.retained_until + 1e-6 and t - inst.resolved_at <= RESOLVED_RETENTION + 1e-6:
        out.append((t + SEND_LATENCY, True))
        nxt = t + resend_delay
        t = grid.offset + (math.floor((nxt - grid.offset) / iv + 1e-9) + 1) * iv  # first evaluation after it
    return out
