"""Routing rules: loading, matching, continue, windows, maintenance, cordon, owners, escalation."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from textwrap import dedent

import pytest

from alertd.core.errors import InvalidDocument
from alertd.core.model import Change, Signal
from alertd.notify.decision import route_incident
from alertd.rules.fields import incident_fields
from alertd.notify.router import Router
from alertd.rules.routing import Routing
from alertd.rules.ruleset import RuleSet, load_rules
from testkit.builders import ROOT, alert, at, engine, resolved, shipped_rules, xid

ROUTING = """
routing:
  receivers:
    - name: oncall
      slack: {channels: ["#gpu-oncall"]}
      pagerduty: {routing_key: "${infra}"}
    - name: alerts
      slack: "#gpu-alerts"
    - name: audit
      slack: "#gpu-audit"
    - name: ml
      slack: "#ml-team"
    - name: research
      slack: "#research"
  owners:
    labels: [team]
    namespaces: {"ml-*": ml, "research": research}
    default: alerts
  routes:
    - name: owners
      match: ['category="application"']
      owners: true
    - name: audit-everything
      receiver: audit
      continue: true
    - name: page
      match: ['severity="critical"']
      receiver: oncall
      escalate: {after: 10m, routing_key: "${infra-escalation}"}
    - name: night-errors
      match: ['severity="error"']
      receiver: oncall
      mute: [nights]
    - name: rest
      match: ['signal!="other"']
      receiver: alerts
  default_receiver: alerts
  mute_windows:
    - name: nights
      time_zone: Europe/Berlin
      weekdays: ["monday:friday"]
      times: [{start: "22:00", end: "07:00"}]
  maintenance:
    - name: rack7
      nodes: ["rack7-*"]
      start: 2026-11-30T11:00:00Z
      end: 2026-11-30T13:00:00Z
  cordoned:
    action: downgrade
    severity: warning
"""


def load(tmp_path: Path, text: str = ROUTING) -> Routing:
    path = tmp_path / "routing.yml"
    path.write_text(dedent(text))
    return load_rules([path]).routing


def problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(InvalidDocument) as err:
        load(tmp_path, text)
    return str(err.value)


def incident(*alerts, now=0):
    """The engine's incidents for these alerts (in order of opening)."""
    eng = engine()
    changes = eng.ingest(list(alerts), at(now))
    return eng, [c.incident for c in changes]


# ----- loading -----

def test_shipped_routing_file_loads_and_is_the_default_loader():
    routing = shipped_rules().routing
    assert isinstance(routing, Routing)
    assert routing.routes[0].owners and routing.default_receiver == "gpu-alerts"
    assert routing.receivers["gpu-oncall"].targets() == ["slack:#gpu-oncall", "pagerduty:gpu-infra"]
    assert "gpu-infra-escalation" in routing.key_names()


def test_loader_reports_problems_with_positions(tmp_path):
    text = """
    routing:
      receivers:
        - name: a
          slack: "#a"
          pagerduty: {routing_key: "R0UT1NGKEYALERTDTEST0000000000A1"}
      routes:
        - match: ['severity=~"(bad"']
          receiver: a
        - receiver: nobody
        - receiver: a
          mute: [never-defined]
      mute_windows:
        - name: w
          time_zone: Mars/Olympus
          weekdays: [funday]
          times: [{start: "25:00", end: "07:00"}]
      maintenance:
        - start: 2026-01-02T00:00:00Z
          end: 2026-01-01T00:00:00Z
          nodes: [x]
    """
    msg = problems(tmp_path, text)
    assert "routing_key" in msg  # the schema refuses a literal key
    msg = problems(tmp_path, text.replace('"R0UT1NGKEYALERTDTEST0000000000A1"', '"${infra}"'))
    for expected in ("bad regex", "unknown receiver 'nobody'", "unknown mute window 'never-defined'",
                     "unknown time zone", "bad weekday", "HH:MM", "end must be after start"):
        assert expected in msg, (expected, msg)
    assert "routing.yml:8:" in msg  # the bad regex is reported at its line


