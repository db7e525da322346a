"""The reliability report for a period, from incident facts and fleet samples (pure: data in, data out).

Every figure is defined in docs/reliability-report.md; in short:

* ``gpuDays``: per calendar day, the GPUs of that day's sample (the latest earlier sample when a day has
  none), times the part of the day inside the period;
* ``failures``: failure facts opened inside the period; ``failuresPer1000GpuDays`` = failures / gpuDays x 1000;
* ``mttrSeconds``: opening -> end (the last alert's end) of the failures opened in the period and
  resolved (median, p90 by linear interpolation, per action);
* ``gpuHoursOutOfService``: per failure overlapping the period, its GPUs out x the hours of the overlap
  (an open failure counts up to ``now``);
* ``jobsInterrupted`` / ``gpuHoursLost``: distinct jobs hit by the period's failures, and their estimated
  GPU-hours lost (alertd/enrich/jobs.py);
* ``lemons``: nodes and GPUs with 2 or more failures in the period, and GPUs the RMA policy names;
* ``cordoned``: by node type, now (the latest sample) and per day.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Iterable, Mapping

from alertd.core.json_types import JSONObject
from alertd.core.model import iso, parse_iso
from alertd.rules import rma
from alertd.report.shapes import (APART, Cause, Cordoned, Fact, FactKind, Lemons, Mttr, MttrStats, Reference, Report,
                                  Week)

# Published reference: Llama 3 405B pre-training, 419 unexpected interruptions on 16,384 H100s in 54 days.
REFERENCES: list[Reference] = [{"name": "Llama 3 405B (all unexpected interruptions)", "per1000GpuDays": round(419 / (16384 * 54) * 1000, 3)},
              {"name": "Llama 3 405B (GPU-related, 58.7 %)", "per1000GpuDays": round(419 * 0.587 / (16384 * 54) * 1000, 3)}]
# Rows of the fleet tables (alertd/store/report_tables.py): a day per cluster and node type, and a node as last
# sampled (cluster, node, node type, GPUs, cordoned).
FleetDay = tuple[str, str, str, int, int, int, int]
FleetNode = tuple[str, str, str, int, bool]
REPEAT = 2  # failures in the period that make a node or GPU a lemon
DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Period:
    since: datetime
    until: datetime
    cluster: str = ""
    node_type: str = ""

    def overlap(self, start: datetime, end: datetime) -> timedelta:
        return max(min(end, self.until) - max(start, self.since), timedelta(0))


def _day_start(d: date) -> datetime:
    return datetime.combine(d, time(0), tzinfo=timezone.utc)


def gpu_days(fleet_days: Iterable[FleetDay], p: Period) -> tuple[float, dict[str, float]]:
    """(GPU-days of the period, GPUs per day in it): each (cluster, type) carries its latest sample forward."""
    latest: dict[tuple[str, str], int] = {}
    rows = sorted((r for r in fleet_days if (not p.node_type or r[2] == p.node_type)), key=lambda r: r[0])
    per_day: dict[str, float] = {}
    total = 0.0
    i = 0
    d = p.since.date()
    while _day_start(d) < p.until:
        key = d.isoformat()
        while i < len(rows) and rows[i][0] <= key:
            latest[(rows[i][1], rows[i][2])] = int(rows[i][4])
            i += 1
        gpus = sum(latest.values())
        per_day[key] = gpus
        total += gpus * p.overlap(_day_start(d), _day_start(d) + DAY) / DAY
        d += DAY
    return round(total, 3), per_day


def _end(f: Fact) -> str | None:
    """When a failure ended: its last alert's end, else its resolution (facts of older versions), else None."""
    return f.get("endedAt") or f.get("resolvedAt")


def _percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), None without values."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return round(s[lo] + (s[hi] - s[lo]) * (pos - lo), 1)


def _mttr(failures: list[Fact]) -> Mttr:
    def spans(rows: list[Fact]) -> list[float]:
        out = []
        for f in rows:
            opened, resolved = parse_iso(f["openedAt"]), parse_iso(_end(f))
            if opened is not None and resolved is not None:
                out.append(max((resolved - opened).total_seconds(), 0.0))  # never negative (older facts)
        return out

    def stats(rows: list[Fact]) -> MttrStats:
        s = spans(rows)
        return {"repairs": len(s), "median": _percentile(s, 0.5), "p90": _percentile(s, 0.9)}

    actions = sorted({f.get("action") or "unknown" for f in failures})
    return {**stats(failures),
            "byAction": {a: stats([f for f in failures if (f.get("action") or "unknown") == a]) for a in actions}}


def _out_of_service(facts: list[Fact], p: Period, now: datetime) -> tuple[float, dict[str, float]]:
    total = 0.0
    daily: dict[str, float] = {}
    for f in facts:
        opened = parse_iso(f["openedAt"])
        ended = parse_iso(_end(f)) or min(now, p.until)
        if opened is None:
            continue
        total += f["gpusOut"] * p.overlap(opened, ended).total_seconds() / 3600
        d = max(opened, p.since).date()
        while _day_start(d) < min(ended, p.until):
            part = Period(_day_start(d), _day_start(d) + DAY).overlap(max(opened, p.since), min(ended, p.until))
            daily[d.isoformat()] = daily.get(d.isoformat(), 0.0) + f["gpusOut"] * part.total_seconds() / 3600
            d += DAY
    return round(total, 3), {k: round(v, 3) for k, v in sorted(daily.items())}


def _by_cause(failures: list[Fact]) -> list[Cause]:
    counts: dict[tuple[str, int | None], int] = {}
    for f in failures:
        key = (f["category"], f.get("xid"))
        counts[key] = counts.get(key, 0) + 1
    n = len(failures) or 1
    return [{"category": c, "xid": x, "failures": k, "share": round(k / n, 4)}
            for (c, x), k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or 0))]


