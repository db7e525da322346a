"""How a fleet incident grew: the counts its messages and pages tell the trend by.

A storm that grows is news: "16 nodes now, 8 at 13:02, 4 at 12:58; +8 in 6 minutes" says more than an
edited count. The engine (alertd/engine/storm/growth.py) keeps this record on the fleet (annotation
``storm_growth``) and decides from it when a Slack thread hears of a doubling and when pagers are told the
new count; Slack, PagerDuty and the web page read it here to show the trend line. Times are UTC.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from alertd.core.instants import iso, parse_iso
from alertd.core.json_types import JSONObject, JSONValue, as_array, optional_text
from alertd.core.words import counted

GROWTH = "storm_growth"  # fleet annotation: {"points": [[at, nodes], ...], "told": [at, nodes], "due": at | null}
SHOWN = 3  # earlier counts a trend line names


@dataclass(frozen=True, slots=True)
class Point:
    at: datetime
    nodes: int

    def to_json(self) -> JSONValue:
        return [iso(self.at), self.nodes]

    @classmethod
    def from_json(cls, value: object) -> "Point | None":
        """``[at, nodes]`` as ``to_json`` wrote it; None for anything else (the record is then not used)."""
        pair = as_array(value)
        try:
            at = parse_iso(pair[0]) if len(pair) == 2 and isinstance(pair[0], str) else None
        except ValueError:
            return None
        count = pair[1] if len(pair) == 2 else None
        if at is None or not isinstance(count, int) or isinstance(count, bool):
            return None
        return cls(at, count)


@dataclass(slots=True)
class Growth:
    """``points``: the count the fleet opened with, then each count that doubled the one before it (a
    milestone). ``told``: the count pagers were last told (the first page, then each update). ``due``: when
    the next update of the pagers may go, set when the storm grew sooner than the interval allows."""

    points: list[Point] = field(default_factory=list)
    told: Point | None = None
    due: datetime | None = None

    @classmethod
    def of(cls, annotations: JSONObject) -> "Growth | None":
        doc = annotations.get(GROWTH)
        if not isinstance(doc, dict):
            return None
        points = [p for p in map(Point.from_json, as_array(doc.get("points"))) if p is not None]
        if not points:
            return None
        return cls(points, Point.from_json(doc.get("told")), parse_iso(optional_text(doc, "due")))

    def to_json(self) -> JSONObject:
        return {"points": [p.to_json() for p in self.points], "told": self.told.to_json() if self.told else None,
                "due": iso(self.due)}

    def save(self, annotations: JSONObject) -> None:
        annotations[GROWTH] = self.to_json()


def span(delta: timedelta) -> str:
    """A time in words, as a person says it: "under a second", "40 seconds", "6 minutes", "3 hours"."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return counted(seconds, "second")
    if seconds < 2 * 3600:
        return counted(round(seconds / 60), "minute")
    return counted(round(seconds / 3600), "hour")


def trend_line(growth: Growth, nodes: int, last: datetime | None) -> str:
    """"16 nodes now, 8 at 13:02, 4 at 12:58; +8 in 6 minutes": the count, the milestones before it (latest
    first, at most ``SHOWN``), and what came since the latest of them, up to ``last`` (when the latest node
    joined). "" while it never grew past the count it opened with."""
    before = [p for p in growth.points if p.nodes < nodes]
    if not before:
        return ""
    shown = ", ".join(f"{p.nodes} at {p.at:%H:%M}" for p in reversed(before[-SHOWN:]))
    more = " …" if len(before) > SHOWN else ""
    since = before[-1]
    pace = f"; +{nodes - since.nodes} in {span((last or since.at) - since.at)}"
    return f"{counted(nodes, 'node')} now, {shown}{more}{pace}"


def incident_trend(annotations: JSONObject, nodes: int, last: datetime | None) -> str:
    """The trend line of a fleet incident as stored ("" when it has not grown)."""
    growth = Growth.of(annotations)
    return trend_line(growth, nodes, last) if growth is not None else ""


__all__ = ["GROWTH", "Growth", "Point", "incident_trend", "span", "trend_line"]
