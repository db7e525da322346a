"""One predicate per alerting rule of the job rules (deploy/prometheus/gpu-job-alerts.yml), over a node's state.

The job rules join dcgm-exporter's per-pod series to the pod's top owner (kube_pod_owner) and to the node's
topology (kube_node_labels), so every alert names its job (``namespace``, ``owner_kind``, ``owner_name``) and
its node's zone, rack and NVLink clique. How the expressions read the state (``--jobs``, jobs.py):

* GPUJobStalled: every GPU of the job idle after it trained, and one of three arms (its expression, with
  ``for: 0m``): idle for 120 s while the job's busiest node moves under 50 MB/s (a STALL fact: nothing on
  the wire), for 10 minutes on a job whose nodes export no network counters, or for 30 minutes whatever the
  network does. A checkpoint (a node writing) or a data-loading pause (the nodes reading) keeps the wire
  busy; an evaluation keeps the tensor pipes above 1 %. See :func:`gpu_job_stalled` for the timing. True
  until the job computes again or its pods stop. One series per node of the job; the value is when it last
  computed.
* GPUStraggler: a GPU below its job's median (a SLOW fact: its reading over the median) while its peers are
  busy; the rule's ``for:`` holds it. The value is its reading, the queried median the job's.
* GPUTelemetryQuiet: a GPU's sample count over 10 minutes under half its node's best: from 5 minutes after
  its samples stop (a QUIET fact) to 5 minutes after they come back.
* NodeInfiniBandPortDown: a port's state below active (an IB_DOWN fact) on a node that ran a job.
* NodeInfiniBandPortFlapping, GPUPCIeReplaysGrowing, GPULinkTrafficCollapsed: no fault the simulation draws
  shows them (they are scored by the job rules' own tests).
"""
from __future__ import annotations

import math
import zlib
from typing import Callable

from bench.fleetsim import model as m
from bench.fleetsim.intervals import Span, merge, subtract
from bench.fleetsim.predicates import Grid, NodeView, Series

# GPUJobStalled's arms (tests/unit/test_fleetsim_jobs.py reads them back from the rule file).
IDLE_QUIET = 120.0   # idle this long with the wire quiet ...
QUIET_BYTES = 5e7    # ... the busiest node under this many bytes a second ...
RATE_WINDOW = 120.0  # ... over rate(...[2m]) of its counters
IDLE_BLIND = 600.0   # idle this long, no network counters
IDLE_ANY = 1800.0    # idle this long, whatever the network
QUIET_LAG = 300.0  # count_over_time(...[10m]) falls under half of the node's best 5 minutes after the samples stop
MEDIANS = {"tensor_active": 0.88, "sm_clock": 1755.0, "power": 610.0}  # a busy H100 job's medians


def _job_labels(view: NodeView) -> dict[str, str]:
    job = view.node.job
    return {**job.labels, **view.node.topology} if job is not None else dict(view.node.topology)


def gpu_job_stalled(view: NodeView, grid: Grid) -> list[Series]:
    """Every evaluation at which one of the rule's arms holds, per idle spell of the job.

    Each exporter of each node is a target Prometheus scrapes every interval at an offset of its own
    (:func:`scrape_grid`), the rule group is evaluated on ``grid``; an evaluation reads each target's latest
    sample. With every GPU stopping at ``T``:
    * DCGM's tensor activity is a ratio over its sampling period, so a node's first sample at or after the
      stop still reads activity and its next one reads idle; ``last_active_time`` is the last evaluation
      before the last node's first idle sample: up to one evaluation interval plus a scrape after ``T``.
    * ``last_active_time < time() - X`` is strict: true from the first evaluation after it + X.
    * ``rate(...[2m])`` reads a node's samples in [t - 2m, t] (both ends, as Prometheus 2 does): its node is
      quiet once its last sample from before the silence has left that window, until a sample from after
      the silence enters it. The job is quiet when all its nodes are (its busiest one is).
    """
    job = view.node.job
    if job is None:
        return []
    stalls = [(f.start, f.end, f.problem) for f in view.facts(m.STALL)]
    idle = [(q.start, q.end, q.problem) for q in job.pauses if q.idle]
    silent = subtract(stalls, merge((s, e) for s, e, _ in idle))  # a checkpoint writes, a loader reads
    hold = IDLE_ANY if job.counters else IDLE_BLIND
    labels = {"cluster": view.node.cluster, "node": view.node.name, **_job_labels(view)}
    out = []
    for start, end, problem in _idle_spells(stalls, idle):
        quiet = [x for x in silent if x[0] < end and x[1] > start] if job.counters else []
        if not quiet and end - start <= hold - 2 * grid.interval:
            continue  # too short for any arm (its last active evaluation is at most an interval before it)
        dcgm = [scrape_grid("dcgm-exporter", n, grid.interval) for n in job.nodes]
        net = [scrape_grid("node-exporter", n, grid.interval) for n in job.nodes]
        last = _before(grid, max(g.ceil(start + grid.interval) for g in dcgm))  # after the last first idle sample
        until = min(_after(g, end) for g in dcgm)  # a node's first sample holding activity again
        spans = [(_after(grid, last + hold), until, problem)]
        for a, b, p in quiet:
            lo = max(_after(grid, last + IDLE_QUIET), _after(grid, max(_before(g, a) for g in net) + RATE_WINDOW))
            spans.append((lo, min(until, min(_after(g, b) for g in net)), p))
        spans = [(s, e, p) for s, e, p in spans if grid.ceil(s) < grid.ceil(e)]
        if spans:
            out.append(Series(labels, sorted(spans), m.EPOCH + last,
                              by_problem={p: m.EPOCH + last for _, _, p in spans}))
    return out


