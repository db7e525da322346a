"""The history judge: an incident, a snapshot of its GPUs' and node's past, the history rules and a time in,
a verdict (or none) out. Pure: the store reads the snapshot (alertd/store/history_snapshot.py) before the
step, through the ``History`` Protocol defined here; the judge does no I/O and reads no clock.

Three kinds of rule (rules/history.yml):

* repeat_offender: the new incident is the Nth matching one of a GPU (its UUID, on whatever node it sat) or
  of a node within the window;
* repair_not_held: the new incident's fault was the fault of an earlier incident of the GPU or node, and it
  is back within ``within`` of that incident's repair (its uncordon, or the end of a remediation);
* lemon_node: the node was remediated ``count`` times within the window.

Of the rules that find something, the one whose action climbs highest on the ladder wins (the first in file
order on a tie). A verdict that would not raise the incident's action nor its severity is still given: it
says why the incident's action stands where it stands.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Protocol, Sequence

from alertd.core.model import SEVERITY_RANK, Incident, Member, as_severity
from alertd.core.verdict import HistoryVerdict, action_text, ladder_action, ladder_rank
from alertd.core.vocabulary import NEVER_FAULT, EventKind, HistoryScope, SignalKind
from alertd.rules.history import LEMON_NODE, REPAIR_NOT_HELD, REPEAT_OFFENDER, HistoryRule
from alertd.core.words import counted



class PastFault(Protocol):
    """One earlier incident as one GPU (``gpu``) or its node (``gpu`` "") saw it."""

    @property
    def incident(self) -> str: ...
    @property
    def opened_at(self) -> datetime: ...
    @property
    def gpu(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def xids(self) -> tuple[int, ...]: ...
    @property
    def signals(self) -> tuple[str, ...]: ...
    @property
    def alertnames(self) -> tuple[str, ...]: ...
    @property
    def repaired_at(self) -> datetime | None: ...  # node rows: the uncordon or a remediation's end
    @property
    def repair(self) -> str: ...  # what the repair was ("uncordon", "reboot_node", ...)


class PastRemediation(Protocol):
    @property
    def incident(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def at(self) -> datetime: ...


class History(Protocol):
    """What the judge reads of the past: every row newer than the rules' longest look-back."""

    @property
    def faults(self) -> Sequence[PastFault]: ...
    @property
    def remediations(self) -> Sequence[PastRemediation]: ...


@dataclass(frozen=True, slots=True)
class Seen:
    """The new incident as one GPU (or its node, ``gpu`` "") shows it now."""

    gpu: str
    xids: tuple[int, ...]
    signals: tuple[str, ...]
    alertnames: tuple[str, ...]


def is_fault(m: Member) -> bool:
    """Whether a member shows the incident's fault: not a repair symptom, not fallout folded in."""
    return not m.response and not m.folded and m.signal.kind not in NEVER_FAULT


def judgeable(inc: Incident) -> bool:
    """Whether the judge has anything to judge: a node's own incident with a fault (not only repair symptoms)."""
    return not inc.fleet and bool(inc.node) and any(is_fault(m) for m in inc.members.values())


def seen_now(inc: Incident) -> list[Seen]:
    """The incident's node view, then one per GPU UUID, from its cause members (repair symptoms left out)."""
    per: dict[str, tuple[set[int], set[str], set[str]]] = {"": (set(), set(), set())}
    for m in inc.members.values():
        if not is_fault(m):
            continue
        uuid = m.subject.gpu.uuid if m.subject.gpu is not None else ""
        for key in {"", uuid}:
            xids, signals, names = per.setdefault(key, (set(), set(), set()))
            if m.signal.xid:
                xids.add(m.signal.xid)
            signals.add(m.signal.kind)
            names.add(m.alertname)
    return [Seen(k, tuple(sorted(x)), tuple(sorted(s)), tuple(sorted(n))) for k, (x, s, n) in per.items()]


