"""Score the job and domain kinds of a ``--jobs`` run (bench/fleetsim/jobs.py) against alertd's replay.

* a hang: the top-level incidents holding its alerts (the stall of every node, its culprit's port down): one,
  a job incident, opened within 5 minutes of the hang's start (when its job stopped computing; how long after
  its GPUJobStalled alert fired is kept too), paged once (a page taking over its suspect's alert is none), and
  where it has a culprit, the title's first suspect is that node;
* false job incidents: job incidents holding no hang or straggler, per 1,000 job-days; any incident holding a
  healthy pause's alert;
* stragglers: held by a job incident (recall);
* domain faults: one top-level incident, whose title names the domain.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from bench.fleetsim.model import Fleet
from bench.fleetsim.prometheus import Instance
from bench.fleetsim.score import _secs, credited, firsts, top_level

PROMPT = 300.0


@dataclass(slots=True)
class JobScore:
    hangs: int = 0
    one_incident: int = 0          # hangs held by exactly one top-level incident, a job incident
    within_5m: int = 0             # ... opened within 5 minutes of the hang's start (the stall's)
    paged_once: int = 0
    with_culprit: int = 0
    culprit_first: int = 0
    latency_alert: list[float] = field(default_factory=list)  # job incident opened - stall alert fired, s
    latency_start: list[float] = field(default_factory=list)  # job incident opened - the hang began, s
    job_incidents: int = 0
    false_job_incidents: int = 0
    job_days: float = 0.0
    pause_incidents: int = 0       # incidents holding a healthy pause's alert
    stragglers: int = 0
    stragglers_found: int = 0
    domains: int = 0
    domains_named: int = 0         # one incident, its title naming the domain
    problems: list[str] = field(default_factory=list)  # what went wrong, one line each

    @property
    def false_per_1000_job_days(self) -> float:
        return 1000.0 * self.false_job_incidents / self.job_days if self.job_days else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "false_per_1000_job_days": round(self.false_per_1000_job_days, 3)}


def job_score(report: dict[str, Any], fleet: Fleet, instances: list[Instance], start: datetime) -> JobScore:
    s = JobScore(job_days=len(fleet.jobs) * fleet.days)
    problems = fleet.problems
    incidents = {inc["id"]: inc for inc in report["incidents"]}
    top = top_level(incidents)
    tops = credited(report, problems, start)
    holders: dict[str, set[str]] = {}
    for tid, pids in tops.items():
        for pid in pids:
            holders.setdefault(pid, set()).add(tid)
    pages: dict[str, int] = {}
    for key in firsts(report, "page", "pagerduty"):
        tid = top.get(key.split("\0")[0], key.split("\0")[0])
        pages[tid] = pages.get(tid, 0) + 1
    fired: dict[str, float] = {}
    for inst in instances:
        if inst.rule.name == "GPUJobStalled":
            fired[inst.problem] = min(fired.get(inst.problem, inst.starts_at), inst.starts_at)
    for p in problems.values():
        held = sorted(holders.get(p.id, ()))
        if p.cause.startswith("job_hang") and p.id in fired:
            _hang(s, p, held, incidents, pages, fired[p.id], start)
        elif p.cause.startswith("job_hang"):
            s.hangs += 1
            s.problems.append(f"hang {p.id}: no stall alert fired")
        elif p.cause == "straggler":
            s.stragglers += 1
            if any(_of_job(incidents[t], p.job) for t in held):
                s.stragglers_found += 1
            else:
                s.problems.append(f"straggler {p.id} not in a job incident: {held}")
        elif p.cause == "healthy_pauses" and held:
            s.pause_incidents += len(held)
            s.problems.append(f"healthy pause {p.id} in {held}")
        if p.domain and p.first_received is not None:
            s.domains += 1
            title = str(incidents[held[0]].get("title", "")) if len(held) == 1 else ""
            if p.domain in title:
                s.domains_named += 1
            else:
                s.problems.append(f"domain {p.domain} ({p.id}): {[incidents[t].get('title') for t in held]}")
    for tid, inc in incidents.items():
        if inc["group"] == "job" and top[tid] == tid:
            s.job_incidents += 1
            if not any(problems[pid].cause.startswith("job_hang") or problems[pid].cause == "straggler"
                       for pid in tops.get(tid, ())):
                s.false_job_incidents += 1
                s.problems.append(f"false job incident {tid}: {inc.get('title')}")
    return s


def _hang(s: JobScore, p: Any, held: list[str], incidents: dict[str, dict[str, Any]], pages: dict[str, int],
          fired: float, start: datetime) -> None:
    s.hangs += 1
    if p.culprit:
        s.with_culprit += 1
    if len(held) != 1 or not _of_job(incidents[held[0]], p.job):
        s.problems.append(f"hang {p.id}: held by {held}")
        return
    inc = incidents[held[0]]
    s.one_incident += 1
    opened = _secs(start, inc["openedAt"]) or 0.0
    began = p.stalled if p.stalled is not None else p.start
    s.latency_alert.append(opened - fired)
    s.latency_start.append(opened - began)
    if opened - began <= PROMPT:
        s.within_5m += 1
    if pages.get(held[0], 0) == 1:
        s.paged_once += 1
    else:
        s.problems.append(f"hang {p.id} ({held[0]}) paged {pages.get(held[0], 0)} times")
    title = str(inc.get("title", ""))
    if p.culprit:
        if f"suspect {p.culprit}:" in title:
            s.culprit_first += 1
        else:
            s.problems.append(f"hang {p.id} culprit {p.culprit}: {title}")


def _of_job(inc: dict[str, Any], job: str) -> bool:
    """Whether the incident is the job incident of ``job`` ("namespace/name")."""
    namespace, _, name = job.partition("/")
    key = str(inc.get("key", ""))
    return inc["group"] == "job" and f"|namespace={namespace}|" in key and key.endswith(f"|owner_name={name}")


def job_line(s: JobScore) -> str:
    med = statistics.median(s.latency_alert) / 60 if s.latency_alert else 0.0
    med_start = statistics.median(s.latency_start) / 60 if s.latency_start else 0.0
    max_start = max(s.latency_start) / 60 if s.latency_start else 0.0
    return (f"     jobs: hangs {s.hangs} one-incident {s.one_incident} <=5m {s.within_5m} paged-once {s.paged_once} "
            f"culprit-first {s.culprit_first}/{s.with_culprit} (from the hang's start: median {med_start:.1f} m, "
            f"max {max_start:.1f} m; median {med:.1f} m after the stall alert) | false job incidents {s.false_job_incidents} "
            f"({s.false_per_1000_job_days:.2f}/1k job-days of {s.job_days:.0f}) | pauses {s.pause_incidents} | "
            f"stragglers {s.stragglers_found}/{s.stragglers} | domains named {s.domains_named}/{s.domains}")
