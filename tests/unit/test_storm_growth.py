"""A growing storm is news: the engine decides when a fleet's thread hears of a doubling and when its
pages are told the new count (engine/growth.py), on a virtual clock."""
from __future__ import annotations

from datetime import timedelta

from alertd.core.model import Change, Incident
from alertd.core.storm_growth import DOUBLED, GREW, Growth, Point, incident_trend, span, trend_line
from alertd.engine.pipeline import Engine

from tests.unit.builders import alert, at, engine, xid


def node(name: str, starts: float) -> list:
    return [xid(79, node=name, gpu="3", severity="warning"),
            alert("DCGMExporterDown", node=name, starts=starts, severity="warning", job="dcgm-exporter")]


class Storm:
    """Nodes failing in batches, one engine step per batch and a tick every ``tick`` seconds between."""

    def __init__(self, e: Engine | None = None):
        self.e = e or engine()
        self.changes: list[Change] = []
        self.count = 0
        self.now = 0.0

    def batch(self, t: float, n: int) -> None:
        self.until(t)
        names = [f"gpu-{self.count + i:03d}" for i in range(n)]
        self.count += n
        self.changes += self.e.ingest([a for name in names for a in node(name, t)], at(t))

    def until(self, t: float, tick: float = 1.0) -> None:
        while self.now + tick <= t:
            self.now += tick
            self.changes += self.e.tick(at(self.now))
        self.now = max(self.now, t)

    @property
    def fleet(self) -> Incident:
        [fleet] = [i for i in self.e.state.incidents.values() if i.fleet]
        return fleet

    def events(self, kind: str) -> list[tuple[float, str, int]]:
        """(seconds after T0, text, nodes) of the fleet's events of ``kind``, each once."""
        seen = {}
        for c in self.changes:
            for ev in c.events:
                if c.incident.fleet and ev.kind == kind:
                    seen[id(ev)] = ((ev.at - at(0)).total_seconds(), ev.text, int(str(ev.data["nodes"])))
        return sorted(seen.values())


def test_the_trend_line_names_the_milestones_latest_first_and_the_pace_since_the_last():
    g = Growth([Point(at(0), 4), Point(at(240), 8), Point(at(600), 16)])
    assert trend_line(g, 16, at(600)) == "16 nodes now, 8 at 12:04, 4 at 12:00; +8 in 6 minutes"
    # between doublings: what came since the last milestone, up to the latest node
    assert trend_line(g, 21, at(650)) == "21 nodes now, 16 at 12:10, 8 at 12:04, 4 at 12:00; +5 in 50 seconds"
    assert trend_line(Growth([Point(at(0), 6)]), 6, at(0)) == ""  # never grew
    assert trend_line(Growth([Point(at(0), 6)]), 7, at(30)) == "7 nodes now, 6 at 12:00; +1 in 30 seconds"
    many = Growth([Point(at(i * 60), 5 * 2 ** i) for i in range(6)])
    assert trend_line(many, 160, at(300)).startswith("160 nodes now, 80 at 12:04, 40 at 12:03, 20 at 12:02 …;")
    assert [span(timedelta(seconds=s)) for s in (1, 89, 90, 7199, 7200)] == [
        "1 second", "89 seconds", "2 minutes", "120 minutes", "2 hours"]


def test_the_record_survives_the_store_as_json():
    g = Growth([Point(at(0), 5), Point(at(60), 10)], told=Point(at(0), 5), due=at(300))
    doc: dict = {}
    g.save(doc)
    assert Growth.of(doc) == g
    assert incident_trend(doc, 12, at(90)) == "12 nodes now, 10 at 12:01, 5 at 12:00; +2 in 30 seconds"
    assert Growth.of({}) is None and Growth.of({"storm_growth": {"points": [["bad", 1]]}}) is None


def test_each_doubling_is_one_event_with_the_trend_however_many_nodes_a_step_brings():
    s = Storm()
    s.batch(0, 5)  # the fleet opens with 5
    s.batch(60, 3)  # 8: not doubled
    s.batch(120, 2)  # 10: doubled
    s.batch(180, 5)  # 15
    s.batch(240, 30)  # 45: past 20 and 40 in one step: one event
    s.batch(300, 1)
    doubled = s.events(DOUBLED)
    assert [(t, n) for t, _, n in doubled] == [(120, 10), (240, 45)]
    assert doubled[0][1] == "10 nodes now, 5 at 12:00; +5 in 2 minutes"
    assert doubled[1][1] == "45 nodes now, 10 at 12:02, 5 at 12:00; +35 in 2 minutes"
    assert len(s.fleet.nodes) == 46


def test_pages_hear_the_new_count_at_most_once_per_interval_and_only_when_it_grew():
    s = Storm()  # the shipped rules: correlation.storm.page_updates 5m
    s.batch(0, 6)  # the first page says 6 nodes
    s.batch(30, 1)  # 7 nodes 30 s later: too soon, due at 300
    s.batch(200, 2)  # 9: still waiting for the same update
    s.until(299)
    assert s.events(GREW) == []
    s.until(301)
    assert [(t, n) for t, _, n in s.events(GREW)] == [(300, 9)]  # the count at 300, once
    s.until(900)  # no growth: nothing more
    s.batch(950, 1)  # 10 nodes, more than 5 minutes after the last update: at once
    s.batch(960, 4)  # 14 ten seconds later: waits until 1250
    s.until(1249)
    assert [(t, n) for t, _, n in s.events(GREW)] == [(300, 9), (950, 10)]
    s.until(1251)
    grew = s.events(GREW)
    assert [(t, n) for t, _, n in grew] == [(300, 9), (950, 10), (1250, 14)]
    assert grew[0][1] == "pages updated: 9 nodes now, 6 at 12:00"
    assert all(ev.kind != GREW for c in s.changes if not c.incident.fleet for ev in c.events)


def test_an_acknowledged_storm_updates_no_page_but_its_thread_still_hears_it_double():
    s = Storm()
    s.batch(0, 5)
    s.changes += s.e.correlator.acknowledge(s.fleet.id, "ana", at(10))
    s.batch(20, 6)  # 11 nodes: doubled
    s.until(700)
    assert s.events(GREW) == []
    assert [(t, n) for t, _, n in s.events(DOUBLED)] == [(20, 11)]


def test_page_updates_off_tells_pages_nothing():
    from dataclasses import replace

    from tests.unit.builders import shipped_rules

    rules = shipped_rules()
    off = replace(rules, correlation=replace(rules.correlation, storm=replace(rules.correlation.storm,
                                                                               page_updates=timedelta(0))))
    s = Storm(Engine(off))
    s.batch(0, 5)
    s.batch(400, 10)
    s.until(1000)
    assert s.events(GREW) == [] and [n for _, _, n in s.events(DOUBLED)] == [15]


def test_a_replayed_step_decides_the_same_from_the_stored_record():
    """The record travels with the fleet (its annotations, stored with the step), so an engine rebuilt from
    the store (a restart, a new leader) neither repeats a doubling nor forgets an update that is due."""
    s = Storm()
    s.batch(0, 5)
    s.batch(60, 5)  # doubled at 60; the page update is due at 300
    stored = Incident.from_dict(s.fleet.to_dict())
    assert Growth.of(stored.annotations) == Growth.of(s.fleet.annotations)
    record = Growth.of(stored.annotations)
    assert record is not None and record.due == at(300) and [p.nodes for p in record.points] == [5, 10]
