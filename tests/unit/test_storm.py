"""Storms fold by event, not by first signal: the pure engine on a virtual clock."""
from __future__ import annotations

import random

from alertd.engine.correlate import EngineState
from alertd.engine.pipeline import Engine
from alertd.engine.storm import event_key
from alertd.core.model import ACKNOWLEDGED, CLOSED, Incident

from testkit.builders import alert, at, engine, resolved, shipped_rules, xid


def node_alerts(node: str, starts: float = 0, cluster: str = "prod", code: int = 79):
    """What one node sends when it loses a GPU: the Xid, its exporter going down, the cordon
    (the shipped alert names, with the severity labels deploy/prometheus/gpu-alerts.yml gives them)."""
    return [
        xid(code, node=node, gpu="3", severity="warning", cluster=cluster),
        alert("DCGMExporterDown", node=node, starts=starts, severity="warning", job="dcgm-exporter",
              instance=f"10.0.0.{len(node)}:9400", cluster=cluster),
        alert("KubeNodeCordoned", node=node, starts=starts, severity="info", cluster=cluster),
    ]


def fleets(e: Engine) -> list[Incident]:
    return [i for i in e.state.incidents.values() if i.fleet]


def node_incidents(e: Engine) -> dict[str, Incident]:
    out: dict[str, Incident] = {}
    for inc in e.state.incidents.values():
        if not inc.fleet:
            assert inc.node not in out, f"two incidents on {inc.node}"
            out[inc.node] = inc
    return out


def run(e: Engine, arrivals: list[tuple[float, list]]) -> list:
    """Feed (seconds, alerts) in time order, one engine step each, with a tick between."""
    changes = []
    for t, alerts in sorted(arrivals, key=lambda a: a[0]):
        changes += e.ingest(alerts, at(t))
        changes += e.tick(at(t))
    return changes


def assert_one_fleet(e: Engine, nodes: list[str]) -> Incident:
    [fleet] = fleets(e)
    per_node = node_incidents(e)
    assert sorted(fleet.nodes) == sorted(nodes)
    assert sorted(per_node) == sorted(nodes)
    for node, inc in per_node.items():
        assert inc.parent_id == fleet.id, node
        assert set(inc.signals) == {"xid", "metrics_missing", "node_cordoned"}, (node, inc.signals)
    assert sorted(fleet.children) == sorted(i.id for i in per_node.values())
    return fleet


def test_twenty_nodes_in_two_seconds_make_one_fleet_incident_whatever_the_signal_order():
    rng = random.Random(7)
    e = engine()
    nodes = [f"gpu-node-{i:02d}" for i in range(20)]
    arrivals = []
    for i, node in enumerate(nodes):
        alerts = node_alerts(node)
        rng.shuffle(alerts)  # Alertmanager orders a group's alerts by labels; sites differ
        arrivals.append((i * 0.1, alerts))  # one webhook per node, 20 within two seconds
    run(e, arrivals)
    fleet = assert_one_fleet(e, nodes)
    assert fleet.key == "fleet|gpu-fault|cluster=prod|category=hardware"
    assert fleet.severity == "critical" and fleet.xids == [79]
    assert set(fleet.signals) == {"xid", "metrics_missing", "node_cordoned"}
    assert fleet.title.startswith("Xid 79: GPU has fallen off the bus on 20 nodes in prod")
    assert fleet.members == {}  # the alerts live in the node incidents
    assert len(e.state.incidents) == 21


def test_signals_in_separate_steps_and_any_order_still_fold_into_one_fleet():
    rng = random.Random(11)
    e = engine()
    nodes = [f"n{i}" for i in range(12)]
    arrivals = []
    for i, node in enumerate(nodes):
        for j, a in enumerate(rng.sample(node_alerts(node), 3)):  # cordon, exporter or Xid first
            arrivals.append((i * 0.3 + j * 1.7 + rng.random(), [a]))  # spread over about eight seconds
    run(e, arrivals)
    assert_one_fleet(e, nodes)


