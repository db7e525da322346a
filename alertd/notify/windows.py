"""When notifications are held back: mute windows, maintenance windows and cordoned nodes.

Mute windows recur (weekdays and times of day in a time zone) and apply per
route. Maintenance windows are absolute (start/end) and cover nodes or
clusters. A node cordoned before its problem started is expected to misbehave:
its incidents are muted or downgraded, as the cordon policy says.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import datetime
from typing import Mapping
from zoneinfo import ZoneInfo

from alertd.matchers import Matcher, match_all
from alertd.model import FIRING, Incident

CORDON_KIND = "node_cordoned"


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


@dataclass(frozen=True, slots=True)
class CordonPolicy:
    action: str = "downgrade"  # mute | downgrade | notify
    severity: str = "info"


def cordon_since(inc: Incident) -> datetime | None:
    if CORDON_KIND not in inc.signals:  # the common case, without walking a fleet incident's members
        return None
    starts = [m.starts_at for m in inc.members.values() if m.signal.kind == CORDON_KIND and m.status == FIRING]
    return min(starts) if starts else None


def first_problem_at(inc: Incident) -> datetime:
    starts = [m.starts_at for m in inc.members.values() if m.signal.kind != CORDON_KIND]
    return min(starts) if starts else inc.opened_at
