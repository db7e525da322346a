"""One predicate per alerting rule of the job rules (deploy/prometheus/gpu-job-alerts.yml), over a node's state.

The job rules join dcgm-exporter's per-pod series to the pod's top owner (kube_pod_owner) and to the node's
topology (kube_node_labels), so every alert names its job (``namespace``, ``owner_kind``, ``owner_name``) and
its node's zone, rack and NVLink clique. How the expressions read the state (``--jobs``, jobs.py):

* GPUJobStalled: every GPU of the job has had no tensor activity for 10 minutes after it trained (its
  expression, with ``for: 0m``): a STALL fact, or a healthy pause (a checkpoint, an evaluation: every GPU idle
  for minutes) that lasts that long, true from 10 minutes in until the job computes again or its pods stop
  (NCCL's watchdog kills a hung job). One series per node of the job; the value is when it last computed.
* GPUStraggler: a GPU below its job's median (a SLOW fact: its reading over the median) while its peers are
  busy; the rule's ``for:`` holds it. The value is its reading, the queried median the job's.
* GPUTelemetryQuiet: a GPU's sample count over 10 minutes under half its node's best: from 5 minutes after
  its samples stop (a QUIET fact) to 5 minutes after they come back.
* NodeInfiniBandPortDown: a port's state below active (an IB_DOWN fact) on a node that ran a job.
* NodeInfiniBandPortFlapping, GPUPCIeReplaysGrowing, GPULinkTrafficCollapsed: no fault the simulation draws
  shows them (they are scored by the job rules' own tests).
"""
from __future__ import annotations

from typing import Callable

from bench.fleetsim import model as m
from bench.fleetsim.intervals import Span, subtract
from bench.fleetsim.predicates import Grid, NodeView, Series

IDLE_FOR = 600.0  # the stall rule's own 10 minutes without tensor activity
QUIET_LAG = 300.0  # count_over_time(...[10m]) falls under half of the node's best 5 minutes after the samples stop
MEDIANS = {"tensor_active": 0.88, "sm_clock": 1755.0, "power": 610.0}  # a busy H100 job's medians


def _job_labels(view: NodeView) -> dict[str, str]:
    job = view.node.job
    return {**job.labels, **view.node.topology} if job is not None else dict(view.node.topology)


def gpu_job_stalled(view: NodeView, grid: Grid) -> list[Series]:
    job = view.node.job
    if job is None:
        return []
    idle = [(f.start, f.end, f.problem) for f in view.facts(m.STALL)] + job.pauses
    out = []
    for start, end, problem in idle:
        if end - start > IDLE_FOR:
            labels = {"cluster": view.node.cluster, "node": view.node.name, **_job_labels(view)}
            out.append(Series(labels, [(start + IDLE_FOR, end, problem)], m.EPOCH + start,
                              by_problem={problem: m.EPOCH + start}))
    return out


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
