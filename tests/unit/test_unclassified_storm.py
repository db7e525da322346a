"""Alerts alertd cannot classify fold into one fleet incident per alert name, as Alertmanager's own grouping
by name would send them: the pure engine and router fed Alertmanager's batches.

The site (tests/fixtures/prometheus-rules/site-recording-rules.yml) alerts on its own recording rule,
``GpuTelemetryLost: node:dcgm_up:min == 0``; with the rules API off nothing tells alertd what the recorded
series is, so the alert is unclassified (signal ``other``). Its route groups by ``[alertname, cluster]``
with Alertmanager's defaults (group_wait 30s, group_interval 5m), and Prometheus evaluates every 30 s with
``for: 1m``: seven exporters dying within seconds fire on two evaluations, so the group's first
notification (30 s after the first alert) carries three nodes and the next one, 5 minutes later, all seven.
Each notification carries every alert of the group, firing or resolved since the last one.
"""
from __future__ import annotations

from urllib.parse import quote

from alertd.core.model import CLOSED, Alert, Incident
from alertd.engine.correlate import EngineState
from alertd.engine.pipeline import Engine
from alertd.notify.router import Router
from testkit.builders import alert, at, engine, resolved, shipped_rules, xid

NODES = [f"node-{i}" for i in range(2, 9)]
FIRST, REST = NODES[:3], NODES[3:]
GROUP_WAIT, GROUP_INTERVAL = 30, 300
FIRED = {n: 90 if n in FIRST else 120 for n in NODES}  # startsAt: the evaluation that fired it
FIRST_FLUSH = 90 + GROUP_WAIT
NEXT_FLUSH = FIRST_FLUSH + GROUP_INTERVAL
EXPR = "http://prometheus.example:9090/graph?g0.expr=" + quote("node:dcgm_up:min == 0") + "&g0.tab=1"


def telemetry_lost(node: str, severity: str = "critical", name: str = "GpuTelemetryLost") -> Alert:
    """The site's alert as Prometheus sends it (labels, annotations and generatorURL of its rule)."""
    a = alert(name, node=node, starts=FIRED[node], severity=severity, team="ml-platform",
              annotations={"summary": f"GPU telemetry lost on {node}"})
    a.generator_url = EXPR
    return a


def batches(nodes: list[str] = NODES, **kw: str) -> list[tuple[float, list[Alert]]]:
    """The group's notifications: the first flush with the nodes fired by then, the next with all of them."""
    return [(FIRST_FLUSH, [telemetry_lost(n, **kw) for n in nodes if FIRED[n] <= FIRST_FLUSH - GROUP_WAIT]),
            (NEXT_FLUSH, [telemetry_lost(n, **kw) for n in nodes])]


def fleets(e: Engine) -> list[Incident]:
    return [i for i in e.state.incidents.values() if i.fleet]


def of_node(e: Engine, node: str) -> list[Incident]:
    return [i for i in e.state.incidents.values() if i.node == node]


def pages(items):
    return [i for i in items if i.target.kind == "pagerduty" and i.intent == "page" and not i.payload.only_if_posted]


def test_seven_unclassified_exporters_over_two_batches_are_one_fleet_incident_paged_once():
    e, router = engine(), Router(shipped_rules().routing)
    sent = []
    first_t, first = batches()[0]
    sent += router.route(e.ingest(first, at(first_t)), at(first_t))
    held = [i for n in FIRST for i in of_node(e, n)]
    # one batch already shows the alert on three nodes: all three are held, the first of them too
    assert len(held) == 3 and all(i.storm_until is not None and i.storm_until >= at(NEXT_FLUSH) for i in held)
    assert all(p.due_at >= at(NEXT_FLUSH) for p in pages(sent))
    for t, alerts in batches()[1:]:
        sent += router.route(e.ingest(alerts, at(t)), at(t))
        sent += router.route(e.tick(at(t + 2)), at(t + 2))
    [fleet] = fleets(e)
    assert fleet.key == "fleet|unclassified|cluster=prod|alertname=GpuTelemetryLost"
    assert fleet.title == "GpuTelemetryLost on 7 nodes in prod"
    assert fleet.primary is not None and fleet.primary.meaning.startswith("alertd cannot classify GpuTelemetryLost")
    assert sorted(fleet.nodes) == NODES and fleet.severity == "critical"
    assert sorted(fleet.children) == sorted(i.id for n in NODES for i in of_node(e, n))
    # the nodes' held items come due after their incidents folded (dropped at delivery): one page, the fleet's
    due_alone = [p for p in pages(sent) if p.incident_id != fleet.id and p.due_at < at(NEXT_FLUSH)]
    assert due_alone == [] and [p.incident_id for p in pages(sent) if p.incident_id == fleet.id] == [fleet.id]
    posts = [i for i in sent if i.intent == "show" and i.incident_id == fleet.id and not i.payload.only_if_posted]
    assert len({p.target for p in posts}) == len(posts) == 1  # one message (critical: the on-call channel)


