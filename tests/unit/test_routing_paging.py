"""Paging that matches the problem: resolutions never page, planned work on cordoned nodes is not paged
(judged by when things really started), fleets are cordon-aware, a storm pages once."""
from __future__ import annotations

import random
from datetime import timedelta

from alertd.core.model import Change
from alertd.notify.decision import route_incident
from alertd.notify.router import Router
from bench import paging
from bench.amcadence import Life
from testkit.builders import alert, at, engine, resolved, shipped_rules, xid
from tests.unit.test_routing import ROUTING, load


def pages(items):
    return [i for i in items if i.target.kind == "pagerduty" and i.intent == "page" and not i.payload.only_if_posted]


def test_a_change_that_only_reports_resolutions_never_pages_a_target_not_paged_before(tmp_path):
    router = Router(load(tmp_path))
    eng = engine()
    node_down = alert("NodeDown", node="n1", starts=0)
    inc = eng.ingest([node_down, xid(79, node="n1", starts=0)], at(0))[0].incident
    # the pager has not heard of it (say the first post was held, or routing changed since): a resolution is no news
    items = router.route([Change(incident=inc, kinds=["alert_resolved"])], at(60))
    assert not pages(items) and not [i for i in items if not i.payload.only_if_posted]
    assert not [i for i in items if i.intent == "escalate"]
    assert pages(router.route([Change(incident=inc, kinds=["alert_joined"])], at(61)))  # news pages


def test_planned_maintenance_is_not_paged_before_during_or_after_the_uncordon(tmp_path):
    router = Router(load(tmp_path))
    eng = engine()
    cordon = alert("KubeNodeCordoned", node="n1", starts=0)
    node_down = alert("NodeDown", node="n1", starts=300)  # rebooted at 180, fired after its 2m for:
    exporter = alert("DCGMExporterDown", node="n1", starts=900, severity="critical")
    sent = []
    for batch, now in (([cordon], 0), ([node_down], 330), ([exporter], 930), ([resolved(node_down, 600)], 1200),
                       ([resolved(exporter, 1210)], 1230), ([resolved(cordon, 1500)], 1530)):
        sent += router.route(eng.ingest(batch, at(now)), at(now))
    sent += router.route(eng.tick(at(1530 + 301)), at(1530 + 301))
    assert not pages(sent) and not [i for i in sent if i.target == "slack:#gpu-oncall"]
    assert not [i for i in sent if i.intent == "escalate"]


def test_a_cordon_within_the_exporters_for_window_is_not_planned(tmp_path):
    """The exporter died at 0 with its GPU; DCGMExporterDown fired at 300 (for: 5m); the operator had cordoned
    the node at 120. Compared by startsAt the cordon came first; by when things began it did not."""
    text = ROUTING.replace("""    - name: rest
""", """    - name: blind
      match: ['signal="metrics_missing"']
      receiver: oncall
    - name: rest
""")
    routing = load(tmp_path, text)
    eng = engine()
    inc = eng.ingest([alert("KubeNodeCordoned", node="n1", starts=120),
                      alert("DCGMExporterDown", node="n1", starts=300)], at(330))[0].incident
    d = route_incident(routing, inc, at(330))
    assert not d.planned and "oncall" in d.receivers
    # an exporter that went down after the cordon (the maintenance reboot) is planned
    late = engine().ingest([alert("KubeNodeCordoned", node="n2", starts=120),
                            alert("DCGMExporterDown", node="n2", starts=500)], at(530))[0].incident
    assert route_incident(routing, late, at(530)).planned


def test_planned_work_does_not_lend_its_severity_to_a_fault_found_during_it(tmp_path):
    routing = load(tmp_path)
    eng = engine()
    inc = eng.ingest([alert("KubeNodeCordoned", node="n1", starts=0), alert("NodeDown", node="n1", starts=300),
                      alert("GPUEccDoubleBitErrors", node="n1", starts=400)], at(400))[0].incident
    assert inc.severity == "critical"  # the NodeDown of the reboot
    d = route_incident(routing, inc, at(400))
    assert not d.planned and d.severity == "error" and "oncall" in d.receivers  # the error route, not critical's
    assert not [h for h in d.hits if h.route == "page"]


