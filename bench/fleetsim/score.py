"""Score what ``alertd replay --json`` made of a run against the run's ground truth.

An incident is credited with the problems whose alerts it holds: its members
(fingerprint and startsAt) and the alerts its timeline names (fingerprint at a
time: the alert's spell that had started by then). A node incident folded into
a fleet incident counts as part of the fleet: what people see is the
top-level incident. A page is the first PagerDuty ``page`` notification
actually sent for an incident; a Slack post is the first message sent to a
channel (thread replies and updates are not posts).
"""
from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Iterable

from bench.fleetsim.model import Problem

PROMPT = 300.0  # a page within 5 minutes of the first alert alertd received counts as prompt


@dataclass(slots=True)
class StormScore:
    problem: str
    cause: str
    nodes: int
    incidents: int
    pages: int


@dataclass(slots=True)
class Score:
    reopen_window: float = 0.0     # seconds: a split across a longer gap in a problem's alerts is allowed
    problems: int = 0              # problems whose alerts reached alertd
    page_worthy: int = 0
    incidents: int = 0             # top-level incidents
    incidents_per_problem: float = 0.0
    split: int = 0                 # problems spread over several top-level incidents without a real gap
    split_by_gap: int = 0          # ... with a gap longer than the reopen window between their alerts
    mixed: int = 0                 # top-level incidents holding unrelated problems
    orphans: int = 0               # top-level incidents holding no known problem's alert
    recall: float = 1.0
    recall_5m: float = 1.0
    false_pages: int = 0
    pages: int = 0
    pages_per_page_worthy: float = 0.0
    posts_per_problem: float = 0.0
    storms: list[StormScore] = field(default_factory=list)
    repair_pages: dict[str, int] = field(default_factory=dict)  # failed repair -> pages sent from its failure on
    worthy_incidents: int = 0      # top-level incidents holding a page-worthy problem whose cause has words
    named: float = 1.0             # ... the share whose final title names that cause
    unnamed: list[str] = field(default_factory=list)  # "incident: final title" of the others
    missed: list[str] = field(default_factory=list)   # page-worthy problems never paged
    late: list[str] = field(default_factory=list)     # paged later than PROMPT after their first alert arrived
    late_by: dict[str, float] = field(default_factory=dict)  # seconds from the first alert received to the page
    false: list[str] = field(default_factory=list)    # incidents paged for no page-worthy problem
    splits: list[str] = field(default_factory=list)   # the problems counted in split
    mixes: list[str] = field(default_factory=list)    # the incidents counted in mixed
    unseen: list[str] = field(default_factory=list)   # page-worthy, but no alert of it reached alertd before the
    #                                                   operator acted (a cordon, then the repair's reboot): left out
    history: list[dict[str, Any]] = field(default_factory=list)  # the history cases (--history): pages, verdict

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Alerts:
    """(fingerprint, startsAt) -> problem, and a fingerprint's spells in time order."""

    def __init__(self, problems: Iterable[Problem]):
        self.exact: dict[tuple[str, float], str] = {}
        spells: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for p in problems:
            for fp, t in p.alerts:
                self.exact[(fp, round(t, 3))] = p.id
                spells[fp].append((t, p.id))
        self.spells = {fp: sorted(v) for fp, v in spells.items()}

    def at(self, fp: str, t: float) -> str | None:
        """The problem of the latest spell of ``fp`` that started by ``t``."""
        spells = self.spells.get(fp)
        if not spells:
            return None
        i = bisect.bisect_right(spells, (t, "\uffff")) - 1
        return spells[max(i, 0)][1]


def _secs(start: datetime, text: str | None) -> float | None:
    if not text:
        return None
    return round((datetime.fromisoformat(text.replace("Z", "+00:00")) - start).total_seconds(), 3)


def _speaker(inc: dict[str, Any]) -> str:
    """The incident that speaks for this one: its fleet, the stalled job it is a suspect of, its bad domain."""
    notes = inc.get("annotations") or {}
    return str(inc.get("parentId") or notes.get("job_suspect") or notes.get("domain_of") or "")