def test_each_node_keeps_its_own_incident_with_the_nodes_summary():
    e = engine()
    for t, alerts in batches():
        e.ingest(alerts, at(t))
    for n in NODES:
        [inc] = of_node(e, n)
        assert inc.primary is not None and inc.primary.kind == "other"
        assert inc.title.startswith(f"GPU telemetry lost on {n}") and inc.parent_id == fleets(e)[0].id


def test_a_node_with_a_classified_fault_keeps_its_cause_out_of_the_unclassified_fleet():
    # node-8's GPU fell off the bus before its exporter died: its telemetry alert joins the Xid incident
    e = engine()
    e.ingest([xid(79, node="node-8", severity="critical", starts=60)], at(65))
    for t, alerts in batches():
        e.ingest(alerts, at(t))
    [fleet] = fleets(e)
    [xid_inc] = of_node(e, "node-8")
    assert xid_inc.primary is not None and xid_inc.primary.xid == 79 and xid_inc.title.startswith("Xid 79")
    assert xid_inc.parent_id == "" and "node-8" not in fleet.nodes
    assert sorted(fleet.nodes) == NODES[:-1] and fleet.title == "GpuTelemetryLost on 6 nodes in prod"
    # the other way round: the telemetry alert first, then the Xid; the Xid incident stays out of the fleet
    e = engine()
    for t, alerts in batches():
        e.ingest(alerts, at(t))
    e.ingest([xid(79, node="node-8", severity="critical", starts=NEXT_FLUSH)], at(NEXT_FLUSH + 5))
    [fleet] = fleets(e)
    [xid_inc] = [i for i in of_node(e, "node-8") if i.primary is not None and i.primary.kind == "xid"]
    assert xid_inc.parent_id == "" and xid_inc.title.startswith("Xid 79") and fleet.title.startswith("GpuTelemetryLost")


def test_alerts_of_other_names_or_too_few_nodes_stay_apart():
    e = engine()
    e.ingest([telemetry_lost(n) for n in NODES[:5]] + [telemetry_lost(n, name="GpuNodeSilent") for n in NODES[:5]],
             at(FIRST_FLUSH))
    assert sorted(f.title for f in fleets(e)) == ["GpuNodeSilent on 5 nodes in prod",
                                                  "GpuTelemetryLost on 5 nodes in prod"]
    # four nodes are no storm: each is its own incident, held once (a batch of four), then paged alone
    e, router = engine(), Router(shipped_rules().routing)
    sent = router.route(e.ingest([telemetry_lost(n) for n in NODES[:4]], at(FIRST_FLUSH)), at(FIRST_FLUSH))
    assert fleets(e) == [] and len(pages(sent)) == 4
    assert all(p.due_at == at(FIRST_FLUSH) + shipped_rules().correlation.storm.pending for p in pages(sent))
    # a classified alert never leads an unclassified fleet, nor is an unclassified one a follower
    e = engine()
    e.ingest([telemetry_lost(n) for n in NODES[:4]] +
             [alert("DCGMExporterDown", node=NODES[4], severity="warning", job="dcgm-exporter", starts=90)],
             at(FIRST_FLUSH))
    assert fleets(e) == []


