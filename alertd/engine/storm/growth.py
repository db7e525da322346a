"""A growing storm is news: when its thread hears of it, and when its pages are told the new count.

Routing edits a fleet's message as nodes join, which no one is notified of, and PagerDuty keeps the summary
of the first page ("on 8 nodes" while the fleet reaches 60). After each step that changed an open fleet,
``note`` compares its node count with the record it keeps (core/storm_growth.py):

* ``storm_doubled`` when the count reached twice the last milestone (the count the fleet opened with, then
  each doubling): 8 -> 16 -> 32. One event per doubling, however many nodes one step brings (8 -> 40 is
  one), with the trend as its text; a Slack thread gets it as a reply.
* ``storm_grew`` when the count is above what pagers were last told, at most once per ``every``
  (``correlation.storm.page_updates``): growth sooner than that sets ``due``, and ``due`` (called by the
  engine's tick) tells them then, with the count of that moment. A fleet that only shrank, or is
  acknowledged or resolved, tells pagers nothing. PagerDuty sends it as a repeated trigger on the same
  alert (notify/, integrations/pagerduty.py).

Pure: the fleet and ``now`` in, events out; the record is stored with the fleet, so a restart or a new
leader decides the same.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from alertd.core.model import OPEN, Event, Incident
from alertd.core.storm_growth import Growth, Point, trend_line
from alertd.core.vocabulary import EventKind


def note(fleet: Incident, now: datetime, every: timedelta) -> list[Event]:
    """What one step's change of an open fleet means: a doubling, an update for pagers, or nothing."""
    nodes = len(fleet.nodes)
    growth = Growth.of(fleet.annotations)
    if growth is None:  # the step it opened in (or the first since this record was kept): its first page
        start = Point(now, nodes)
        Growth([start], told=start).save(fleet.annotations)
        return []
    events: list[Event] = []
    last = growth.points[-1]
    if nodes >= 2 * last.nodes:
        growth.points.append(Point(now, nodes))
        events.append(fleet.add_event(now, EventKind.STORM_DOUBLED, trend_line(growth, nodes, fleet.storm_last or now),
                                      nodes=nodes, was=last.nodes))
    told = growth.told or growth.points[0]
    if every and fleet.status == OPEN and nodes > told.nodes and growth.due is None:
        growth.due = max(now, told.at + every)
    if growth.due is not None and growth.due <= now:
        events += _tell(fleet, growth, now)
    growth.save(fleet.annotations)
    return events


def due(fleet: Incident, now: datetime) -> list[Event]:
    """The update for pagers that waited for its interval, once it is due (the engine's tick)."""
    growth = Growth.of(fleet.annotations)
    if growth is None or growth.due is None or growth.due > now:
        return []
    events = _tell(fleet, growth, now)
    growth.save(fleet.annotations)
    return events


def _tell(fleet: Incident, growth: Growth, now: datetime) -> list[Event]:
    """Pagers hear the count of now, if the fleet is open and larger than they were told."""
    growth.due = None
    told = growth.told or growth.points[0]
    nodes = len(fleet.nodes)
    if fleet.status != OPEN or nodes <= told.nodes:
        return []
    growth.told = Point(now, nodes)
    return [fleet.add_event(now, EventKind.STORM_GREW, f"pages updated: {nodes} nodes now, {told.nodes} at {told.at:%H:%M}",
                            nodes=nodes, was=told.nodes)]


__all__ = ["due", "note"]
