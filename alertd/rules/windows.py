"""When notifications are held back: mute windows, maintenance windows and cordoned nodes.

Mute windows recur (weekdays and times of day in a time zone) and apply per
route. Maintenance windows are absolute (start/end) and cover nodes or
clusters. A node cordoned before its problem started is planned work: what a
node being worked on shows (not ready, node or exporter down) that really began
after the cordon is muted or downgraded, as the cordon policy says; a fault
signal is never planned.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Mapping
from zoneinfo import ZoneInfo

from alertd.core.json_types import JSONObject, objects
from alertd.core.matchers import Matcher, match_all, parse_matchers
from alertd.core.model import FIRING, Incident, max_severity
from alertd.core.response_marks import REPAIR_FAILED
from alertd.core.vocabulary import SignalKind as K
from alertd.rules.fields import member_fields
from alertd.rules.routing_section import DECLARED_CORDONED

CORDON_KIND = K.NODE_CORDONED


@dataclass(frozen=True, slots=True)
class TimeRange:
    start: int  # minutes after midnight
    end: int  # exclusive; end <= start wraps past midnight (the tail belongs to the next day)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A recurring window, like Alertmanager's time_intervals: weekdays and times of day in a zone."""

    name: str
    tz: ZoneInfo
    weekdays: frozenset[int] = frozenset(range(7))
    times: tuple[TimeRange, ...] = ()

    def contains(self, now: datetime) -> bool:
        local = now.astimezone(self.tz)
        minute = local.hour * 60 + local.minute
        day, prev = local.weekday(), (local.weekday() - 1) % 7
        if not self.times:
            return day in self.weekdays
        for r in self.times:
            if r.start < r.end:
                if day in self.weekdays and r.start <= minute < r.end:
                    return True
            else:  # wraps midnight: [start, 24:00) today, [00:00, end) belongs to the day before
                if day in self.weekdays and minute >= r.start:
                    return True
                if prev in self.weekdays and minute < r.end:
                    return True
        return False

    def ends_after(self, now: datetime) -> datetime | None:
        """When the stretch of the window that holds ``now`` ends (the first boundary after ``now`` that the
        window does not contain), or None when it never ends within a week (every day, all day)."""
        if not self.contains(now):
            return now
        local = now.astimezone(self.tz)
        midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
        minutes = sorted({0, *(r.start for r in self.times), *(r.end for r in self.times)})
        for day in range(9):
            date = (midnight + timedelta(days=day)).date()
            for minute in minutes:
                edge = datetime(date.year, date.month, date.day, minute // 60, minute % 60, tzinfo=self.tz)
                if edge > local and not self.contains(edge):
                    return edge
        return None

    def until_text(self, now: datetime) -> str:
        """``until 08:00 Europe/Berlin`` (``until Mon 08:00 ...`` on another day), in the window's own zone."""
        end = self.ends_after(now)
        if end is None:
            return ""
        same_day = end.date() == now.astimezone(self.tz).date()
        return f"until {end.strftime('%H:%M' if same_day else '%a %H:%M')} {self.tz.key}"


@dataclass(frozen=True, slots=True)
class Maintenance:
    name: str
    start: datetime
    end: datetime
    nodes: tuple[str, ...] = ()  # glob patterns
    clusters: tuple[str, ...] = ()
    matchers: tuple[Matcher, ...] = ()

    def covers_node(self, cluster: str, node: str, fields: Mapping[str, str], now: datetime) -> bool:
        if not (self.start <= now < self.end):
            return False
        if self.clusters and cluster not in self.clusters:
            return False
        if self.nodes and not any(fnmatch.fnmatchcase(node, p) for p in self.nodes):
            return False
        return match_all(self.matchers, {**fields, "node": node})

    def covers(self, inc: Incident, fields: Mapping[str, str], now: datetime) -> bool:
        """A fleet incident is covered only when every one of its nodes is."""
        nodes = [n for n in (list(inc.nodes) if inc.fleet else [inc.node]) if n] or [""]
        return all(self.covers_node(inc.cluster, n, fields, now) for n in nodes)


def _parsed(items: tuple[str, ...]) -> tuple[Matcher, ...]:
    return tuple(parse_matchers(list(items)))


@dataclass(frozen=True, slots=True)
class Pending:
    """Alerts matching ``matchers`` started ``lag`` before their startsAt (their rule's ``for:``)."""

    matchers: tuple[Matcher, ...]
    lag: timedelta


@dataclass(frozen=True, slots=True)
class CordonPolicy:
    """routing.cordoned read (its defaults the declaration's: alertd/rules/routing_section.py)."""

    action: str = DECLARED_CORDONED.action  # mute | downgrade | notify
    severity: str = DECLARED_CORDONED.severity
    expected: tuple[tuple[Matcher, ...], ...] = tuple(_parsed(m) for m in DECLARED_CORDONED.expected)
    pending: tuple[Pending, ...] = tuple(Pending(_parsed(p.match), p.lag) for p in DECLARED_CORDONED.pending)

    def lag(self, fields: Mapping[str, str]) -> timedelta:
        return next((p.lag for p in self.pending if match_all(p.matchers, fields)), timedelta(0))

    def is_expected(self, fields: Mapping[str, str]) -> bool:
        return any(match_all(m, fields) for m in self.expected)


@dataclass(frozen=True, slots=True)
class Cordon:
    """When a node was cordoned (the earliest cordon alert's start) and, once every cordon alert of the
    incident resolved, when that ended. An incident remembers its cordon while it lives."""

    since: datetime
    until: datetime | None = None


def cordon_of(inc: Incident) -> Cordon | None:
    """The incident's own cordon, resolved or not: planned work stays planned after the uncordon."""
    if CORDON_KIND not in inc.signals:  # the common case, without walking a fleet incident's members
        return None
    cordons = [m for m in inc.members.values() if m.signal.kind == CORDON_KIND]
    if not cordons:
        return None
    firing = any(m.status == FIRING for m in cordons)
    ends = [m.ends_at for m in cordons if m.ends_at is not None]
    return Cordon(min(m.starts_at for m in cordons), None if firing or not ends else max(ends))


def cordon_since(inc: Incident) -> datetime | None:
    cordon = cordon_of(inc)
    return cordon.since if cordon else None


def unplanned_severity(inc: Incident, cordon: Cordon, policy: CordonPolicy) -> str | None:
    """None when all the incident shows is planned work; else the highest severity of what is not.

    Planned: a signal expected while a node is worked on that really started after the cordon (and
    before it ended). Anything else (a fault signal, or a node lost before the cordon) is not, and
    neither is a signal enrichment found (the kernel log's Xid). Planned members do not count toward
    the severity: a NodeDown of the planned reboot does not make a later fault critical. Neither does the
    response to the node's own fault (``Member.response``: the cordon and reboot that repair it), unless the
    repair failed."""
    found: list[str] = []
    folded: list[str] = []
    failed = REPAIR_FAILED in inc.annotations
    for m in inc.members.values():
        if m.signal.kind == CORDON_KIND or (m.response and not failed):
            continue
        fields = member_fields(m)
        start = m.starts_at - policy.lag(fields)
        within = cordon.since < start and (cordon.until is None or start <= cordon.until)
        if not (within and policy.is_expected(fields)):
            (folded if m.folded else found).append(m.signal.severity)
    found += [str(s.get("severity") or "") for s in _evidence(inc)]
    found = found or folded
    return max_severity(*found) if found else None


def _evidence(inc: Incident) -> list[JSONObject]:
    """Signals enrichment found (the kernel log's Xids), read defensively from the annotations."""
    return objects(inc.annotations.get(EVIDENCE_KEY))


EVIDENCE_KEY = "evidence_signals"  # the engine's annotation of signals found by enrichment