def test_the_fleet_resolves_with_its_nodes_and_a_relapse_reopens_it():
    e = engine()
    for t, alerts in batches():
        e.ingest(alerts, at(t))
    [fleet] = fleets(e)
    # the exporters come back at 1200; the group's next flush carries the resolved alerts
    done = NEXT_FLUSH + 3 * GROUP_INTERVAL
    e.ingest([resolved(telemetry_lost(n), 1200) for n in NODES], at(done))
    assert fleet.status != CLOSED
    changes = e.tick(at(done + 301))  # the hold-down
    assert fleet.status == CLOSED and not e.state.incidents
    assert fleet.id in {c.incident.id for c in changes if "resolved" in c.kinds}
    # twenty minutes later the exporters die again: within the reopen window, the same fleet and nodes
    again = done + 1200
    relapse = [alert("GpuTelemetryLost", node=n, starts=again - 30, severity="critical", team="ml-platform",
                     annotations={"summary": f"GPU telemetry lost on {n}"}) for n in NODES]
    changes = e.ingest(relapse, at(again))
    assert fleets(e) == [fleet] and fleet.status != CLOSED and "reopened" in fleet.timeline[-1].kind
    assert sorted(i.node for i in e.state.incidents.values() if i.parent_id == fleet.id) == NODES


def test_a_second_alertmanager_and_a_new_leader_between_batches_change_nothing():
    """HA: each batch also comes from the second Alertmanager 15 s later (its peer_timeout), and the engine's
    state is stored and loaded by a new leader between the two batches."""
    e = engine()
    (t1, first), (t2, rest) = batches()
    e.ingest(first, at(t1))
    e.ingest(first, at(t1 + 15))
    held = {i.id: i.storm_until for n in FIRST for i in of_node(e, n)}
    stored = [Incident.from_dict(i.to_dict()) for i in e.state.incidents.values()]
    e2 = Engine(shipped_rules(), state=EngineState.from_incidents(stored, {}, e.state.next_seq, None))
    assert {i.id: i.storm_until for n in FIRST for i in of_node(e2, n)} == held  # the new leader holds them too
    e2.ingest(rest, at(t2))
    e2.ingest(rest, at(t2 + 15))
    [fleet] = fleets(e2)
    assert sorted(fleet.nodes) == NODES and len(e2.state.incidents) == 8
    assert fleet.title == "GpuTelemetryLost on 7 nodes in prod"


def test_storm_events_may_match_the_alert_name():
    """A site names its own alert in an event: the alert name is read from the leading member."""
    import dataclasses

    from alertd.core.matchers import parse_matchers
    from alertd.rules.ruleset import StormEvent

    rules = shipped_rules()
    storm = dataclasses.replace(rules.correlation.storm, min_nodes=3, events=(
        StormEvent("telemetry", ("cluster",), parse_matchers(['alertname="GpuTelemetryLost"'])),))
    e = Engine(dataclasses.replace(rules, correlation=dataclasses.replace(rules.correlation, storm=storm)))
    e.ingest([telemetry_lost(n) for n in NODES[:3]] + [telemetry_lost(n, name="GpuNodeSilent") for n in NODES[:3]],
             at(FIRST_FLUSH))
    [fleet] = fleets(e)
    assert fleet.key == "fleet|telemetry|cluster=prod" and fleet.title == "GpuTelemetryLost on 3 nodes in prod"


def test_routes_match_a_fleet_on_the_labels_its_nodes_alerts_share(tmp_path):
    """A site routes its own alert by name and team, as it did each node's: the fleet goes there too."""
    from tests.unit.test_routing import load

    routing = load(tmp_path, """
routing:
  receivers:
    - name: telemetry
      slack: "#gpu-telemetry"
    - name: alerts
      slack: "#gpu-alerts"
  routes:
    - name: site-telemetry
      match: ['alertname="GpuTelemetryLost"', 'team="ml-platform"']
      receiver: telemetry
  default_receiver: alerts
""")
    e, router = engine(), Router(routing)
    sent = []
    for t, alerts in batches():
        sent += router.route(e.ingest(alerts, at(t)), at(t))
    [fleet] = fleets(e)
    assert fleet.annotations["storm_labels"] == {"alertname": "GpuTelemetryLost", "cluster": "prod",
                                                 "severity": "critical", "team": "ml-platform"}
    shown = {i.target.main for i in sent if i.intent == "show" and i.incident_id == fleet.id}
    assert shown == {"slack:#gpu-telemetry"}