def top_level(incidents: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Incident id -> the top-level incident it is folded into (itself when none)."""
    out = {}
    for iid in incidents:
        cur, seen = iid, set()
        while _speaker(incidents.get(cur, {})) and cur not in seen:
            seen.add(cur)
            cur = _speaker(incidents[cur])
        out[iid] = cur
    return out


def credited(report: dict[str, Any], problems: dict[str, Problem], start: datetime) -> dict[str, set[str]]:
    """Top-level incident id -> the problems whose alerts it (or a node incident folded into it) holds."""
    alerts = _Alerts(problems.values())
    incidents = {inc["id"]: inc for inc in report["incidents"]}
    top = top_level(incidents)
    out: dict[str, set[str]] = defaultdict(set)
    for iid, inc in incidents.items():
        found = out[top[iid]]
        for mem in inc.get("members") or []:
            t = _secs(start, mem.get("startsAt"))
            pid = alerts.exact.get((mem["fingerprint"], t)) if t is not None else None
            pid = pid or (alerts.at(mem["fingerprint"], t) if t is not None else None)
            if pid:
                found.add(pid)
        for ev in inc.get("timeline") or []:
            fp = (ev.get("data") or {}).get("fingerprint")
            t = _secs(start, ev.get("at"))
            if fp and t is not None and (pid := alerts.at(fp, t)):
                found.add(pid)
    return out


def related(a: Problem, b: Problem) -> bool:
    """The same storm, or problems of one node: one incident may hold both."""
    return a.id == b.id or bool(set(a.nodes) & set(b.nodes))


def first_sends(notifications: Iterable[dict[str, Any]], kind: str, target_kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(incident, target) -> the first sent notification of ``kind`` to a ``target_kind`` target that was news, in
    time order. A fleet taking over the alert of its node already sent there is none, and nor is any later send of
    that fleet's to the same target (its growing count: the same alert)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    took_over: set[tuple[str, str]] = set()
    for n in sorted(notifications, key=lambda n: n["due"]):
        target = str(n["target"])
        if not n["sent"] or n["kind"] != kind or not target.startswith(target_kind) or "|" in target:
            continue
        key = (n["incident"], target)
        adopted = (n.get("payload") or {}).get("adopt")
        if adopted and (adopted, target) in out:
            took_over.add(key)
            continue
        if key not in out and key not in took_over:
            out[key] = n
    return out


def firsts(report: dict[str, Any], kind: str, target_kind: str) -> dict[str, str]:
    """Incident id and target -> when the first notification of ``kind`` was sent to a ``target_kind`` target."""
    return {f"{i}\0{t}": n["due"] for (i, t), n in first_sends(report["notifications"], kind, target_kind).items()}


def score(report: dict[str, Any], problems: dict[str, Problem], start: datetime, reopen_window: float) -> Score:
    s = Score(reopen_window=reopen_window)
    top = top_level({inc["id"]: inc for inc in report["incidents"]})
    tops = credited(report, problems, start)
    holders = _incident_figures(s, tops, problems, reopen_window)
    pages = _page_figures(s, report, problems, start, top, tops, holders)
    _repair_pages(s, report, problems, start, top, holders)
    _title_figures(s, report, problems, tops)
    s.history = history_outcomes(report, problems, start, top, holders)
    s.posts_per_problem = len(firsts(report, "show", "slack")) / max(1, s.problems)
    for p in problems.values():
        if p.storm:
            held = holders[p.id]
            s.storms.append(StormScore(p.id, p.cause, len(p.nodes), len(held), sum(pages.get(t, 0) for t in held)))
    return s


def _incident_figures(s: Score, tops: dict[str, set[str]], problems: dict[str, Problem],
                      reopen_window: float) -> dict[str, set[str]]:
    """Incidents, splits, mixes; returns problem -> the top-level incidents holding it."""
    delivered = {pid: p for pid, p in problems.items() if p.first_received is not None}
    holders: dict[str, set[str]] = defaultdict(set)
    for tid, pids in tops.items():
        for pid in pids:
            holders[pid].add(tid)
        if not pids:
            s.orphans += 1
        elif any(not related(problems[a], problems[b]) for a in pids for b in pids if a < b):
            s.mixed += 1
            s.mixes.append(tid)
    s.problems = len(delivered)
    s.incidents = sum(1 for pids in tops.values() if pids)
    s.incidents_per_problem = sum(len(holders[pid]) for pid in delivered) / max(1, len(delivered))
    for pid, p in delivered.items():
        if len(holders[pid]) > 1:
            if _largest_gap(p) > reopen_window:
                s.split_by_gap += 1
            else:
                s.split += 1
                s.splits.append(pid)
    return holders


def _page_figures(s: Score, report: dict[str, Any], problems: dict[str, Problem], start: datetime,
                  top: dict[str, str], tops: dict[str, set[str]], holders: dict[str, set[str]]) -> dict[str, int]:
    """Pages, false pages, recall; returns top-level incident -> pages sent for it or its folded incidents."""
    first: dict[str, float] = {}  # top-level incident -> its first page
    count: dict[str, int] = defaultdict(int)
    for key, due in firsts(report, "page", "pagerduty").items():
        iid = key.split("\0")[0]
        tid = top.get(iid, iid)
        t = _secs(start, due)
        if t is not None and t >= _failed_by(tops.get(tid, ()), problems):
            continue  # the page of a failed repair: counted in repair_pages
        s.pages += 1
        count[tid] += 1
        if t is not None and (tid not in first or t < first[tid]):
            first[tid] = t
        if not any(problems[pid].page_worthy for pid in tops.get(tid, ())):
            s.false_pages += 1
            s.false.append(tid)
    worthy = [p for p in problems.values() if p.page_worthy and seen_before_acted(p)]
    s.unseen = sorted(p.id for p in problems.values() if p.page_worthy and not seen_before_acted(p))
    s.page_worthy = len(worthy)
    paged = prompt = 0
    for p in worthy:
        when = min((first[t] for t in holders[p.id] if t in first), default=None)
        if when is None:
            s.missed.append(p.id)
            continue
        paged += 1
        since = p.extent_received if p.extent_received is not None else p.first_received
        if since is not None and when - since <= PROMPT:
            prompt += 1
        else:
            s.late.append(p.id)
            if since is not None:
                s.late_by[p.id] = round(when - since, 1)
    s.recall = paged / max(1, len(worthy))
    s.recall_5m = prompt / max(1, len(worthy))
    s.pages_per_page_worthy = s.pages / max(1, len(worthy))
    return count


def _failed_by(pids: Iterable[str], problems: dict[str, Problem]) -> float:
    """When the first repair of these problems was seen to fail (infinity when none did)."""
    return min((t for pid in pids if (t := problems[pid].repair_failed_at) is not None), default=float("inf"))


def _repair_pages(s: Score, report: dict[str, Any], problems: dict[str, Problem], start: datetime,
                  top: dict[str, str], holders: dict[str, set[str]]) -> None:
    """Per failed repair: PagerDuty pages sent from the failure on for the incidents holding the problem (a
    fleet adopting its node's alert is no page). Exactly one each is right: the repair failed, say so once."""
    for p in problems.values():
        if p.repair_failed_at is None or p.first_received is None:
            continue
        held, sent = holders.get(p.id, set()), 0
        for n in report["notifications"]:
            t = _secs(start, n["due"])
            if (n["sent"] and n["kind"] == "page" and str(n["target"]).startswith("pagerduty")
                    and not (n.get("payload") or {}).get("adopt") and t is not None and t >= p.repair_failed_at
                    and top.get(n["incident"], n["incident"]) in held):
                sent += 1
        s.repair_pages[p.id] = sent


def _title_figures(s: Score, report: dict[str, Any], problems: dict[str, Problem],
                   tops: dict[str, set[str]]) -> None:
    """The share of top-level incidents holding a page-worthy problem whose final title names its cause."""
    titles = {inc["id"]: str(inc.get("title") or "") for inc in report["incidents"]}
    named = 0
    for tid, pids in tops.items():
        words = [w for pid in pids if problems[pid].page_worthy for w in problems[pid].names]
        if not words:
            continue
        s.worthy_incidents += 1
        if any(w.lower() in titles.get(tid, "").lower() for w in words):
            named += 1
        else:
            s.unnamed.append(f"{tid}: {titles.get(tid, '')}")
    s.named = named / s.worthy_incidents if s.worthy_incidents else 1.0


def seen_before_acted(p: Problem) -> bool:
    """Whether an alert of the fault itself reached alertd before the operator acted on it. When the first one
    to arrive is the operator's cordon (the fault's own alerts never fired or never left Alertmanager), all
    alertd sees is a cordon and a reboot, which is how planned work looks: no page can be asked for it."""
    return p.first_received is not None and (p.acted_at is None or p.first_received < p.acted_at)


def _largest_gap(p: Problem) -> float:
    """The longest time with none of the problem's alerts firing, between its first and its last."""
    gap, end = 0.0, None
    for a, b in sorted(p.spells):
        if end is not None and a > end:
            gap = max(gap, a - end)
        end = b if end is None else max(end, b)
    return gap


def history_outcomes(report: dict[str, Any], problems: dict[str, Problem], start: datetime, top: dict[str, str],
                     holders: dict[str, set[str]]) -> list[dict[str, Any]]:
    """Per history case (bench/fleetsim/history.py): its incidents, the PagerDuty pages sent for them (every
    trigger, not only the first: a verdict arriving later must not page again) and the verdict they hold.
    ``ok``: the expected rule's verdict (none for a first fault) in one incident, and a case with a verdict
    paged exactly once. A first fault may page twice for reasons of its own (an Xid 48 turns critical when the
    ECC alert joins it: PagerDuty's alert is triggered again with the new severity)."""
    incidents = {inc["id"]: inc for inc in report["incidents"]}
    out = []
    for p in problems.values():
        if p.expect_verdict is None or p.first_received is None:
            continue
        held = sorted(holders.get(p.id, ()))
        pages = sum(1 for n in report["notifications"]
                    if n["sent"] and n["kind"] == "page" and str(n["target"]).startswith("pagerduty")
                    and not (n.get("payload") or {}).get("adopt") and top.get(n["incident"], n["incident"]) in held)
        verdicts = [v for tid in held if (v := incidents.get(tid, {}).get("verdict"))]
        v = verdicts[0] if verdicts else {}
        out.append({"problem": p.id, "cause": p.cause, "node": p.nodes[0], "incidents": held, "pages": pages,
                    "expect": p.expect_verdict, "verdict": v.get("rule", ""), "action": v.get("action", ""),
                    "line": v.get("line", ""),
                    "ok": len(held) == 1 and v.get("rule", "") == p.expect_verdict
                    and (pages == 1 if p.expect_verdict else pages >= 1)})
    return out