def test_unquoted_times_are_read_as_yaml_sexagesimal_minutes(tmp_path):
    routing = load(tmp_path, ROUTING.replace('{start: "22:00", end: "07:00"}', "{start: 22:00, end: 07:00}"))
    window = routing.windows["nights"]
    assert (window.times[0].start, window.times[0].end) == (22 * 60, 7 * 60)


# ----- matching -----

def test_first_match_wins_and_continue_keeps_going(tmp_path):
    routing = load(tmp_path)
    _, (inc,) = incident(xid(79, node="n1"))
    d = route_incident(routing, inc, at(0))
    assert [h.route for h in d.hits] == ["audit-everything", "page"]
    assert d.receivers == ["audit", "oncall"]
    assert [e.routing_key for e in d.escalations] == ["infra-escalation"]


def test_unmatched_incidents_go_to_the_default_receiver(tmp_path):
    routing = load(tmp_path, ROUTING.replace("""    - name: audit-everything
      receiver: audit
      continue: true
""", ""))
    _, (inc,) = incident(alert("SomethingElse", node="n1", severity="warning"))
    assert incident_fields(inc)["signal"] == "other"
    assert route_incident(routing, inc, at(0)).receivers == ["alerts"]


def test_fields_include_member_labels_and_incident_fields(tmp_path):
    _, (inc,) = incident(xid(79, node="n1", rack="r7"))
    f = incident_fields(inc)
    assert f["rack"] == "r7" and f["xid"] == "79" and f["node"] == "n1" and f["severity"] == "critical"
    assert f["category"] == "hardware" and f["signal"] == "xid" and f["status"] == "open" and f["group"] == "node"


def test_member_labels_that_differ_are_taken_from_the_leading_firing_oldest_member(tmp_path):
    eng, (inc,) = incident(xid(79, node="n1", gpu="0", team="infra", starts=5),
                           xid(79, node="n1", gpu="1", team="ml", rack="r7", starts=1))
    f = incident_fields(inc)
    assert f["team"] == "ml" and f["gpu"] != "" and f["rack"] == "r7"  # the oldest member leads; others fill gaps
    eng.ingest([resolved(xid(79, node="n1", gpu="1", team="ml", rack="r7", starts=1), 60)], at(60))
    assert incident_fields(inc)["team"] == "infra" and incident_fields(inc)["rack"] == "r7"  # firing first


# ----- time -----

def test_mute_window_in_its_time_zone_wrapping_midnight(tmp_path):
    routing = load(tmp_path)
    _, (inc,) = incident(alert("GPUEccDoubleBitErrors", node="n1", severity="error"))
    assert inc.severity == "error"
    berlin = lambda *a: datetime(*a, tzinfo=timezone.utc)  # noqa: E731  (UTC instants, Berlin is +1 in winter)
    # Tuesday 2026-12-01 21:30 UTC = 22:30 Berlin: muted
    night = route_incident(routing, inc, berlin(2026, 12, 1, 21, 30))
    assert [(h.receiver, bool(h.muted)) for h in night.hits] == [("audit", False), ("oncall", True)]
    assert night.active_receivers == ["audit"]
    # Wednesday 05:59 UTC = 06:59 Berlin: still the Tuesday night window
    assert route_incident(routing, inc, berlin(2026, 12, 2, 5, 59)).hits[1].muted
    # Wednesday 06:00 UTC = 07:00 Berlin: over
    assert not route_incident(routing, inc, berlin(2026, 12, 2, 6, 0)).hits[1].muted
    # Saturday 23:00 Berlin: the window is for weeknights only (Friday night ends Saturday 07:00)
    assert not route_incident(routing, inc, berlin(2026, 12, 5, 22, 0)).hits[1].muted
    assert route_incident(routing, inc, berlin(2026, 12, 5, 5, 0)).hits[1].muted