def test_exporters_dying_first_start_the_fleet_that_the_xids_then_lead():
    e = engine()
    nodes = [f"n{i}" for i in range(8)]
    exporter = {n: node_alerts(n)[1] for n in nodes}
    run(e, [(i * 0.2, [exporter[n]]) for i, n in enumerate(nodes)])
    [fleet] = fleets(e)
    assert fleet.key == "fleet|node-lost|cluster=prod" and fleet.severity == "warning"
    # the Xids and cordons arrive: same nodes, same event, same fleet, now critical
    changes = run(e, [(5 + i * 0.2, [node_alerts(n)[0], node_alerts(n)[2]]) for i, n in enumerate(nodes)])
    assert_one_fleet(e, nodes)
    assert fleet.severity == "critical" and "xid" in fleet.signals
    assert any("severity_changed" in c.kinds for c in changes if c.incident.id == fleet.id)
    # a ninth node led by an Xid joins it: the fleet stands for the Xid event now too
    run(e, [(9, node_alerts("n8"))])
    assert_one_fleet(e, nodes + ["n8"])


def test_nodes_led_by_the_xid_before_the_fleet_stood_for_it_fold_in_when_it_does():
    e = engine()
    early, late = ["n0", "n1", "n2"], [f"n{i}" for i in range(3, 8)]
    # three nodes report the Xid first: too few for a storm, each its own incident for now
    run(e, [(i * 0.2, [node_alerts(n)[0]]) for i, n in enumerate(early)])
    assert fleets(e) == []
    # five more lose their exporters before reporting anything: a node-lost storm
    run(e, [(1 + i * 0.2, [node_alerts(n)[1]]) for i, n in enumerate(late)])
    [fleet] = fleets(e)
    assert sorted(fleet.nodes) == late
    # their Xids arrive: the fleet stands for the Xid event now, so the three nodes it leads are the same storm
    changes = run(e, [(3 + i * 0.2, [node_alerts(n)[0]]) for i, n in enumerate(late)])
    [fleet] = fleets(e)
    assert sorted(fleet.nodes) == early + late
    assert all(inc.parent_id == fleet.id for inc in node_incidents(e).values())
    joined = [ev for c in changes if c.incident.id == fleet.id for ev in c.events if ev.kind == "nodes_joined"]
    assert [ev.data["nodes"] for ev in joined] == [early]
    assert fleet.title.startswith("Xid 79: GPU has fallen off the bus on 8 nodes")


def test_a_node_showing_only_a_follower_joins_once_the_fleet_stands_for_that_event():
    e = engine()
    run(e, [(i * 0.1, [node_alerts(f"n{i}")[0]]) for i in range(5)])  # Xids alone: a gpu-fault fleet
    run(e, [(1, [node_alerts("n9")[1]])])  # another node's exporter dies: the fleet stands for no such event yet
    [fleet] = fleets(e)
    assert "n9" not in fleet.nodes
    run(e, [(2, [node_alerts("n0")[1]])])  # a fleet node's exporter dies too: now it does
    assert fleet.nodes[-1] == "n9" and node_incidents(e)["n9"].parent_id == fleet.id


def two_fleets_then_one_node_shows_both(code: int) -> tuple[Engine, Incident, Incident, list]:
    """Exporters down on n0-n4 (a node-lost fleet), Xid ``code`` alone on n5-n9 (an Xid fleet), then n0 shows
    the Xid too: both fleets stand for the Xid event, they are one storm. Returns both fleets, elder first,
    and the last step's changes."""
    e = engine()
    lost, faulted = [f"n{i}" for i in range(5)], [f"n{i}" for i in range(5, 10)]
    run(e, [(i * 0.1, [node_alerts(n)[1]]) for i, n in enumerate(lost)])
    run(e, [(1 + i * 0.1, [node_alerts(n, code=code)[0]]) for i, n in enumerate(faulted)])
    elder, younger = sorted(fleets(e), key=lambda f: f.opened_at)
    assert sorted(elder.nodes) == lost and sorted(younger.nodes) == faulted
    return e, elder, younger, run(e, [(2, [node_alerts("n0", code=code)[0]])])


def assert_merged(e: Engine, kept: Incident, merged: Incident, changes: list) -> None:
    assert fleets(e) == [kept] and sorted(kept.nodes) == sorted(f"n{i}" for i in range(10))
    assert all(inc.parent_id == kept.id for inc in node_incidents(e).values())
    [closed] = [c for c in changes if c.incident is merged]
    assert merged.status == CLOSED and "resolved" in closed.kinds and merged.parent_id == kept.id
    assert f"merged into fleet incident {kept.id}" in closed.events[-1].text
    # later nodes of either event join the one fleet
    run(e, [(3, [node_alerts("n10")[0]]), (3.1, [node_alerts("n11")[1]])])
    assert fleets(e) == [kept] and {"n10", "n11"} <= set(kept.nodes)


