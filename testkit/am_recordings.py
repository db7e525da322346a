"""Reading and scoring the real Alertmanager runs in tests/fixtures/alertmanager-runs (bench/record_am_run.py).

A run directory holds one recording per Alertmanager grouping (``<route>.jsonl``, what ``alertd serve
--record`` wrote), ``groundtruth.json`` (the problems and the fault steps) and ``config/``. ``AmRun`` replays
a recording through alertd with the shipped rules/ and measures, per ground-truth problem, the figures the
tests hold to targets. From the command line it prints them, one line per route and problem::

    python -m testkit.am_recordings [--unmuted] [--repair-timeout DURATION] [RUN_DIR]

``--unmuted`` (``AmRun(unmuted=True)``) replays with the routes' mute and active windows taken off, as the
fleet simulation does: a run recorded at night or at a weekend is then judged by alertd's decisions, not by
the hour the shipped routing keeps error pages quiet.

``--repair-timeout 400s`` (``AmRun(repair_timeout=...)``) replays with ``correlation.response.repair_timeout``
set to that: a scenario that compresses the field's waits (storm-response runs about three times faster than
the field, see the fixture README) is judged with the repair timeout compressed like them, not the shipped 30m.

A page is counted the way PagerDuty counts one: an incident whose PagerDuty alert was triggered at least
once (later triggers share its dedup key and raise no new page). Escalations are left out: nobody
acknowledges during a replay, so every page would escalate.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from alertd.authoring.replay import as_json, read_recording, replay
from alertd.authoring.virtual import load_rule_set
from alertd.core.durations import parse_duration
from alertd.core.model import parse_iso
from alertd.rules.ruleset import RuleSet
from bench.fleetsim.run import unmuted
from bench.fleetsim.score import first_sends

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "tests" / "fixtures" / "alertmanager-runs"
STORM_RESPONSE = RUNS / "storm-response"  # a storm and the people answering it (bench/am_run_storm_scenario.py)
JOB_HANG = RUNS / "job-hang"  # training jobs: a NIC's hang, a straggler, a quiet GPU, a pause (bench/am_run_job_scenario.py)
ROUTES = ("by-node", "by-alertname")
Webhook = tuple[datetime, dict[str, Any]]


def ts(text: str) -> datetime:
    at = parse_iso(text)
    if at is None:
        raise ValueError(f"not a time: {text!r}")
    return at


def nodes_of(inc: dict[str, Any]) -> set[str]:
    return {n for n in [inc.get("node"), *(inc.get("nodes") or [])] if n}


@dataclass
class AmRun:
    """One recorded run; replays are computed once per route."""

    path: Path = RUNS
    unmuted: bool = False  # replay with the routes' mute windows off (bench/fleetsim/run.py's unmuted)
    repair_timeout: timedelta | None = None  # correlation.response.repair_timeout for a time-compressed scenario
    _hooks: dict[str, list[Webhook]] = field(default_factory=dict)
    _replays: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def truth(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((self.path / "groundtruth.json").read_text())
        return doc

    def problem(self, pid: str) -> dict[str, Any]:
        return next(p for p in self.truth["problems"] if p["id"] == pid)

    def webhooks(self, route: str) -> list[Webhook]:
        if route not in self._hooks:
            rec = read_recording(self.path / f"{route}.jsonl")
            if rec.problems:
                raise ValueError(f"{route}.jsonl: {rec.problems}")
            self._hooks[route] = sorted(rec.webhooks, key=lambda e: e[0])
        return self._hooks[route]

    def replayed(self, route: str) -> dict[str, Any]:
        """`alertd replay --json` of the recording with the shipped rules/."""
        if route not in self._replays:
            rec = read_recording(self.path / f"{route}.jsonl")
            self._replays[route] = as_json(replay(rec, self.rules()))
        return self._replays[route]

    def rules(self) -> RuleSet:
        """The shipped rules/, with this run's replay settings."""
        rules = load_rule_set([ROOT / "rules"])
        if self.repair_timeout is not None:
            corr = rules.correlation
            response = dataclasses.replace(corr.response, repair_timeout=self.repair_timeout)
            rules = dataclasses.replace(rules, correlation=dataclasses.replace(corr, response=response))
        return unmuted(rules) if self.unmuted else rules

    def alerts(self, route: str, alertname: str, status: str = "firing") -> list[tuple[datetime, dict[str, Any]]]:
        """Every alert of that name and status as delivered, with the time alertd received it."""
        return [(at, a) for at, body in self.webhooks(route) for a in body["alerts"]
                if a["labels"]["alertname"] == alertname and a["status"] == status]

    def first_arrival(self, route: str, nodes: list[str]) -> datetime:
        """When alertd first received a firing alert about one of these nodes."""
        return min(at for at, body in self.webhooks(route) for a in body["alerts"]
                   if a["status"] == "firing" and a["labels"].get("node") in nodes)