def test_kernel_log_evidence_on_a_cordoned_node_is_a_fault(tmp_path):
    routing = load(tmp_path)
    inc = engine().ingest([alert("KubeNodeCordoned", node="n1", starts=0),
                           alert("NodeDown", node="n1", starts=300)], at(300))[0].incident
    assert route_incident(routing, inc, at(300)).planned
    inc.annotations["evidence_signals"] = [{"kind": "xid", "xid": 79, "severity": "critical"}]
    assert not route_incident(routing, inc, at(300)).planned
    inc.annotations["evidence_signals"] = "not a list"  # read defensively
    assert route_incident(routing, inc, at(300)).planned


def test_pending_times_are_rules_data_and_match_the_shipped_prometheus_rules(tmp_path):
    import yaml
    doc = yaml.safe_load((paging.ROOT / "deploy/prometheus/gpu-alerts.yml").read_text())
    fors = {r["alert"]: r.get("for", "0m") for g in doc["groups"] for r in g["rules"] if "alert" in r}
    policy = shipped_rules().routing.cordoned
    for name, detail, kind in (("DCGMExporterDown", "exporter_down", "metrics_missing"),
                               ("NodeDown", "node_down", "metrics_missing"), ("KubeNodeNotReady", "", "node_not_ready")):
        assert policy.lag({"signal": kind, "detail": detail, "alertname": name}).total_seconds() == \
            int(fors[name].rstrip("m")) * 60, name
    routing = load(tmp_path, ROUTING.replace("    severity: warning\n", """    severity: warning
    pending: [{match: ['alertname="DCGMExporterDown"'], for: 10m}]
""", 1))
    assert routing.cordoned.lag({"alertname": "DCGMExporterDown"}) == timedelta(minutes=10)
    assert routing.cordoned.lag({"alertname": "NodeDown"}) == timedelta(0)


def test_replayed_maintenance_and_faults_page_as_they_should():
    rules = paging.rules_with(timedelta(seconds=30))
    for seed in range(3):
        for route in paging.ROUTES.values():
            assert paging.score(paging.maintenance(random.Random(seed)), rules, route).triggers == 0
            fault = paging.score(paging.xid_fault(random.Random(seed)), rules, route)
            assert fault.triggers == 1 and fault.delay is not None and fault.delay <= 300


def test_story_delivery_follows_alertmanagers_cadence():
    from bench.amcadence import deliver
    lives = [Life.of("NodeDown", 0, 400, node="n1"), Life.of("NodeDown", 100, None, node="n2"),
             Life.of("NodeDown", 10, 20, node="n3")]  # resolved within group_wait: never sent
    sent = deliver(lives, group_by=("alertname", "cluster"))
    assert [(t - at(0)).total_seconds() for t, _ in sent] == [30, 330, 630]
    assert [[(a["labels"]["node"], a["status"]) for a in b["alerts"]] for _, b in sent] == [
        [("n1", "firing")], [("n1", "firing"), ("n2", "firing")], [("n2", "firing"), ("n1", "resolved")]]


# ----- fleets -----

def test_a_rollout_of_nodes_cordoned_before_they_went_down_is_planned_work(tmp_path):
    router = Router(load(tmp_path))
    eng = engine()
    nodes = [f"n{i}" for i in range(6)]
    sent = router.route(eng.ingest([alert("KubeNodeCordoned", node=n, starts=i) for i, n in enumerate(nodes)],
                                   at(10)), at(10))
    changes = eng.ingest([alert("NodeDown", node=n, starts=300 + i) for i, n in enumerate(nodes)], at(330))
    # nothing links planned work to a storm: no fleet, six node incidents judged each as maintenance
    assert not [c for c in changes if c.incident.fleet]
    sent += router.route(changes, at(330))
    assert not pages(sent) and not [i for i in sent if i.target == "slack:#gpu-oncall"]
    # one node of the rollout shows a real fault: that node pages
    later = router.route(eng.ingest([xid(79, node="n3", starts=400)], at(400)), at(400))
    n3 = next(c.incident.id for c in changes if c.incident.node == "n3")
    assert pages(later) and all(i.incident_id == n3 for i in pages(later))