def scrape_grid(exporter: str, node: str, interval: float) -> Grid:
    """When Prometheus scrapes one target: every interval, at an offset it draws from the target's hash."""
    return Grid(interval, (zlib.crc32(f"{exporter}/{node}".encode()) % 997) / 997.0 * interval)


def _idle_spells(stalls: list[Span], pauses: list[Span]) -> list[Span]:
    """Every GPU idle: overlapping or touching stalls and pauses as one spell, named by a stall if it holds one
    (what its alert is credited to), else by its pause."""
    hangs = {p for _, _, p in stalls}
    out: list[Span] = []
    for s, e, p in sorted(stalls + pauses, key=lambda x: (x[0], x[1])):
        if out and s <= out[-1][1]:
            name = out[-1][2] if out[-1][2] in hangs else p
            out[-1] = (out[-1][0], max(e, out[-1][1]), name)
        else:
            out.append((s, e, p))
    return out


def _after(grid: Grid, t: float) -> float:
    """The first evaluation strictly after ``t``."""
    return grid.offset + (math.floor((t - grid.offset) / grid.interval) + 1) * grid.interval


def _before(grid: Grid, t: float) -> float:
    """The last tick strictly before ``t``."""
    return grid.offset + (math.ceil((t - grid.offset) / grid.interval) - 1) * grid.interval


def gpu_straggler(view: NodeView, grid: Grid) -> list[Series]:
    if view.node.job is None:
        return []
    out = []
    for gpu in view.gpus(m.SLOW):
        absent = view.gpu_absent(gpu)
        for f in view.facts(m.SLOW, gpu):
            spans = subtract([(f.start, f.end, f.problem)], absent)
            median = MEDIANS.get(f.label, 1.0)
            labels = {**view.node.gpu_labels(gpu), **_job_labels(view), "metric": f.label}
            if spans:
                out.append(Series(labels, spans, f.value * median, queried=median))
    return out


def gpu_telemetry_quiet(view: NodeView, grid: Grid) -> list[Series]:
    out = []
    for gpu in view.gpus(m.QUIET):
        for f in view.facts(m.QUIET, gpu):
            if f.end - f.start > QUIET_LAG:
                spans: list[Span] = [(f.start + QUIET_LAG, f.end + QUIET_LAG, f.problem)]
                spans = subtract(spans, view.scrape_down)  # the whole node quiet is the exporter's alert
                if spans:
                    out.append(Series({**view.node.gpu_labels(gpu), **_job_labels(view)}, spans, 0.0))
    return out


def node_infiniband_port_down(view: NodeView, grid: Grid) -> list[Series]:
    if view.node.job is None:
        return []
    out = []
    for f in view.facts(m.IB_DOWN):
        spans = subtract([(f.start, f.end, f.problem)], view.node_down)
        labels = {"cluster": view.node.cluster, "node": view.node.name, "device": f"mlx5_{int(f.value)}",
                  "port": "1", **_job_labels(view)}
        if spans:
            out.append(Series(labels, spans, 1.0))
    return out


def _none(view: NodeView, grid: Grid) -> list[Series]:
    return []


JOB_PREDICATES: dict[str, Callable[[NodeView, Grid], list[Series]]] = {
    "GPUJobStalled": gpu_job_stalled,
    "GPUStraggler": gpu_straggler,
    "GPUTelemetryQuiet": gpu_telemetry_quiet,
    "NodeInfiniBandPortDown": node_infiniband_port_down,
    "NodeInfiniBandPortFlapping": _none,
    "GPUPCIeReplaysGrowing": _none,
    "GPULinkTrafficCollapsed": _none,
}
