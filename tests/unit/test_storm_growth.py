"""A growing storm is news: the engine decides when a fleet's thread hears of a doubling and when its
pages are told the new count (engine/storm/growth.py), on a virtual clock."""
from __future__ import annotations

from datetime import timedelta

from alertd.core.model import Change, Incident
from alertd.core.vocabulary import EventKind
from alertd.core.storm_growth import Growth, Point, incident_trend, span, trend_line
from alertd.engine.pipeline import Engine

from testkit.builders import alert, at, engine, xid


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
    assert span(timedelta(milliseconds=400)) == "under a second"  # nodes of one Alertmanager batch


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
    doubled = s.events(EventKind.STORM_DOUBLED)
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
    assert s.events(EventKind.STORM_GREW) == []
    s.until(301)
    assert [(t, n) for t, _, n in s.events(EventKind.STORM_GREW)] == [(300, 9)]  # the count at 300, once
    s.until(900)  # no growth: nothing more
    s.batch(950, 1)  # 10 nodes, more than 5 minutes after the last update: at once
    s.batch(960, 4)  # 14 ten seconds later: waits until 1250
    s.until(1249)
    assert [(t, n) for t, _, n in s.events(EventKind.STORM_GREW)] == [(300, 9), (950, 10)]
    s.until(1251)
    grew = s.events(EventKind.STORM_GREW)
    assert [(t, n) for t, _, n in grew] == [(300, 9), (950, 10), (1250, 14)]
    assert grew[0][1] == "pages updated: 9 nodes now, 6 at 12:00"
    assert all(ev.kind != EventKind.STORM_GREW for c in s.changes if not c.incident.fleet for ev in c.events)


def test_an_acknowledged_storm_updates_no_page_but_its_thread_still_hears_it_double():
    s = Storm()
    s.batch(0, 5)
    s.changes += s.e.correlator.acknowledge(s.fleet.id, "ana", at(10))
    s.batch(20, 6)  # 11 nodes: doubled
    s.until(700)
    assert s.events(EventKind.STORM_GREW) == []
    assert [(t, n) for t, _, n in s.events(EventKind.STORM_DOUBLED)] == [(20, 11)]


def test_page_updates_off_tells_pages_nothing():
    from dataclasses import replace

    from testkit.builders import shipped_rules

    rules = shipped_rules()
    off = replace(rules, correlation=replace(rules.correlation, storm=replace(rules.correlation.storm,
                                                                               page_updates=timedelta(0))))
    s = Storm(Engine(off))
    s.batch(0, 5)
    s.batch(400, 10)
    s.until(1000)
    assert s.events(EventKind.STORM_GREW) == [] and [n for _, _, n in s.events(EventKind.STORM_DOUBLED)] == [15]


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


# ----- routing and PagerDuty: the events the engine decided, sent -----

def test_routing_sends_a_doubling_to_the_thread_and_an_update_to_the_pager_already_paged(tmp_path):
    from alertd.notify.router import Router
    from tests.unit.test_routing import load

    router = Router(load(tmp_path))
    s = Storm()
    s.batch(0, 5)
    opened = router.route(s.changes, at(0))
    assert [i for i in opened if i.target == "pagerduty:infra" and i.intent == "page"]
    s.changes = []
    s.batch(400, 6)  # 11 nodes, past the interval: doubled, and the page is told at once
    items = router.route(s.changes, at(400))
    mine = [i for i in items if i.incident_id == s.fleet.id]
    [reply] = [i for i in mine if i.target == "slack:#gpu-oncall" and i.intent == "timeline"]
    assert [e["kind"] for e in reply.payload.events] == [EventKind.STORM_DOUBLED]
    assert reply.payload.events[0]["text"].startswith("11 nodes now, 5 at 12:00")
    [page] = [i for i in mine if i.target == "pagerduty:infra" and i.intent == "page"]
    assert EventKind.STORM_GREW in page.payload.kinds and page.due_at == at(400)
    s.changes = []
    s.batch(420, 1)  # 12 nodes: no doubling, the update waits for the interval: only the message is edited
    later = [i for i in router.route(s.changes, at(420)) if i.incident_id == s.fleet.id]
    assert {(str(i.target), i.intent) for i in later if not i.payload.only_if_posted} <= {
        ("slack:#gpu-oncall", "show"), ("slack:#gpu-audit", "show")}
    s.changes = []
    s.until(701)  # due at 700: the tick tells the pager, and no thread hears of it
    ticked = [i for i in router.route(s.changes, at(701)) if i.incident_id == s.fleet.id]
    assert [i.intent for i in ticked if i.target == "pagerduty:infra"] == ["page"]
    assert not [i for i in ticked if i.intent == "timeline"]


def test_pagerduty_retriggers_the_same_alert_only_when_the_storm_outgrew_its_summary():
    import asyncio
    import json

    from alertd.core.outbox_items import Intent, OutboxItem, Page, Target
    from alertd.integrations.pagerduty import PagerDutyNotifier, PagerDutySettings
    from tests.unit.test_routing_paging import FakeStore

    s = Storm()
    s.batch(0, 5)
    fleet = s.fleet
    target = Target.of("pagerduty", "infra")
    store = FakeStore({fleet.id: fleet})
    pd = PagerDutyNotifier(PagerDutySettings(routing_keys={"infra": "k" * 32}), store, lambda: at(0))
    sent: list[tuple[str, str, str]] = []

    async def send(key, action, inc, severity, dedup, note=""):
        body = pd.event(key, action, inc, severity, note, dedup)
        sent.append((action, dedup, str(body.get("payload", {}).get("summary", ""))))
    pd._send = send  # type: ignore[method-assign]

    def deliver(kinds: tuple[str, ...], ref: str | None) -> str | None:
        item = OutboxItem(fleet.id, target, Intent.PAGE, Page(kinds=kinds, routing_key="infra",
                                                               severity=fleet.severity), at(0))
        return asyncio.run(pd.deliver([item], ref)).ref

    ref = deliver(("opened",), None)
    assert ref is not None and json.loads(ref)["nodes"] == 5 and "on 5 nodes" in sent[-1][2]
    s.batch(400, 6)
    assert deliver(("nodes_joined",), ref) is None and len(sent) == 1  # growth the engine did not call news
    grown = deliver(("nodes_joined", EventKind.STORM_GREW), ref)
    assert grown is not None and json.loads(grown)["nodes"] == 11
    assert sent[-1][0] == "trigger" and sent[-1][1] == sent[0][1] and "on 11 nodes" in sent[-1][2]
    assert deliver((EventKind.STORM_GREW,), grown) is None and len(sent) == 2  # redelivered: the summary says 11 already
    s.e.correlator.acknowledge(fleet.id, "ana", at(410))
    s.batch(420, 20)
    deliver((EventKind.STORM_GREW,), grown)
    assert [a for a, _, _ in sent[2:]] == ["acknowledge"]  # an acknowledged page is not re-triggered