def judge(inc: Incident, history: History, rules: Iterable[HistoryRule], now: datetime) -> HistoryVerdict | None:
    """The verdict the past gives ``inc`` at ``now``, or None (a first fault, or no rule with an action)."""
    if not judgeable(inc):
        return None  # a fleet, no node, or only repair symptoms so far
    seen = seen_now(inc)
    was = ladder_action(inc.primary.action) if inc.primary else ""
    best: HistoryVerdict | None = None
    index = by_subject(history)
    for rule in rules:
        if not rule.action:
            continue
        found = _apply(rule, inc, seen, history, now, was, index)
        if found is not None and (best is None or ladder_rank(found.action) > ladder_rank(best.action)):
            best = found
    return best


def _apply(rule: HistoryRule, inc: Incident, seen: list[Seen], history: History, now: datetime,
           was: str, index: dict[str, list[PastFault]]) -> HistoryVerdict | None:
    if rule.kind == REPEAT_OFFENDER:
        return _repeat(rule, inc, seen, now, was, index)
    if rule.kind == REPAIR_NOT_HELD:
        return _not_held(rule, inc, seen, now, was, index)
    if rule.kind == LEMON_NODE:
        return _lemon(rule, inc, history, now, was)
    return None


def by_subject(history: History) -> dict[str, list[PastFault]]:
    """The snapshot's rows by GPU UUID, and by "\\0" + node for the node's own rows."""
    out: dict[str, list[PastFault]] = {}
    for f in history.faults:
        out.setdefault(f.gpu or "\0" + f.node, []).append(f)
    return out


def _repeat(rule: HistoryRule, inc: Incident, seen: list[Seen], now: datetime, was: str,
            index: dict[str, list[PastFault]]) -> HistoryVerdict | None:
    since = now - rule.window
    for view in (s for s in seen if (s.gpu == "") == (rule.scope == HistoryScope.NODE)):
        if not rule.counts(view.xids, view.signals, view.alertnames):
            continue
        past = [f for f in index.get(view.gpu if view.gpu else "\0" + inc.node, ())
                if f.incident != inc.id and f.opened_at >= since and rule.counts(f.xids, f.signals, f.alertnames)]
        if rule.all_of:
            rows = [(view.xids, view.signals, view.alertnames)] + [(f.xids, f.signals, f.alertnames) for f in past]
            if not all(any(c.matches_facts(x, s, a) for x, s, a in rows)
                       for c in rule.all_of):
                continue
        elif len(past) + 1 < rule.count:
            continue
        ids = _newest_first(past)
        what = _fault_words(rule, view.xids, view.signals, [(f.xids, f.signals) for f in past])
        where = f"GPU {short_gpu(view.gpu)}" if view.gpu else f"node {inc.node}"
        head = f"{ordinal(len(past) + 1)} {what} on {where} in {window_words(rule.window)}"
        return _verdict(rule, inc, head, ids, was, view.gpu or inc.node)
    return None


def _not_held(rule: HistoryRule, inc: Incident, seen: list[Seen], now: datetime, was: str,
              index: dict[str, list[PastFault]]) -> HistoryVerdict | None:
    node_view = seen[0]
    if not rule.counts(node_view.xids, node_view.signals, node_view.alertnames):
        return None
    own = index.get("\0" + inc.node, ())  # the node's own rows, not its GPUs'
    for f in sorted(own, key=lambda f: f.repaired_at or f.opened_at, reverse=True):
        if f.repaired_at is None or f.incident == inc.id:
            continue
        if not (f.repaired_at <= now and now - f.repaired_at <= rule.within and f.opened_at >= now - rule.window):
            continue
        same = _same_fault(node_view, f)
        if not same:
            continue
        head = (f"{same} back on node {inc.node} {span_words(now - f.repaired_at)} after the "
                f"{f.repair or 'repair'} of {f.incident}: the repair did not hold")
        return _verdict(rule, inc, head, (f.incident,), was, inc.node)
    return None


def _lemon(rule: HistoryRule, inc: Incident, history: History, now: datetime, was: str) -> HistoryVerdict | None:
    since = now - rule.window
    done = sorted((r for r in history.remediations if r.node == inc.node and since <= r.at <= now),
                  key=lambda r: r.at, reverse=True)
    if len(done) < rule.count:
        return None
    ids = tuple(dict.fromkeys(r.incident for r in done))
    head = f"node {inc.node} remediated {counted(len(done), 'time')} in {window_words(rule.window)}: contact support"
    return _verdict(rule, inc, head, ids, was, inc.node)