def test_two_fleets_found_to_be_one_storm_merge_into_the_one_that_was_more_severe():
    # the exporters' fleet (warning, posted, not paged) goes; the Xid 79 fleet (critical, paged) stays
    e, elder, younger, changes = two_fleets_then_one_node_shows_both(79)
    assert (elder.severity, younger.severity) == ("critical", "critical")  # n0's Xid raised the elder too
    assert_merged(e, younger, elder, changes)


def test_two_fleets_as_severe_as_each_other_merge_into_the_elder():
    e, elder, younger, changes = two_fleets_then_one_node_shows_both(93)  # InfoROM wear: a warning
    assert (elder.severity, younger.severity) == ("warning", "warning")
    assert_merged(e, elder, younger, changes)


def test_two_storms_whose_nodes_were_all_cordoned_stay_two():
    e = engine()
    run(e, [(i * 0.1, node_alerts(f"n{i}")) for i in range(6)])  # an Xid storm, its nodes cordoned
    hot = [f"hot-{i}" for i in range(5)]
    run(e, [(1 + i * 0.1, [alert("GPUTemperatureHigh", node=n, gpu="0", severity="warning")]) for i, n in enumerate(hot)])
    run(e, [(3 + i * 0.1, [alert("KubeNodeCordoned", node=n, severity="info")]) for i, n in enumerate(hot)])
    xids, thermal = sorted(fleets(e), key=lambda f: f.opened_at)
    assert sorted(thermal.nodes) == hot and thermal.is_open and thermal.key == "fleet|thermal|cluster=prod"
    assert "hot-0" not in xids.nodes and len(xids.nodes) == 6


def test_nodes_showing_the_xid_and_a_follower_join_the_fleet_of_that_follower_instead_of_starting_another():
    e = engine()
    run(e, [(i * 0.1, [node_alerts(f"n{i}")[1]]) for i in range(5)])  # exporters down: a node-lost fleet
    run(e, [(1 + i * 0.1, node_alerts(f"n{i}")[:2]) for i in range(5, 10)])  # the Xid and the exporter down
    [fleet] = fleets(e)
    assert sorted(fleet.nodes) == sorted(f"n{i}" for i in range(10))
    # what is true: the Xid on the five nodes that show it, the exporters down on all ten
    assert fleet.title == "Xid 79: GPU has fallen off the bus on 5 nodes in prod (exporter down on 10; 10 nodes in all)"


def test_a_fault_on_one_node_of_a_fleet_is_counted_in_the_singular():
    e = engine()
    run(e, [(i * 0.1, [node_alerts(f"n{i}")[1]]) for i in range(5)])  # exporters down: a node-lost fleet
    run(e, [(2, [node_alerts("n0")[0]])])  # one of them shows the Xid that explains it
    [fleet] = fleets(e)
    assert fleet.title == "Xid 79: GPU has fallen off the bus on 1 node in prod (exporter down on 5; 5 nodes in all)"


def test_a_node_showing_only_a_follower_signal_joins_the_fleet():
    e = engine()
    run(e, [(i * 0.1, node_alerts(f"n{i}")) for i in range(6)])
    run(e, [(3, [alert("DCGMExporterDown", node="n9", starts=3, severity="warning", job="dcgm-exporter")])])
    [fleet] = fleets(e)
    assert "n9" in fleet.nodes and node_incidents(e)["n9"].parent_id == fleet.id


def test_an_unrelated_failure_during_the_storm_is_not_swallowed():
    e = engine()
    storm = [(i * 0.1, node_alerts(f"n{i}")) for i in range(20)]
    other = [
        (1.0, [alert("GPUTemperatureHigh", node="hot-1", gpu="0", severity="warning")]),  # another kind of fault
        (1.2, [xid(48, node="ecc-1", severity="critical")]),  # another Xid category (memory)
        (1.4, node_alerts("far-1", cluster="prod-b")),  # another cluster
        # a thermal node that was also cordoned: led by thermal, not by the cordon
        (1.6, [alert("GPUTemperatureHigh", node="hot-2", gpu="1", severity="warning"),
               alert("KubeNodeCordoned", node="hot-2", severity="info")]),
    ]
    run(e, storm + other)
    [fleet] = fleets(e)
    per_node = node_incidents(e)
    for node in ("hot-1", "ecc-1", "far-1", "hot-2"):
        assert per_node[node].parent_id == "", node
        assert node not in fleet.nodes
    assert len(fleet.nodes) == 20