def _lemons(failures: list[Fact], rules: tuple[rma.RmaRule, ...], p: Period) -> Lemons:
    nodes: dict[str, list[str]] = {}
    gpus: dict[str, list[str]] = {}
    history: list[JSONObject] = []
    for seq, f in enumerate(failures):
        for n in f.get("nodes") or [f["node"]]:
            nodes.setdefault(n, []).append(f["id"])
        for g in f.get("gpus") or []:
            gpus.setdefault(g, []).append(f["id"])
            xid = f.get("xid")
            history.append({"uuid": g, "incident": f["id"], "seq": seq, "openedAt": f["openedAt"],
                            "xids": [xid] if xid else [], "signals": [], "alertnames": []})
    rma_gpus = {c.uuid: c.rules for c in rma.evaluate(rules, history, {}, p.until)} if rules else {}
    return {"nodes": [{"node": n, "failures": len(ids), "incidents": ids}
                      for n, ids in sorted(nodes.items(), key=lambda kv: (-len(kv[1]), kv[0])) if len(ids) >= REPEAT],
            "gpus": [{"uuid": g, "failures": len(gpus.get(g, [])), "incidents": gpus.get(g, []),
                      "rmaRules": rma_gpus.get(g, [])}
                     for g in sorted(set(rma_gpus) | {g for g, ids in gpus.items() if len(ids) >= REPEAT},
                                     key=lambda g: (-len(gpus.get(g, [])), g))]}


def _cordoned(fleet_days: list[FleetDay], nodes: list[FleetNode], p: Period) -> Cordoned:
    now: dict[str, int] = {}
    for _, _, node_type, _, cordoned in nodes:
        if not p.node_type or node_type == p.node_type:
            now[node_type] = now.get(node_type, 0) + int(cordoned)
    series: dict[str, dict[str, int]] = {}
    first, last = p.since.date().isoformat(), (p.until - timedelta(microseconds=1)).date().isoformat()
    for day, _, node_type, _, _, cordoned_nodes, _ in fleet_days:
        if first <= day <= last and (not p.node_type or node_type == p.node_type):
            per = series.setdefault(day, {})
            per[node_type] = per.get(node_type, 0) + int(cordoned_nodes)
    return {"now": now, "daily": [{"day": d, "byNodeType": v} for d, v in sorted(series.items())]}


def _weekly(failures: list[Fact], per_day: dict[str, float], p: Period) -> list[Week]:
    """Failures per 1,000 GPU-days per ISO week (weeks start on Monday) inside the period."""
    weeks: dict[str, list[float]] = {}
    for day, gpus in per_day.items():
        d = date.fromisoformat(day)
        part = p.overlap(_day_start(d), _day_start(d) + DAY) / DAY
        weeks.setdefault((d - timedelta(days=d.weekday())).isoformat(), [0.0, 0.0])[1] += gpus * part
    for f in failures:
        opened = parse_iso(f["openedAt"])
        if opened is not None:
            start = opened.date()
            weeks.setdefault((start - timedelta(days=start.weekday())).isoformat(), [0.0, 0.0])[0] += 1
    return [{"week": w, "failures": int(n), "gpuDays": round(g, 3),
             "failuresPer1000GpuDays": round(n / g * 1000, 3) if g else None} for w, (n, g) in sorted(weeks.items())]


def compute(facts: list[Fact], fleet_days: list[FleetDay], fleet_nodes: list[FleetNode],
            p: Period, now: datetime, rules: tuple[rma.RmaRule, ...] = ()) -> Report:
    """The report: ``facts`` overlap the period (store.report_facts), ``fleet_days`` reach back before it."""
    facts = [f for f in facts if not p.node_type or f.get("nodeType") == p.node_type]
    since, until = iso(p.since) or "", iso(p.until) or ""
    opened = [f for f in facts if since <= f["openedAt"] < until]
    failures = [f for f in opened if f["kind"] == FactKind.FAILURE]
    total_days, per_day = gpu_days(fleet_days, p)
    hours_out, daily_out = _out_of_service([f for f in facts if f["kind"] == FactKind.FAILURE], p, now)
    jobs = {(j["namespace"], j["kind"], j["name"]) for f in failures for j in f.get("jobs") or []}
    return {
        "since": since, "until": until, "cluster": p.cluster, "nodeType": p.node_type,
        "gpuDays": total_days,
        "failures": len(failures),
        "failuresPer1000GpuDays": round(len(failures) / total_days * 1000, 3) if total_days else None,
        "apart": {k.value: sum(1 for f in opened if f["kind"] == k) for k in APART},
        "byCause": _by_cause(failures),
        "mttrSeconds": _mttr(failures),
        "gpuHoursOutOfService": hours_out,
        "jobsInterrupted": len(jobs),
        "gpuHoursLost": round(sum(float(j.get("gpuHoursLost") or 0) for f in failures for j in f.get("jobs") or []), 2),
        "lemons": _lemons(failures, rules, p),
        "cordoned": _cordoned(fleet_days, fleet_nodes, p),
        "weekly": _weekly(failures, per_day, p),
        "daily": [{"day": d, "gpus": g, "gpuHoursOutOfService": daily_out.get(d, 0.0)} for d, g in per_day.items()],
        "references": REFERENCES,
        "incidents": [f["id"] for f in failures],
    }


def group_by_type(fleet_nodes: list[FleetNode]) -> Mapping[tuple[str, str], tuple[str, int]]:
    """(cluster, node) -> (node type, GPUs), for facts."""
    return {(c, n): (t, int(g)) for c, n, t, g, _ in fleet_nodes}


__all__ = ["Period", "REFERENCES", "compute", "gpu_days", "group_by_type"]
