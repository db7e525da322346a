"""Reopening: a resolved incident whose key fires again soon is opened again, one incident that says it flaps.

The response to a fault (engine/response.py) reopens its incident, and the fleet it was part of, within the
response window, quietly: the reopen is flagged as a response and pages nothing. Pure: state and ``now`` in.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from alertd.core.durations import format_duration
from alertd.core.vocabulary import EventKind
from alertd.core.model import OPEN, Alert, Event, Incident
from alertd.core.response_marks import flagged
from alertd.engine import response as resp
from alertd.engine.state import EngineState
from alertd.rules.ruleset import CorrelationRules

CLOCK_SLACK = timedelta(minutes=1)
# How long a resolved incident is remembered as the owner of its alerts' late resolves: Prometheus re-sends a
# resolved alert for 15 minutes, and Alertmanager carries it to a group's next flush.
LATE_RESOLVES = timedelta(minutes=30)  # Prometheus' clock against alertd's, for an incident resolved by hand


class ReopenHost(Protocol):
    """What reopening needs of the correlator (engine/correlate.py): its state, rules and change log."""

    state: EngineState
    rules: CorrelationRules

    def record(self, inc: Incident, event: Event, *, member: str = "", urgent: bool = False) -> None: ...


def _last_end(inc: Incident) -> datetime:
    """When a resolved incident's trouble ended: its last alert's end (the alerts' own clock, so a late or
    backlogged delivery is judged by when things happened), or its resolution when none ended (resolved by
    hand)."""
    ends = [m.ends_at for m in inc.members.values() if m.ends_at is not None]
    return max(ends) if ends else inc.resolved_at or inc.opened_at



class Reopening:
    """Reopens resolved incidents for one Correlator, and forgets them once they can no longer reopen."""

    def __init__(self, correlator: ReopenHost):
        self.c = correlator

    def known_resolution(self, alert: Alert) -> bool:
        """Whether a resolved alert is one an incident had (open, or resolved lately): not news."""
        closed = self.c.state.recently_closed(alert.fingerprint)
        return closed is not None and alert.starts_at <= closed.members[alert.fingerprint].starts_at

    def reopen(self, key: str, alert: Alert, now: datetime) -> Incident | None:
        """The incident of ``key`` resolved within the reopen window, opened again: a fault that comes back
        (a flapping GPU, Alertmanager's 5-minute batches) is one incident that says it flaps, not a chain. The
        response to its fault (the operator's cordon after a short Xid, the reboot) reopens it within the
        response window (engine/response.py), quietly: no page for it."""
        inc = self.c.state.closed.get(key)
        window = self.c.rules.reopen_window
        if inc is None or inc.resolved_at is None or not window or (inc.fleet and inc.parent_id):
            return None  # (a fleet merged into another one: the other stands for it)
        rule = self.c.rules.response
        responds = resp.is_symptom(rule, alert.signal) and bool(resp.fault_of(inc, rule, alert.starts_at))
        if responds:
            window = max(window, rule.window)
        gone = alert.starts_at - _last_end(inc)
        if not -CLOCK_SLACK <= gone <= window:
            return None  # back after the window, or an occurrence older than the incident's end (a backfill)
        self.c.state.reopened(inc)
        fleet = self._parent(inc, now, window, responds) if inc.parent_id else None
        if inc.parent_id and fleet is None:
            inc.parent_id = ""  # its fleet is gone for good: it stands alone again
        inc.status, inc.resolved_at, inc.quiet_since = OPEN, None, None
        inc.acknowledged_by, inc.acknowledged_at = "", None
        inc.flaps += 0 if responds else 1  # the operator's cordon after a short fault is no flap
        self.c.state.add(inc)
        self.c.state.storm_indexed = False  # the storm indexes are rebuilt with it open
        what = "in response to its fault" if responds else "again"
        flap = "" if responds else f" (flap {inc.flaps})"
        event = inc.add_event(now, EventKind.REOPENED, f"{alert.name}: {alert.signal.title} {what} "
                                               f"{format_duration(max(gone, timedelta(0)))} after it resolved{flap}",
                              flap=inc.flaps)
        self.c.record(inc, flagged(event, responds), urgent=not responds)
        return inc

    def _parent(self, child: Incident, now: datetime, window: timedelta, responds: bool) -> Incident | None:
        fleet = self.c.state.incidents.get(child.parent_id)
        if fleet is not None:
            return fleet
        closed = [c for c in self.c.state.closed.values() if c.id == child.parent_id]
        if not closed or closed[0].resolved_at is None or now - closed[0].resolved_at > window:
            return None
        fleet = closed[0]
        self.c.state.reopened(fleet)
        fleet.status, fleet.resolved_at, fleet.quiet_since = OPEN, None, None
        fleet.flaps += 1
        self.c.state.add(fleet)
        event = fleet.add_event(now, EventKind.REOPENED, f"{child.node or child.id}: "
                                                 f"{'the repair of its fault' if responds else 'failing again'} "
                                                 f"(flap {fleet.flaps})",
                                flap=fleet.flaps)
        self.c.record(fleet, flagged(event, responds), urgent=not responds)
        return fleet

    def forget(self, now: datetime) -> None:
        keep = max(self.c.rules.reopens_within, LATE_RESOLVES)
        old = [inc for inc in self.c.state.resolved_lately()
               if inc.resolved_at is None or now - inc.resolved_at > keep]
        for inc in old:
            self.c.state.reopened(inc)