def incidents_on(out: dict[str, Any], nodes: list[str]) -> list[dict[str, Any]]:
    """Incidents holding any of these nodes (fleets included)."""
    return [i for i in out["incidents"] if nodes_of(i) & set(nodes)]


def own_incidents(out: dict[str, Any], nodes: list[str]) -> list[dict[str, Any]]:
    """Incidents about these nodes only (a fleet that also holds other nodes is judged by the mixing check)."""
    return [i for i in out["incidents"] if nodes_of(i) and nodes_of(i) <= set(nodes)]


def pages(out: dict[str, Any], incident_ids: set[str]) -> list[dict[str, Any]]:
    """The first sent PagerDuty page of each of these incidents, in time order (bench/fleetsim/score.py's
    first_sends: a fleet taking over its node's alert, and keeping it current, pages nobody again)."""
    first: dict[str, dict[str, Any]] = {}
    for (incident, _), n in first_sends(out["notifications"], "page", "pagerduty:").items():
        if incident in incident_ids:
            first.setdefault(incident, n)
    return sorted(first.values(), key=lambda n: n["due"])


def triggers_since(out: dict[str, Any], incident_ids: set[str], since: datetime) -> list[dict[str, Any]]:
    """Every PagerDuty trigger sent for these incidents from ``since`` on (a fleet taking over its node's alert
    is none): what a failed repair's page is counted by, once the incident has paged for the fault itself."""
    return [n for n in sorted(out["notifications"], key=lambda n: n["due"])
            if n["sent"] and n["kind"] == "page" and n["target"].startswith("pagerduty:")
            and n["incident"] in incident_ids and not (n.get("payload") or {}).get("adopt") and ts(n["due"]) >= since]


def mixed(out: dict[str, Any], truth: dict[str, Any]) -> list[dict[str, Any]]:
    """Top-level incidents whose nodes belong to more than one ground-truth problem."""
    owner = {n: p["id"] for p in truth["problems"] for n in p["nodes"]}
    return [i for i in out["incidents"] if not i["parentId"] and len({owner.get(n, n) for n in nodes_of(i)}) > 1]


def describe(incs: list[dict[str, Any]]) -> str:
    """Replay figures of incidents, for a failure message."""
    return "; ".join(f"{i['id']} {i['status']} parent={i['parentId'] or '-'} nodes={sorted(nodes_of(i))} "
                     f"flaps={i['flaps']} previous={i['previousId'] or '-'} opened={i['openedAt'][11:19]} "
                     f"'{i['title']}'" for i in incs)


def describe_pages(ps: list[dict[str, Any]]) -> str:
    return "; ".join(f"{p['incident']} {p['target']} due {p['due'][11:19]} change={p['change']}" for p in ps)


def score(run: AmRun, route: str) -> list[str]:
    """One line of figures per problem: its own incidents, the top-level incidents holding its nodes, flaps,
    pages of its own incidents and of every incident holding its nodes, and how late the first page came."""
    out, lines = run.replayed(route), []
    for p in run.truth["problems"]:
        own, touching = own_incidents(out, p["nodes"]), incidents_on(out, p["nodes"])
        top = [i for i in touching if not i["parentId"]]
        own_pages, all_pages = pages(out, {i["id"] for i in own}), pages(out, {i["id"] for i in touching})
        delay = ""
        if all_pages:
            late = ts(all_pages[0]["due"]) - run.first_arrival(route, p["nodes"])
            delay = f"  first page {late.total_seconds():.0f}s after the first alert"
        lines.append(f"{route:13} {p['id']:21} incidents {len(own):2}  top-level {len(top):2}  "
                     f"flaps {max((i['flaps'] for i in own), default=0)}  pages {len(own_pages)} "
                     f"(with fleets {len(all_pages)}){delay}")
    lines.append(f"{route:13} {'mixing':21} {len(mixed(out, run.truth))} top-level incidents mix problems")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    quiet_hours_off = "--unmuted" in args
    args = [a for a in args if a != "--unmuted"]
    timeout = None
    if "--repair-timeout" in args:
        at = args.index("--repair-timeout")
        timeout = parse_duration(args[at + 1])
        del args[at:at + 2]
    run = AmRun(Path(args[0]) if args else RUNS, unmuted=quiet_hours_off, repair_timeout=timeout)
    for route in ROUTES:
        print("\n".join(score(run, route)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