# ----- storms -----

def test_a_storm_pages_once_when_its_fleet_forms_after_a_node_was_paged(tmp_path):
    router = Router(load(tmp_path))
    eng = engine()
    first = router.route(eng.ingest([xid(119, node="n0")], at(0)), at(0))
    (page,) = pages(first)
    assert (page.due_at - at(0)).total_seconds() == 2  # group_wait: a lone fault pages at once
    # Alertmanager's next batch (grouped by alertname: 4 more nodes 300 s later) makes the fleet
    second = router.route(eng.ingest([xid(119, node=f"n{i}") for i in range(1, 5)], at(299)), at(299))
    fleet = next(i.incident_id for i in second if i.payload.kinds[:1] == ("opened",)
                 and i.incident_id != page.incident_id and not i.payload.only_if_posted)
    fleet_pages = [i for i in pages(second) if i.incident_id == fleet]
    assert len(fleet_pages) == 1 and fleet_pages[0].payload.adopt == page.incident_id
    posts = [i for i in second if i.incident_id == fleet and i.intent == "show" and i.target == "slack:#gpu-oncall"]
    assert [i.payload.adopt for i in posts] == [page.incident_id]  # a notifier may take the message over
    assert not [i for i in pages(second) if i.incident_id != fleet]  # folded nodes never page


def test_nodes_of_one_event_after_the_first_wait_while_the_engine_marks_them_storm_pending(tmp_path):
    router = Router(load(tmp_path))
    eng = engine()  # correlation.storm.pending: 5m10s (shipped and default)
    first = router.route(eng.ingest([xid(119, node="n0")], at(0)), at(0))
    assert [(i.due_at - at(0)).total_seconds() for i in pages(first)] == [2]  # the first of its event: group_wait
    items = router.route(eng.ingest([xid(119, node="n1"), xid(119, node="n2")], at(30)), at(30))
    assert sorted((i.due_at - at(30)).total_seconds() for i in pages(items)) == [310, 310]  # held while marked
    lone = router.route(eng.ingest([alert("GPUEccDoubleBitErrors", node="n9")], at(40)), at(40))
    assert [(i.due_at - at(40)).total_seconds() for i in pages(lone)] == [2]  # another event: not held


def test_routing_storm_wait_is_only_an_alias_of_the_engines_setting(tmp_path, caplog):
    from alertd.rules.ruleset import load_rules

    path = tmp_path / "routing.yml"
    path.write_text(ROUTING.replace("routing:\n", "routing:\n  storm_wait: 4m\n", 1))
    with caplog.at_level("WARNING"):
        rules = load_rules([path])
    assert rules.correlation.storm.pending.total_seconds() == 240
    assert "storm_wait is deprecated" in caplog.text
    (tmp_path / "correlation.yml").write_text("correlation:\n  storm:\n    pending: 1m\n")
    rules = load_rules([path, tmp_path / "correlation.yml"])
    assert rules.correlation.storm.pending.total_seconds() == 60  # the engine's own setting wins


class FakeStore:
    def __init__(self, incidents):
        self.incidents, self.refs = incidents, {}

    async def get_incident(self, inc_id):
        return self.incidents.get(inc_id)

    async def notify_ref(self, inc_id, target):
        return self.refs.get((inc_id, str(target)))