def test_a_node_failing_after_the_storm_window_is_its_own_incident():
    e = engine()
    run(e, [(i * 0.1, node_alerts(f"n{i}")) for i in range(20)])
    [fleet] = fleets(e)
    run(e, [(200, node_alerts("n20"))])  # inside the 15m window from the latest node: same event
    assert "n20" in fleet.nodes
    run(e, [(1120, node_alerts("late"))])  # more than 15m after the latest node folded in
    late = node_incidents(e)["late"]
    assert late.parent_id == "" and "late" not in fleet.nodes
    assert len(fleets(e)) == 1


def test_four_nodes_are_no_storm_and_an_old_incident_does_not_start_one():
    e = engine()
    run(e, [(i, node_alerts(f"n{i}")) for i in range(4)])
    assert fleets(e) == []
    # a node whose exporter went down twenty minutes ago now shows its Xid: not part of a new storm
    e2 = engine()
    run(e2, [(0, [alert("DCGMExporterDown", node="old", severity="warning", job="dcgm-exporter")])])
    run(e2, [(1200 + i, node_alerts(f"n{i}", starts=1200)) for i in range(4)])
    run(e2, [(1205, [xid(79, node="old", severity="warning", starts=1205)])])
    assert fleets(e2) == []


def test_the_fleet_resolves_with_its_last_node_and_acknowledge_and_resolve_reach_the_nodes():
    e = engine()
    sent = {f"n{i}": node_alerts(f"n{i}") for i in range(6)}
    run(e, [(i * 0.1, a) for i, a in enumerate(sent.values())])
    [fleet] = fleets(e)
    ack = e.correlator.acknowledge(fleet.id, "ana", at(5))
    assert {c.incident.id for c in ack} == {fleet.id, *fleet.children}
    assert all(c.incident.status == ACKNOWLEDGED for c in ack)
    # every alert resolves; the node incidents pass their hold-down, then the fleet resolves
    run(e, [(60, [resolved(a, 60) for alerts in sent.values() for a in alerts])])
    assert fleet.id in e.state.incidents
    changes = run(e, [(60 + 301, [])])
    assert fleet.status == CLOSED and not e.state.incidents
    assert {c.incident.id for c in changes} == {fleet.id, *fleet.children}
    # resolving a fleet by hand resolves its nodes
    e2 = engine()
    run(e2, [(i * 0.1, node_alerts(f"n{i}")) for i in range(5)])
    [fleet2] = fleets(e2)
    e2.correlator.resolve(fleet2.id, "ana", at(10))
    assert not e2.state.incidents


def test_storms_survive_a_restart():
    e = engine()
    run(e, [(i * 0.1, node_alerts(f"n{i}")) for i in range(6)])
    [fleet] = fleets(e)
    stored = [Incident.from_dict(i.to_dict()) for i in e.state.incidents.values()]
    e2 = Engine(shipped_rules(), state=EngineState.from_incidents(stored, {}, e.state.next_seq, None))
    run(e2, [(10, node_alerts("n6"))])
    [again] = fleets(e2)
    assert again.id == fleet.id and "n6" in again.nodes
    # and candidates below the threshold are remembered too
    e3 = engine()
    run(e3, [(i, node_alerts(f"m{i}")) for i in range(4)])
    stored = [Incident.from_dict(i.to_dict()) for i in e3.state.incidents.values()]
    e4 = Engine(shipped_rules(), state=EngineState.from_incidents(stored, {}, e3.state.next_seq, None))
    run(e4, [(5, node_alerts("m4"))])
    assert len(fleets(e4)) == 1