def test_mute_window_follows_daylight_saving_time(tmp_path):
    routing = load(tmp_path)
    w = routing.windows["nights"]
    # Berlin is UTC+2 in summer: 20:30 UTC on a Monday in July is 22:30 local
    assert w.contains(datetime(2026, 7, 6, 20, 30, tzinfo=timezone.utc))
    assert not w.contains(datetime(2026, 1, 5, 20, 30, tzinfo=timezone.utc))  # 21:30 local in winter


def test_maintenance_window_mutes_its_nodes_only_while_it_lasts(tmp_path):
    routing = load(tmp_path)
    _, (inc, other) = incident(xid(79, node="rack7-n3"), xid(79, node="rack8-n1"))
    during = route_incident(routing, inc, datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc))
    assert during.suppressed.startswith("maintenance window 'rack7'") and during.active_receivers == []
    assert route_incident(routing, other, datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)).suppressed == ""
    after = route_incident(routing, inc, datetime(2026, 11, 30, 13, 0, tzinfo=timezone.utc))
    assert after.suppressed == "" and "oncall" in after.active_receivers


# ----- cordon -----

def test_cordon_before_the_node_goes_down_is_planned_work_and_downgrades(tmp_path):
    routing = load(tmp_path)
    # cordon, then the reboot: NodeDown fires 2m (its rule's for:) after the node went down at -300
    _, (inc,) = incident(alert("KubeNodeCordoned", node="n1", starts=-600), alert("NodeDown", node="n1", starts=-180))
    assert inc.severity == "critical"
    d = route_incident(routing, inc, at(0))
    assert d.planned and d.severity == "warning" and "cordoned first" in d.note
    assert "oncall" not in d.receivers  # the page route matched on severity critical: no page
    assert d.receivers == ["audit", "alerts"]


def test_a_fault_that_starts_during_maintenance_still_pages(tmp_path):
    routing = load(tmp_path)
    _, (inc,) = incident(alert("KubeNodeCordoned", node="n1", starts=-600), xid(79, node="n1"))
    d = route_incident(routing, inc, at(0))
    assert not d.planned and d.severity == "critical" and "oncall" in d.receivers


def test_cordon_after_the_problem_changes_nothing(tmp_path):
    routing = load(tmp_path)
    _, (inc,) = incident(xid(79, node="n1"), alert("KubeNodeCordoned", node="n1", starts=120))
    d = route_incident(routing, inc, at(200))
    assert d.severity == "critical" and d.note == "" and "oncall" in d.receivers


def test_cordon_mute_policy_and_cordon_seen_on_another_incident(tmp_path):
    # a site that expects its jobs to crash on a node being drained
    routing = load(tmp_path, ROUTING.replace("action: downgrade", """action: mute
    expected: [['signal="node_cordoned"'], ['category="application"']]"""))
    router = Router(routing)
    eng = engine()
    # the cordon is its own incident here (different group), then an application Xid on the node
    changes = eng.ingest([alert("KubeNodeCordoned", node="n1", starts=-600)], at(0))
    router.route(changes, at(0))
    changes = eng.ingest([xid(13, node="n1", namespace="ml-a", pod="p1")], at(10))
    inc = changes[-1].incident
    assert inc.id != changes[0].incident.id or len(changes) == 1
    d = route_incident(routing, inc, at(10), cordoned_at=router.cordoned_at(inc))
    assert d.suppressed == "n1 is cordoned"
    # the cordon ends: it is remembered while the incident that showed it lives, and forgotten when it closes
    router.route(eng.ingest([resolved(alert("KubeNodeCordoned", node="n1", starts=-600), 20)], at(20)), at(20))
    assert router.cordoned_at(inc) == at(-600)
    router.route(eng.tick(at(20 + 301)), at(20 + 301))
    assert router.cordoned_at(inc) is None


