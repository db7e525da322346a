"""One predicate per alerting rule of deploy/prometheus/gpu-alerts.yml, over a node's state.

A predicate returns, for every series its rule's expression would return, the
spans of time during which the expression is true (before ``for:``), each
tagged with the problem that made it true. ``prometheus.py`` samples them on
the evaluation grid and runs the rule's for/keep_firing_for state machine.

How the expressions read the state:

* dcgm-exporter series exist while the exporter is scraped (not down, node up)
  and the GPU is on the bus. A failed scrape makes them stale at once
  (staleness markers), so an instant selector stops returning them. With
  ``lookback`` (a setup that loses the markers, e.g. a query layer in front
  of several Prometheus servers) an instant selector keeps returning the last
  sample for that long; range functions see only the samples taken.
* ``changes(X[5m]) > 0`` and ``increase(X[5m]) > 0`` are true from the first
  sample after the step until the sample before it leaves the 5-minute
  window: for ``5m - scrape interval``. Both need a sample before the step:
  a step that happens while the exporter is down is never seen.
* ``max_over_time(node:dcgm_gpus:count[1h])`` remembers the full count for an
  hour, so GPUCountDropped holds at most an hour while the exporter answers.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from bench.fleetsim import model as m
from bench.fleetsim.intervals import Span, covers, merge, subtract

WINDOW = 300.0  # the [5m] of changes() and increase()
REMEMBER = 3600.0  # max_over_time(...[1h])


@dataclass(frozen=True, slots=True)
class Grid:
    """When samples are taken: every ``interval`` seconds from ``offset``."""

    interval: float = 30.0
    offset: float = 0.0

    def ceil(self, t: float) -> float:
        return self.offset + math.ceil((t - self.offset) / self.interval) * self.interval


@dataclass(slots=True)
class Series:
    labels: dict[str, str]
    spans: list[Span]
    value: float = 1.0
    queried: float | None = None  # what an annotation's `query` reads (a straggler's job median)
    by_problem: dict[str, float] = field(default_factory=dict)  # a spell's own value, by its problem


class NodeView:
    """A node's facts, indexed for the predicates."""

    def __init__(self, node: m.Node, lookback: float = 0.0):
        self.node, self.lookback = node, lookback
        by: dict[tuple[str, int], list[m.Fact]] = defaultdict(list)
        for f in node.facts:
            by[(f.kind, f.gpu)].append(f)
        self.by = by
        self.node_down = merge((f.start, f.end) for f in by[(m.NODE_DOWN, -1)])
        self.scrape_down = merge([*self.node_down, *((f.start, f.end) for f in by[(m.EXPORTER_DOWN, -1)])])

    def facts(self, kind: str, gpu: int = -1) -> list[m.Fact]:
        return self.by.get((kind, gpu), [])

    def gpu_unsampled(self, gpu: int) -> list[tuple[float, float]]:
        """When no sample of the GPU's series is taken."""
        return merge([*self.scrape_down, *((f.start, f.end) for f in self.facts(m.GPU_GONE, gpu))])

    def gpu_absent(self, gpu: int) -> list[tuple[float, float]]:
        """When an instant selector returns nothing for the GPU's series."""
        return self.hidden(self.gpu_unsampled(gpu))

    def hidden(self, unsampled: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if not self.lookback:
            return unsampled
        return [(s + self.lookback, e) for s, e in unsampled if e - s > self.lookback]

    def gpus(self, kind: str) -> list[int]:
        return sorted({g for (k, g) in self.by if k == kind and g >= 0})


def _step_spans(view: NodeView, grid: Grid, kind: str, gpu: int) -> list[Span]:
    """changes()/increase() over [5m] > 0 after each step of a counter or gauge (see the module doc)."""
    unsampled = view.gpu_unsampled(gpu)
    out: list[Span] = []
    for f in view.facts(kind, gpu):
        seen = grid.ceil(f.start)
        if covers(unsampled, seen) or covers(unsampled, seen - grid.interval):
            continue  # no sample at the step, or none before it to compare with
        out.append((seen, seen + WINDOW - grid.interval, f.problem))
    return out


def gpu_xid_error(view: NodeView, grid: Grid) -> list[Series]:
    """count_values("xid", last_over_time(DCGM_FI_DEV_XID_ERRORS[5m]) > 0 and changes(...[5m]) > 0).

    The gauge keeps its last code (the same code again is no change) until the
    driver reloads with the node; a new code ends the old code's series. Both
    sides read the samples inside the 5-minute range, staleness markers or not:
    an exporter that hangs right after the Xid leaves the alert firing for the
    whole window instead of ending it (the GPU that fell off the bus took the
    exporter with it). A code never sampled never fires.
    """
    out = []
    for gpu in view.gpus(m.XID):
        unsampled = view.gpu_unsampled(gpu)
        last, last_at = 0.0, -math.inf
        found: list[tuple[float, m.Fact]] = []
        for f in sorted(view.facts(m.XID, gpu), key=lambda f: f.start):
            if any(last_at < e <= f.start for _, e in view.node_down):
                last = 0.0  # the driver reloaded: the gauge starts from 0
            if f.value == last:
                continue
            last, last_at = f.value, f.start
            seen = grid.ceil(f.start)
            if covers(unsampled, seen) or covers(unsampled, seen - grid.interval):
                continue
            found.append((seen, f))
        for i, (seen, f) in enumerate(found):
            end = seen + WINDOW - grid.interval
            if i + 1 < len(found):
                end = min(end, found[i + 1][0])
            out.append(Series({**view.node.gpu_labels(gpu), "xid": str(int(f.value))}, [(seen, end, f.problem)], f.value))
    return out


def _interval_series(view: NodeView, kind: str, extra: Callable[[m.Fact], dict[str, str]] | None = None,
                     ) -> list[Series]:
    out = []
    for gpu in view.gpus(kind):
        absent = view.gpu_absent(gpu)
        for f in view.facts(kind, gpu):
            spans = subtract([(f.start, f.end, f.problem)], absent)
            if spans:
                labels = {**view.node.gpu_labels(gpu), **(extra(f) if extra else {})}
                out.append(Series(labels, spans, f.value))
    return out


def gpu_clock_event_throttling(view: NodeView, grid: Grid) -> list[Series]:
    return _interval_series(view, m.THROTTLE, lambda f: {"clock_event_reasons": str(int(f.value))})


def gpu_temperature_high(view: NodeView, grid: Grid) -> list[Series]:
    return _interval_series(view, m.HOT)


def gpu_ecc_double_bit_errors(view: NodeView, grid: Grid) -> list[Series]:
    return [Series(view.node.gpu_labels(g), _step_spans(view, grid, m.ECC_DBE, g)) for g in view.gpus(m.ECC_DBE)]


def gpu_row_remap_failure(view: NodeView, grid: Grid) -> list[Series]:
    return _interval_series(view, m.REMAP_FAIL)


def gpu_row_remap_pending(view: NodeView, grid: Grid) -> list[Series]:
    return _interval_series(view, m.REMAP_PENDING)


def gpu_nvlink_errors(view: NodeView, grid: Grid) -> list[Series]:
    return [Series({**view.node.gpu_labels(g), "nvlink_error": "recovery"}, _step_spans(view, grid, m.NVLINK, g))
            for g in view.gpus(m.NVLINK)]


def _node_labels(view: NodeView) -> dict[str, str]:
    return {"cluster": view.node.cluster, "node": view.node.name, **view.node.topology}


def _problem_at(facts: list[m.Fact], s: float, e: float, default: str) -> str:
    hits = [f for f in facts if f.start < e and f.end > s]
    return min(hits, key=lambda f: f.start).problem if hits else default


def dcgm_exporter_down(view: NodeView, grid: Grid) -> list[Series]:
    """up{job="dcgm-exporter"} == 0 unless the node itself is down."""
    facts = view.facts(m.EXPORTER_DOWN)
    spans = subtract([(f.start, f.end, f.problem) for f in facts], view.node_down)
    labels = {"cluster": view.node.cluster, "node": view.node.name, "instance": view.node.exporter_instance(),
              "job": "dcgm-exporter"}
    return [Series(labels, spans, 0.0)] if spans else []


def gpu_count_dropped(view: NodeView, grid: Grid) -> list[Series]:
    """Fewer GPUs than within the last hour, while the exporter answers."""
    spans: list[Span] = []
    for gpu in view.gpus(m.GPU_GONE):
        for f in view.facts(m.GPU_GONE, gpu):
            spans.append((f.start, min(f.end, f.start + REMEMBER), f.problem))
    spans = subtract(sorted(spans), view.hidden(view.scrape_down))
    return [Series(_node_labels(view), spans, 7.0)] if spans else []


def _plain(kind: str, value: float) -> Callable[[NodeView, Grid], list[Series]]:
    def predicate(view: NodeView, grid: Grid) -> list[Series]:
        spans = [(f.start, f.end, f.problem) for f in view.facts(kind)]
        return [Series(_node_labels(view), spans, value)] if spans else []
    return predicate


node_down = _plain(m.NODE_DOWN, 0.0)
kube_node_cordoned = _plain(m.CORDON, 1.0)
kube_node_not_ready = _plain(m.NOT_READY, 0.0)


def watchdog(view: NodeView, grid: Grid) -> list[Series]:
    """vector(1): always firing and about no node; the simulation leaves it out (docs/fleet-simulation.md)."""
    return []


PREDICATES: dict[str, Callable[[NodeView, Grid], list[Series]]] = {
    "GPUXidError": gpu_xid_error,
    "GPUClockEventThrottling": gpu_clock_event_throttling,
    "GPUTemperatureHigh": gpu_temperature_high,
    "GPUEccDoubleBitErrors": gpu_ecc_double_bit_errors,
    "GPURowRemapFailure": gpu_row_remap_failure,
    "GPURowRemapPending": gpu_row_remap_pending,
    "GPUNVLinkErrors": gpu_nvlink_errors,
    "DCGMExporterDown": dcgm_exporter_down,
    "GPUCountDropped": gpu_count_dropped,
    "NodeDown": node_down,
    "KubeNodeCordoned": kube_node_cordoned,
    "KubeNodeNotReady": kube_node_not_ready,
    "Watchdog": watchdog,
}
