"""The job kinds' done-when on a small fleet simulation (2,048 nodes, 7 days, 2 seeds, both routes): hangs
without an Xid, each a job incident within 5 minutes of its start, stragglers, quiet GPUs, an NVLink clique
fault and healthy pauses (checkpoints, data loading, evaluations: bench/fleetsim/jobs.py),
through the shipped job rules (deploy/prometheus/gpu-job-alerts.yml). The full-size run is
``python -m bench.fleetsim --jobs`` (docs/fleet-simulation.md)."""
from __future__ import annotations

import functools

import pytest

from bench.fleetsim.builder import Rates
from bench.fleetsim.rules import JOB_RULES
from bench.fleetsim.run import RunResult, run_one

NODES, DAYS = 2048, 7


@functools.lru_cache(maxsize=None)
def result(seed: int, route: str) -> RunResult:
    return run_one(nodes=NODES, days=DAYS, seed=seed, route=route, rates=Rates(jobs=True), job_rules=str(JOB_RULES))


@pytest.mark.parametrize("route", ["alertname", "node"])
@pytest.mark.parametrize("seed", [1, 2])
def test_each_hang_is_one_job_incident_paged_once_naming_its_culprit(seed: int, route: str):
    r = result(seed, route)
    j = r.jobs
    assert j is not None and j.hangs >= 3 and j.stragglers >= 3, "the simulation produced too little to judge"
    misses = []
    if not j.one_incident == j.within_5m == j.paged_once == j.hangs:
        misses.append(f"of {j.hangs} hangs {j.one_incident} one incident, {j.within_5m} within 5 minutes of the "
                      f"hang's start, {j.paged_once} paged once")
    if j.latency_start and max(j.latency_start) > 300.0:
        misses.append(f"a job incident opened {max(j.latency_start) / 60:.1f} minutes after its hang began")
    if j.with_culprit and j.culprit_first < 0.9 * j.with_culprit:
        misses.append(f"culprit named first in {j.culprit_first} of {j.with_culprit}")
    if j.stragglers_found < 0.9 * j.stragglers:
        misses.append(f"stragglers found {j.stragglers_found} of {j.stragglers}")
    if j.false_per_1000_job_days > 1.0 or j.pause_incidents:
        misses.append(f"false job incidents {j.false_job_incidents}, incidents of healthy pauses {j.pause_incidents}")
    if j.domains_named != j.domains:
        misses.append(f"domain faults named {j.domains_named} of {j.domains}")
    s = r.score
    if s.false_pages or s.recall < 1.0 or s.split or s.mixed:
        misses.append(f"false pages {s.false_pages}, recall {s.recall:.1%}, split {s.split}, mixed {s.mixed}")
    assert not misses, f"seed {seed}, group_by {route}:\n  " + "\n  ".join(misses + j.problems[:10])