def test_each_incident_ends_only_its_own_cordons_and_a_restored_router_carries_on(tmp_path):
    routing = load(tmp_path)
    router, eng = Router(routing), engine()
    cordons = [alert("KubeNodeCordoned", node=f"n{i}", starts=-600) for i in range(50)]
    _, delta = router.route_step(eng.ingest(cordons, at(0)), at(0))
    assert len(router.memory.cordons) == 50 and all(c is not None for c in delta.cordons.values())
    _, delta = router.route_step(eng.ingest([resolved(cordons[7], 20)], at(20)), at(20))
    assert delta.cordons == {} and len(router.memory.cordons) == 50  # remembered while its incident lives
    _, delta = router.route_step(eng.tick(at(321)), at(321))  # the hold-down is over: it closes
    assert delta.cordons == {("prod", "n7"): None} and len(router.memory.cordons) == 49
    again = Router(routing)
    again.restore(router.memory)  # e.g. after a failed commit, or on the next leader
    again.route_step(eng.ingest([resolved(cordons[3], 330)], at(330)), at(330))
    _, delta = again.route_step(eng.tick(at(631)), at(631))
    assert delta.cordons == {("prod", "n3"): None} and ("prod", "n4") in again.memory.cordons


# ----- owners -----

def test_application_xids_go_to_the_owning_team_not_to_paging(tmp_path):
    routing = load(tmp_path)
    _, incs = incident(
        xid(13, node="n1", namespace="ml-train", pod="p1"),
        xid(31, node="n2", namespace="research", pod="p2"),
        xid(43, node="n3", namespace="whatever", pod="p3", team="research"),
        xid(13, node="n4", namespace="unknown", pod="p4"),
    )
    got = [(route_incident(routing, i, at(0)).receivers, route_incident(routing, i, at(0)).hits[0].team) for i in incs]
    assert got == [(["ml"], "ml"), (["research"], "research"), (["research"], "research"), (["alerts"], "")]
    for i in incs:
        assert not any(t.startswith("pagerduty:") for h in route_incident(routing, i, at(0)).hits
                       for t in routing.receivers[h.receiver].targets())


def test_owner_from_enrichment_annotation(tmp_path):
    routing = load(tmp_path)
    _, (inc,) = incident(xid(13, node="n1", namespace="unknown", pod="p1"))
    inc.annotations["owners"] = [{"team": "ml", "contacts": ["@ana"]}]
    assert route_incident(routing, inc, at(0)).receivers == ["ml"]
    inc.annotations["owners"] = {"labels": {"team": "research"}}
    assert route_incident(routing, inc, at(0)).receivers == ["research"]


def test_shipped_routing_never_pages_application_xids():
    routing = shipped_rules().routing
    _, incs = incident(xid(13, node="n1", namespace="ml-x", pod="p"), xid(43, node="n2", namespace="other", pod="q"))
    for inc in incs:
        d = route_incident(routing, inc, at(0))
        targets = [t for r in d.receivers for t in routing.receivers[r].targets()]
        assert targets and not any(t.startswith("pagerduty:") for t in targets), targets


# ----- router: outbox items -----

def items_by(items):
    return [(i.target, i.intent, (i.due_at - at(0)).total_seconds()) for i in items]


def test_router_holds_the_first_post_debounces_updates_and_not_ack(tmp_path):
    routing = load(tmp_path)
    router = Router(routing, debounce=timedelta(seconds=2))
    eng = engine()
    first = router.route(eng.ingest([xid(79, node="n1")], at(0)), at(0))
    # group_wait (default 2s): a storm forming meanwhile would fold the node incident first
    assert ("slack:#gpu-oncall", "show", 2.0) in items_by(first)
    assert ("pagerduty:infra", "page", 2.0) in items_by(first)
    assert not [i for i in first if i.intent == "timeline"]  # the first post shows everything
    joined = router.route(eng.ingest([xid(79, node="n1", gpu="1")], at(1)), at(1))
    kinds = items_by(joined)
    assert ("slack:#gpu-oncall", "show", 3.0) in kinds  # debounced: due 2 s after the change
    assert ("slack:#gpu-oncall", "timeline", 1.0) in kinds  # the newly correlated alert, in the thread
    assert not [k for k in kinds if k[0] == "pagerduty:infra"]  # nothing new for the pager
    inc_id = joined[0].incident_id
    acked = router.route(eng.correlator.acknowledge(inc_id, "ana", at(5)), at(5))
    assert ("slack:#gpu-oncall", "show", 5.0) in items_by(acked)  # urgent: no debounce
    assert ("pagerduty:infra", "resolve", 5.0) in items_by(acked)