def test_storm_rules_are_data(tmp_path):
    import shutil

    from alertd.rules.ruleset import load_rules

    from testkit.builders import ROOT

    for name in ("signals.yml", "xid-catalog.yml"):
        shutil.copy(ROOT / "rules" / name, tmp_path / name)
    (tmp_path / "correlation.yml").write_text("""
correlation:
  storm:
    min_nodes: 3
    window: 1m
    events:
      - name: any-xid
        match: ['signal="xid"']
        by: [cluster]
    followers: []
""")
    e = Engine(load_rules([tmp_path]))
    run(e, [(i, node_alerts(f"n{i}", code=79 if i % 2 else 48)) for i in range(3)])
    [fleet] = fleets(e)
    assert fleet.key == "fleet|any-xid|cluster=prod" and fleet.xids == [48, 79]
    # no followers: a node with only its exporter down is not part of it, nor does it storm
    run(e, [(10, [alert("DCGMExporterDown", node="x", severity="warning", job="dcgm-exporter")])])
    assert node_incidents(e)["x"].parent_id == ""


def target_down(starts: float = 0, cluster: str = "prod"):
    """kube-prometheus-stack's TargetDown for the dcgm-exporter job: aggregated by (cluster, job, namespace,
    service), so it names a cluster but no node."""
    return alert("TargetDown", starts=starts, severity="warning", cluster=cluster, job="dcgm-exporter",
                 namespace="gpu-operator", service="nvidia-dcgm-exporter",
                 annotations={"summary": "One or more targets are unreachable."})


def exporters_down(nodes: list[str], start: float = 0) -> list[tuple[float, list]]:
    return [(start + i * 0.2, [alert("DCGMExporterDown", node=n, starts=start, severity="warning",
                                     job="dcgm-exporter")]) for i, n in enumerate(nodes)]


def cluster_wide(e: Engine) -> Incident:
    [inc] = [i for i in e.state.incidents.values() if not i.fleet and not i.node]
    assert inc.primary is not None and inc.primary.kind == "metrics_missing"
    return inc


def test_a_node_less_target_down_joins_its_clusters_fleet_whether_it_comes_after_or_before_it():
    nodes = [f"n{i}" for i in range(8)]
    # after: the fleet exists, the TargetDown folds into it at once
    e = engine()
    run(e, exporters_down(nodes))
    changes = run(e, [(3, [target_down(3)])])
    [fleet] = fleets(e)
    td = cluster_wide(e)
    assert td.parent_id == fleet.id and td.id in fleet.children
    assert sorted(fleet.nodes) == nodes  # it names no node: the fleet's node list is unchanged
    assert any(ev.kind == "incident_joined" for c in changes if c.incident.id == fleet.id for ev in c.events)
    # before: it waits for a fleet of its cluster's event; the fifth node starts one that takes it in
    e2 = engine()
    run(e2, [(0, [target_down(0)])] + exporters_down(nodes, start=0.5))
    [fleet2] = fleets(e2)
    td2 = cluster_wide(e2)
    assert td2.parent_id == fleet2.id and sorted(fleet2.nodes) == nodes
    # the fleet stays open until the TargetDown (its last child) resolves too
    run(e2, [(30, [resolved(a, 30) for _, alerts in exporters_down(nodes, start=0.5) for a in alerts])])
    run(e2, [(30 + 301, [])])
    assert fleet2.id in e2.state.incidents
    run(e2, [(400, [resolved(target_down(0), 400)])])
    run(e2, [(400 + 301, [])])
    assert not e2.state.incidents


def test_a_node_less_target_down_without_a_storm_is_its_own_incident():
    e = engine()
    run(e, [(0, [target_down(0)])] + exporters_down(["n0", "n1"], start=1))  # two nodes: no storm
    assert fleets(e) == []
    td = cluster_wide(e)
    assert td.parent_id == "" and td.is_open and td.storm_keys == ["node-lost|cluster=prod"]
    # a fleet of ANOTHER cluster does not take it, nor does one forming after its window
    run(e, [(10 + i * 0.1, node_alerts(f"b{i}", cluster="prod-b")) for i in range(6)])
    run(e, exporters_down([f"late{i}" for i in range(6)], start=1000))
    assert len(fleets(e)) == 2 and td.parent_id == ""
    # survives a restart as a waiting follower: a fleet forming within its window still takes it
    e2 = engine()
    run(e2, [(0, [target_down(0)])])
    stored = [Incident.from_dict(i.to_dict()) for i in e2.state.incidents.values()]
    e3 = Engine(shipped_rules(), state=EngineState.from_incidents(stored, {}, e2.state.next_seq, None))
    run(e3, exporters_down([f"n{i}" for i in range(5)], start=2))
    [fleet] = fleets(e3)
    assert cluster_wide(e3).parent_id == fleet.id