def _verdict(rule: HistoryRule, inc: Incident, head: str, ids: tuple[str, ...], was: str,
             subject: str) -> HistoryVerdict:
    last = f" (last: {', '.join(ids[:3])})" if ids and rule.kind == REPEAT_OFFENDER else ""
    tail = f"; action: {action_text(rule.action)}" + (f" (was: {action_text(was)})" if was and was != rule.action else "")
    severity = rule.severity if rule.severity and SEVERITY_RANK.get(rule.severity, 0) > \
        SEVERITY_RANK.get(inc.severity, 0) else ""
    return HistoryVerdict(rule=rule.name, kind=rule.kind, line=head + last + tail, action=rule.action,
                          was_action=was, severity=severity, incidents=ids, subject=subject)


def _same_fault(now: Seen, past: PastFault) -> str:
    """The fault the new incident shares with an earlier one ("Xid 79", "signal ecc"), or ""."""
    xids = sorted(set(now.xids) & set(past.xids))
    if xids:
        return "Xid " + "/".join(map(str, xids))
    kinds = sorted((set(now.signals) & set(past.signals)) - NEVER_FAULT - {SignalKind.XID})
    return f"{kinds[0]} fault" if kinds else ""


def _fault_words(rule: HistoryRule, xids: tuple[int, ...], signals: tuple[str, ...],
                 past: list[tuple[tuple[int, ...], tuple[str, ...]]]) -> str:
    conds = rule.any_of or rule.all_of
    if len(conds) == 1:
        return conds[0].describe()
    named = {c.xid for c in conds if c.xid}
    seen = sorted({x for x in xids if x in named} | {x for xs, _ in past for x in xs if x in named})
    return ("fatal Xid (" + ", ".join(f"Xid {x}" for x in seen) + ")") if seen else "matching fault"


def _newest_first(past: list[PastFault]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f.incident for f in sorted(past, key=lambda f: f.opened_at, reverse=True)))


def short_gpu(uuid: str) -> str:
    """GPU-2f6b...-...9173 -> "GPU-…-9173": enough to tell GPUs of one node apart in one line."""
    return f"GPU-…-{uuid[-4:]}" if len(uuid) > 12 else uuid


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def window_words(span: timedelta) -> str:
    """7d -> "7 days", 24h -> "24 hours", 1d -> "1 day"."""
    if span.total_seconds() > 0 and span % timedelta(days=1) == timedelta(0) and span != timedelta(days=1):
        return f"{span.days} days"
    hours = span.total_seconds() / 3600
    if hours == int(hours) and hours >= 1:
        return counted(int(hours), "hour")
    return counted(int(span.total_seconds() // 60), "minute")


def span_words(span: timedelta) -> str:
    """How long after: "3 hours", "2 days"."""
    if span >= timedelta(days=2):
        return counted(span.days, "day")
    if span >= timedelta(hours=2):
        return counted(int(span.total_seconds() // 3600), "hour")
    return counted(max(1, int(span.total_seconds() // 60)), "minute")


VERDICT_EVENT = EventKind.VERDICT  # the timeline event that tells of a new verdict (routing: shown, never paged again)


def apply_verdict(inc: Incident, verdict: HistoryVerdict | None, now: datetime) -> bool:
    """Keep ``verdict`` on the incident when it is its first or climbs higher than the one it has (a verdict is
    never taken back); raise the severity it names; tell of it on the timeline. True when the incident changed."""
    old = inc.verdict
    if verdict is None or (old is not None and ladder_rank(verdict.action) <= ladder_rank(old.action)):
        return False
    inc.verdict = verdict
    if verdict.severity and SEVERITY_RANK.get(verdict.severity, 0) > SEVERITY_RANK.get(inc.severity, 0):
        inc.severity = as_severity(verdict.severity)
    inc.add_event(now, VERDICT_EVENT, verdict.line, rule=verdict.rule, action=verdict.action)
    return True