def test_router_schedules_escalation_once_with_a_slack_thread_note(tmp_path):
    routing = load(tmp_path)
    router = Router(routing)
    eng = engine()
    items = router.route(eng.ingest([xid(79, node="n1")], at(0)), at(0))
    esc = [(i.target, (i.due_at - at(0)).total_seconds()) for i in items if i.intent == "escalate"]
    assert sorted(esc) == [("pagerduty:infra-escalation", 600.0), ("slack:#gpu-oncall|escalation", 600.0)]
    more = router.route(eng.ingest([xid(79, node="n1", gpu="2")], at(30)), at(30))
    assert not [i for i in more if i.intent == "escalate"]
    # once escalated, the escalation service hears about the resolve too
    done = router.route(eng.correlator.resolve(items[0].incident_id, "ana", at(60)), at(60))
    assert ("pagerduty:infra-escalation", "resolve") in [(i.target, i.intent) for i in done]


def test_suppressed_incidents_only_keep_sent_messages_current(tmp_path):
    routing = load(tmp_path)
    router = Router(routing)
    eng = engine()
    now = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
    items = router.route(eng.ingest([xid(79, node="rack7-n1")], now), now)
    assert items and all(i.payload.only_if_posted for i in items)
    assert not [i for i in items if i.intent in ("timeline", "escalate")]
    assert all(i.payload.muted.startswith("maintenance") for i in items)


def test_fleet_children_are_not_notified_separately(tmp_path):
    routing = load(tmp_path)
    router = Router(routing)
    eng = engine()
    changes = eng.ingest([xid(79, node=f"n{i}", starts=i) for i in range(6)], at(10))
    items = router.route(changes, at(10))
    fleet = next(c.incident for c in changes if c.incident.fleet)
    children = [c.incident for c in changes if c.incident.parent_id]
    assert len(children) == 6 and len(fleet.nodes) == 6  # every node has its incident, folded
    by_incident = {i.incident_id for i in items if not i.payload.only_if_posted}
    assert fleet.id in by_incident and not by_incident & {c.id for c in children}
    # a child that was posted before the storm gets its message edited (folded), nothing new
    child_items = [i for i in items if i.incident_id in {c.id for c in children}]
    assert child_items and all(i.payload.only_if_posted and i.intent in ("show", "page", "resolve") for i in child_items)


def test_unconfigured_notifiers_fall_back_to_the_console(tmp_path):
    routing = load(tmp_path)
    router = Router(routing, available={"console"})
    items = router.route(engine().ingest([xid(79, node="n1")], at(0)), at(0))
    assert {i.target for i in items} == {"console"} and len(items) == 1
    silent = Router(routing, available=set()).route(engine().ingest([xid(79, node="n1")], at(0)), at(0))
    assert silent == []


def test_set_rules_swaps_routing(tmp_path):
    routing = load(tmp_path)
    router = Router(routing)
    new = load(tmp_path, ROUTING.replace('"#gpu-oncall"', '"#gpu-oncall-2"'))
    router.set_rules(RuleSet(routing=new))
    items = router.route(engine().ingest([xid(79, node="n1")], at(0)), at(0))
    assert "slack:#gpu-oncall-2" in {i.target for i in items}