def test_pagerduty_fleet_takes_over_the_node_alert_and_the_node_leaves_it():
    import asyncio
    import json

    from alertd.core.outbox_items import Intent, OutboxItem, Page, Resolve, Target
    from alertd.integrations.pagerduty import PagerDutyNotifier, PagerDutySettings
    eng = engine()
    changes = eng.ingest([xid(119, node=f"n{i}") for i in range(5)], at(0))
    fleet = next(c.incident for c in changes if c.incident.fleet)
    child = eng.state.incidents[fleet.children[0]]
    store = FakeStore({fleet.id: fleet, child.id: child})
    target = Target.of("pagerduty", "infra")
    store.refs[(child.id, target)] = json.dumps({"state": "triggered", "severity": "error", "dedup_key": "i:" + child.id})
    pd = PagerDutyNotifier(PagerDutySettings(routing_keys={"infra": "k" * 32}), store, lambda: at(0))
    sent = []

    async def send(key, action, inc, severity, dedup, note=""):
        sent.append((action, inc.id, dedup))
    pd._send = send
    item = OutboxItem(fleet.id, target, Intent.PAGE, Page(kinds=("opened",), routing_key="infra", severity="critical",
                                                          adopt=child.id), at(0))
    done = asyncio.run(pd.deliver([item], None))
    assert sent == [("trigger", fleet.id, "i:" + child.id)]  # the node's alert, now the fleet's: no new alert
    store.refs[(fleet.id, target)] = done.ref
    eng.correlator.close(child, at(60), "node resolved")  # the node resolves alone: the storm's page stays
    child_item = OutboxItem(child.id, target, Intent.RESOLVE, Resolve(kinds=("resolved",), routing_key="infra",
                                                                  severity="critical"), at(60))
    asyncio.run(pd.deliver([child_item], store.refs[(child.id, target)]))
    assert sent == [("trigger", fleet.id, "i:" + child.id)]


# ----- one top-level post -----

def test_an_incident_posted_in_one_channel_is_not_posted_again_when_its_severity_routes_it_to_another(tmp_path):
    router = Router(load(tmp_path, ROUTING.replace("""    - name: audit-everything
      receiver: audit
      continue: true
""", "")))
    eng = engine()
    opened = router.route(eng.ingest([alert("DCGMExporterDown", node="n1", starts=0)], at(0)), at(0))
    assert [i.target for i in opened if not i.payload.only_if_posted] == ["slack:#gpu-alerts"]
    worse = router.route(eng.ingest([alert("NodeDown", node="n1", starts=60)], at(60)), at(60))
    assert "severity_changed" in worse[0].payload.kinds
    assert not [i for i in worse if i.target == "slack:#gpu-oncall" and not i.payload.only_if_posted]
    assert pages(worse)  # the pager is a first notification: critical pages
    (note,) = [i for i in worse if i.intent == "timeline"]
    assert note.target == "slack:#gpu-alerts" and "#gpu-oncall" in note.payload.events[0]["text"]
    again = router.route(eng.ingest([alert("KubeNodeNotReady", node="n1", starts=70)], at(70)), at(70))
    assert not [i for i in again if i.target == "slack:#gpu-oncall" and not i.payload.only_if_posted]