def assert_storm_state(e: Engine) -> None:
    """Each folded node's fleet is open and counts it; no two open fleets have nodes led by one event."""
    incidents = e.state.incidents
    led: list[str] = []
    for f in fleets(e):
        nodes = [i for i in incidents.values() if i.parent_id == f.id]
        assert nodes and e.state.open_children[f.id] == len(nodes), f.id
        led += {event_key(e.rules.correlation.storm, i, i.primary) for i in nodes if i.node}
    assert all(i.parent_id in incidents for i in incidents.values() if i.parent_id)
    assert len(led) == len(set(led)), sorted(led)


def test_random_storms_never_leave_two_fleets_for_one_event():
    """Half the nodes show their exporter down first and half the Xid, the rest of their signals later, some
    resolving meanwhile, beside a node-less TargetDown and an unrelated fault: checked after every step (no two
    fleets led by one event), and once everything resolved no fleet is left open."""
    for seed in range(60):
        rng = random.Random(seed)
        e = engine()
        arrivals = [(rng.random() * 30, target_down()),
                    (rng.random() * 30, alert("GPUTemperatureHigh", node="hot-1", gpu="0", severity="warning"))]
        for i in range(rng.randint(5, 24)):
            signals = node_alerts(f"n{i}", cluster=rng.choice(["prod", "prod", "prod-b"]))
            first, base = signals[i % 2], rng.random() * 30
            later = [(base + 20 + rng.random() * 60, a) for a in rng.sample(signals, rng.randint(0, 3)) if a is not first]
            for t, a in [(base, first)] + later:
                arrivals.append((t, a))
                if rng.random() < 0.3:
                    arrivals.append((t + rng.random() * 200, resolved(a, t + 1)))
        for t, a in sorted(arrivals, key=lambda x: x[0]):
            e.ingest([a], at(t))
            e.tick(at(t))
            assert_storm_state(e)
        end = max(t for t, _ in arrivals) + 1
        e.ingest([resolved(a, end) for _, a in arrivals if a.status == "firing"], at(end))
        e.tick(at(end + 3600))
        assert fleets(e) == [], seed


def test_a_node_cordoned_before_its_exporter_went_down_is_planned_work_not_part_of_a_storm():
    e = engine()
    run(e, [(i * 0.1, node_alerts(f"n{i}")) for i in range(6)])
    [fleet] = fleets(e)
    cordon = alert("KubeNodeCordoned", node="maint", starts=10, severity="info")
    run(e, [(10, [cordon])])
    run(e, [(40, [alert("DCGMExporterDown", node="maint", severity="warning", job="dcgm-exporter", starts=40),
                  alert("KubeNodeNotReady", node="maint", starts=45)])])
    maint = node_incidents(e)["maint"]
    assert maint.parent_id == "" and "maint" not in fleet.nodes
    # its exporter dying first (a fault the operator then cordoned) still joins
    run(e, [(50, [alert("DCGMExporterDown", node="dead", severity="warning", job="dcgm-exporter", starts=50)])])
    run(e, [(60, [alert("KubeNodeCordoned", node="dead", starts=60, severity="info")])])
    assert "dead" in fleet.nodes


def test_planned_work_whose_cordon_arrives_after_its_exporter_alert_leaves_the_fleet():
    e = engine()
    run(e, [(i * 0.1, node_alerts(f"n{i}")) for i in range(6)])
    [fleet] = fleets(e)
    # grouped by alert name, the exporter's webhook comes first; the cordon, which started earlier, later
    run(e, [(300, [alert("DCGMExporterDown", node="maint", severity="warning", job="dcgm-exporter", starts=240)])])
    maint = node_incidents(e)["maint"]
    assert maint.parent_id == fleet.id and "maint" in fleet.nodes
    run(e, [(600, [alert("KubeNodeCordoned", node="maint", starts=200, severity="info")])])
    assert maint.parent_id == "" and maint.is_open and "maint" not in fleet.nodes
    assert maint.id not in fleet.children and fleet.title.endswith("(exporter down on 6; cordoned 6)")
    assert maint.timeline[-1].kind == "left_fleet"
    assert_storm_state(e)