def test_evidence_signal_is_a_thread_follow_up(tmp_path):
    routing = load(tmp_path)
    router = Router(routing)
    eng = engine()
    inc = eng.ingest([alert("DCGMExporterDown", node="n1", severity="critical")], at(0))[0].incident
    router.route([], at(0))
    router._targets[inc.id] = {"slack:#gpu-oncall"}
    sig = Signal(kind="xid", severity="critical", category="hardware", xid=79, title="Xid 79: GPU has fallen off the bus")
    items = router.route(eng.correlator.enrich(inc.id, at(5), "kernel log", {}, [sig]), at(5))
    thread = [i for i in items if i.intent == "timeline" and i.target == "slack:#gpu-oncall"]
    assert thread and "kernel log" in thread[0].payload.events[0]["text"]


def test_rules_directory_with_routing_is_valid():
    rules = load_rules([ROOT / "rules"])
    assert rules.routing is not None and rules.routing.cordoned.action == "downgrade"


def test_owner_channel_from_enrichment_only_when_allowed(tmp_path):
    owners = [{"kind": "PyTorchJob", "name": "llm", "namespace": "x", "team": "", "channel": "#llm-oncall",
               "pods": 2, "gpus": 16}]
    _, (inc,) = incident(xid(13, node="n1", namespace="unknown", pod="p1"))
    inc.annotations["owners"] = owners
    routing = load(tmp_path)
    assert route_incident(routing, inc, at(0)).receivers == ["alerts"]  # use_channels is off by default
    routing = load(tmp_path, ROUTING.replace("    default: alerts\n", "    default: alerts\n    use_channels: true\n"))
    d = route_incident(routing, inc, at(0))
    assert d.receivers == ["channel:#llm-oncall"]
    items = Router(routing).route([Change(incident=inc, kinds=["opened"], events=[])], at(0))
    assert [i.target for i in items] == ["slack:#llm-oncall"]


def test_a_target_reached_by_a_muted_and_a_loud_route_is_loud(tmp_path):
    text = ROUTING.replace("""    - name: night-errors
      match: ['severity="error"']
      receiver: oncall
      mute: [nights]
""", """    - name: night-errors
      match: ['severity="error"']
      receiver: oncall
      mute: [nights]
      continue: true
    - name: errors-always
      match: ['severity="error"']
      receiver: oncall
""")
    routing = load(tmp_path, text)
    router = Router(routing)
    eng = engine()
    night = datetime(2026, 12, 1, 21, 30, tzinfo=timezone.utc)
    items = router.route(eng.ingest([alert("GPUEccDoubleBitErrors", node="n1", severity="error")], night), night)
    oncall = [i for i in items if i.target == "slack:#gpu-oncall"]
    assert len(oncall) == 1 and not oncall[0].payload.only_if_posted


def test_group_wait_holds_only_new_node_incidents(tmp_path):
    eng = engine()
    router = Router(load(tmp_path, ROUTING.replace("routing:\n", "routing:\n  group_wait: 500ms\n", 1)))
    first = router.route(eng.ingest([xid(79, node="n0")], at(0)), at(0))
    assert ("pagerduty:infra", "page", 0.5) in items_by(first)
    # five nodes within the window: the fleet incident posts and pages at once
    changes = eng.ingest([xid(79, node=f"n{i}") for i in range(1, 5)], at(0.2))
    fleet = next(c.incident for c in changes if c.incident.fleet)
    items = router.route(changes, at(0.2))
    assert {(i.target, (i.due_at - at(0)).total_seconds()) for i in items if i.incident_id == fleet.id
            and i.intent in ("show", "page")} == {("slack:#gpu-oncall", 0.2), ("pagerduty:infra", 0.2), ("slack:#gpu-audit", 0.2)}
    # nodes folded in the same step are never routed a first post
    assert not [i for i in items if i.incident_id != fleet.id and not i.payload.only_if_posted]
    off = Router(load(tmp_path, ROUTING.replace("routing:\n", "routing:\n  group_wait: 0s\n", 1)))
    assert ("pagerduty:infra", "page", 0.0) in items_by(off.route(engine().ingest([xid(79, node="n1")], at(0)), at(0)))