def test_alertd_replay_of_a_planned_reboot_sends_no_page(tmp_path, capsys):
    """The whole story through the command line, as a site would check its own recording."""
    import json

    from alertd.cli.main import main as cli_main
    from bench.amcadence import deliver, write_recording
    path = tmp_path / "maintenance.jsonl"
    write_recording(str(path), deliver(paging.maintenance(random.Random(3)), group_by=paging.ROUTES["name"]))
    assert cli_main(["replay", str(path), "--json", "--tail", "1h"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["webhooks"] >= 4 and out["incidents"]
    sent = [n for n in out["notifications"] if n["sent"]]
    assert sent and not [n for n in sent if n["target"].startswith("pagerduty:") or n["target"] == "slack:#gpu-oncall"]


def test_the_escalation_note_goes_to_the_message_already_posted(tmp_path):
    router = Router(load(tmp_path, ROUTING.replace("""    - name: audit-everything
      receiver: audit
      continue: true
""", "")))
    eng = engine()
    router.route(eng.ingest([alert("DCGMExporterDown", node="n1", starts=0)], at(0)), at(0))
    worse = router.route(eng.ingest([alert("NodeDown", node="n1", starts=60)], at(60)), at(60))
    notes = sorted(i.target for i in worse if i.intent == "escalate")
    assert notes == ["pagerduty:infra-escalation", "slack:#gpu-alerts|escalation"]


def test_replayed_rollouts_and_storms_as_alertmanager_delivers_them():
    quick = paging.rules_with(timedelta(seconds=2))
    held = paging.rules_with(timedelta(seconds=2), timedelta(minutes=5, seconds=10))
    for seed in range(2):
        assert paging.score(paging.rollout(random.Random(seed)), quick, paging.ROUTES["node"]).triggers == 0
        for route in paging.ROUTES.values():
            storm = paging.score(paging.storm(random.Random(seed)), held, route)
            assert storm.triggers == 1 and storm.delays[0] <= 2.0, storm


def closed_planned_reboot(router, eng):
    """A planned reboot of n1: its incident is posted (info, then the reboot's NodeDown), never paged, and
    closes after its hold-down; returns the time it closed."""
    cordon = alert("KubeNodeCordoned", node="n1", starts=0)
    node_down = alert("NodeDown", node="n1", starts=300)
    sent = []
    for batch, now in (([cordon], 0), ([node_down], 330), ([resolved(node_down, 600)], 1200),
                       ([resolved(cordon, 1500)], 1530)):
        sent += router.route(eng.ingest(batch, at(now)), at(now))
    closing = eng.tick(at(1831))
    assert [c.incident.status for c in closing] == ["resolved"]
    sent += router.route(closing, at(1831))
    assert not pages(sent) and [i for i in sent if i.target.kind == "slack"]
    return 1831


def test_a_fault_that_reopens_planned_work_never_paged_pages_once(tmp_path):
    """The GPU that did not come back from the reboot: its Xid 79 reopens the closed maintenance incident
    within the reopen window. The pager never heard of it, so this is its first page."""
    router = Router(load(tmp_path), reopens_within=timedelta(hours=3))
    eng = engine()
    closed = closed_planned_reboot(router, eng)
    back = eng.ingest([xid(79, node="n1", starts=closed + 3)], at(closed + 3))
    assert "reopened" in back[0].kinds
    first = router.route(back, at(closed + 3))
    assert [str(i.target) for i in pages(first)] == ["pagerduty:infra"]
    again = eng.ingest([xid(79, node="n1", gpu="1", starts=closed + 60)], at(closed + 60))
    assert not pages(router.route(again, at(closed + 60)))  # paged once


def test_a_flap_of_a_paged_incident_does_not_page_again(tmp_path):
    router = Router(load(tmp_path), reopens_within=timedelta(hours=3))
    eng = engine()
    fault = xid(79, node="n1", starts=0)
    assert pages(router.route(eng.ingest([fault], at(0)), at(0)))
    router.route(eng.ingest([resolved(fault, 600)], at(630)), at(630))
    closing = eng.tick(at(931))
    assert [c.incident.status for c in closing] == ["resolved"]
    router.route(closing, at(931))
    back = eng.ingest([xid(79, node="n1", starts=1000)], at(1000))
    assert "reopened" in back[0].kinds
    items = router.route(back, at(1000))
    assert not pages(items) and [i for i in items if i.target == "slack:#gpu-oncall" and not i.payload.only_if_posted]


def test_a_closed_incidents_targets_are_forgotten_once_it_can_no_longer_reopen(tmp_path):
    router = Router(load(tmp_path), reopens_within=timedelta(hours=1))
    eng = engine()
    closed = closed_planned_reboot(router, eng)
    [inc_id] = router.memory.reopenable
    assert router.memory.sent[inc_id] and inc_id not in router.memory.escalations
    kept = router.route_step([], at(closed + 3599))[1]
    assert inc_id in router.memory.sent and not kept
    _, delta = router.route_step([], at(closed + 3600))
    assert delta.forget == {inc_id} and inc_id not in router.memory.sent and not router.memory.reopenable
