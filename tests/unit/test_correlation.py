"""Correlation and lifecycle on the shipped rules, on a virtual clock."""
from __future__ import annotations

from alertd.core.model import ACKNOWLEDGED, CLOSED, OPEN

from testkit.builders import alert, at, engine, resolved, xid


def only(changes):
    assert len({c.incident.id for c in changes}) == 1, [c.incident.id for c in changes]
    return changes[0].incident


def test_xid_exporter_down_and_cordon_on_one_node_are_one_incident():
    e = engine()
    inc = only(e.ingest([
        xid(79, node="gpu-node-17", gpu="3", severity="critical"),
        alert("DCGMExporterDown", node="gpu-node-17", starts=30, instance="10.0.0.17:9400", job="dcgm-exporter"),
        alert("KubeNodeCordoned", node="gpu-node-17", starts=90, severity="warning"),
    ], at(90)))
    assert inc.key == "node|cluster=prod|node=gpu-node-17"
    assert len(inc.members) == 3
    assert set(inc.signals) == {"xid", "metrics_missing", "node_cordoned"}
    assert inc.xids == [79]
    assert inc.severity == "critical"
    assert inc.category == "hardware"
    assert inc.primary.action == "reboot_node"
    assert inc.title.startswith("Xid 79: GPU has fallen off the bus on gpu-node-17")
    assert [ev.kind for ev in inc.timeline] == ["opened", "alert_joined"]  # one step: one line for the joins
    assert inc.timeline[1].text.startswith("2 alerts joined, first DCGMExporterDown")


def test_a_second_node_gets_its_own_incident():
    e = engine()
    changes = e.ingest([xid(79, node="a"), xid(48, node="b")], at(0))
    assert len({c.incident.id for c in changes}) == 2
    assert {c.incident.node for c in changes} == {"a", "b"}


def test_application_xid_groups_by_pod_not_node():
    e = engine()
    a = only(e.ingest([xid(13, node="n1", namespace="ml", pod="train-0")], at(0)))
    b = only(e.ingest([xid(13, node="n1", gpu="1", namespace="ml", pod="train-1")], at(1)))
    assert a.id != b.id
    assert a.group == "application-xid" and a.category == "application"
    assert a.primary.action == "restart_app"
    # same pod, another GPU: same incident
    assert only(e.ingest([xid(31, node="n1", gpu="2", namespace="ml", pod="train-0")], at(2))).id == a.id


def test_application_xid_without_pod_falls_back_to_the_node():
    e = engine()
    inc = only(e.ingest([xid(13, node="n1")], at(0)))
    assert inc.group == "node"


def test_xid_45_folds_into_the_xid_it_follows():
    e = engine()
    inc = only(e.ingest([xid(79, node="n1", gpu="2")], at(0)))
    same = only(e.ingest([xid(45, node="n1", gpu="2", namespace="ml", pod="p")], at(5)))
    assert same.id == inc.id
    folded = [m for m in same.members.values() if m.folded]
    assert len(folded) == 1 and folded[0].signal.xid == 45
    assert same.title.startswith("Xid 79")  # fallout never names the incident
    assert same.timeline[-1].kind == "alert_folded"


def test_xid_45_alone_still_opens_an_incident():
    e = engine()
    inc = only(e.ingest([xid(45, node="n9")], at(0)))
    assert inc.xids == [45] and not any(m.folded for m in inc.members.values())


def test_severity_is_max_of_members_and_change_is_logged():
    e = engine()
    inc = only(e.ingest([alert("KubeNodeCordoned", node="n1", severity="warning")], at(0)))
    assert inc.severity == "warning"
    inc = only(e.ingest([xid(79, node="n1")], at(10)))
    assert inc.severity == "critical"
    assert "severity_changed" in [ev.kind for ev in inc.timeline]


def test_hold_down_then_resolve_and_after_the_reopen_window_a_new_incident_links_previous():
    e = engine()
    a = xid(79, node="n1")
    inc = only(e.ingest([a], at(0)))
    only(e.ingest([resolved(a, 60)], at(60)))
    assert inc.quiet_since == at(60) and inc.status == OPEN and inc.firing == 0
    assert e.tick(at(60 + 299)) == []  # hold-down 5m not yet passed
    closed = only(e.tick(at(60 + 300)))
    assert closed.status == CLOSED and closed.resolved_at == at(360)
    b = xid(79, node="n1")
    b.starts_at = at(60 + 3601)  # the reopen window (1h) after its last alert ended has passed
    again = only(e.ingest([b], at(60 + 3601)))
    assert again.id != inc.id and again.previous_id == inc.id


def test_a_fault_back_within_the_reopen_window_reopens_its_incident():
    e = engine()
    a = xid(79, node="n1")
    inc = only(e.ingest([a], at(0)))
    e.ingest([resolved(a, 60)], at(60))
    only(e.tick(at(360)))
    assert inc.status == CLOSED
    b = xid(79, node="n1")
    b.starts_at = at(900)  # Alertmanager's next batches: 9 minutes after it resolved
    again = only(e.ingest([b], at(900)))
    assert again is inc and inc.status == OPEN and inc.resolved_at is None and inc.flaps == 1
    assert inc.firing == 1 and inc.timeline[-2].kind == "reopened"
    e.ingest([resolved(b, 960)], at(960))
    only(e.tick(at(1260)))
    c = alert("KubeNodeCordoned", node="n1", starts=1500)  # the operator's cordon, after it resolved again
    assert only(e.ingest([c], at(1500))) is inc and inc.flaps == 1  # the response to the fault, not a flap
    assert inc.timeline[-2].kind == "reopened" and inc.timeline[-2].data["response"] is True


def test_a_late_copy_of_a_resolved_alert_does_not_reopen():
    e = engine()
    a = xid(79, node="n1")
    e.ingest([a], at(0))
    e.ingest([resolved(a, 60)], at(60))
    e.tick(at(360))
    late = resolved(a, 60)  # an HA peer's or a later batch's copy of the same resolve
    assert e.ingest([late], at(400)) == []


def test_a_reopened_incident_survives_a_reload():
    from alertd.engine.state import EngineState

    e = engine()
    a = xid(79, node="n1")
    inc = only(e.ingest([a], at(0)))
    e.ingest([resolved(a, 60)], at(60))
    e.tick(at(360))
    state = e.correlator.state
    reloaded = EngineState.from_incidents([], state.last_by_key, state.next_seq, None, closed=[inc])
    e.correlator.state = reloaded
    b = xid(79, node="n1")
    b.starts_at = at(600)
    assert only(e.ingest([b], at(600))).id == inc.id


def test_unclassified_alert_joins_its_nodes_incident():
    e = engine()
    inc = only(e.ingest([xid(79, node="n1")], at(0)))
    same = only(e.ingest([alert("NodeGPUWeird", node="n1", severity="critical")], at(30)))
    assert same is inc and "other" in inc.signals and len(inc.members) == 2
    assert inc.title.startswith("Xid 79") and "(unclassified)" in inc.timeline[-1].text
    elsewhere = only(e.ingest([alert("NodeGPUWeird", node="n2")], at(40)))
    assert elsewhere.id != inc.id and elsewhere.group == "other"


def test_gpu_alerts_without_a_node_never_share_an_incident():
    e = engine()
    changes = e.ingest([alert("GPUXidError", xid="79", gpu="0"), alert("GPUXidError", xid="13", gpu="1", UUID="GPU-b")], at(0))
    assert len({c.incident.id for c in changes}) == 2
    # The one with a GPU UUID is keyed by it (origin: it stands in for the node), the other by its alert.
    assert {c.incident.group for c in changes} == {"node-unknown", "origin"}
    assert "origin|cluster=prod|origin=gpu GPU-b" in {c.incident.key for c in changes}


def test_refire_during_hold_down_keeps_incident_and_counts_a_flap():
    e = engine()
    a = xid(79, node="n1")
    inc = only(e.ingest([a], at(0)))
    e.ingest([resolved(a, 60)], at(60))
    refire = xid(79, node="n1")
    refire.starts_at = at(120)
    same = only(e.ingest([refire], at(120)))
    assert same.id == inc.id and same.flaps == 1 and same.quiet_since is None
    assert same.firing == 1 == same.count_firing()
    assert e.tick(at(1000)) == []  # firing again: never resolves by time


def test_stale_and_duplicate_deliveries_change_nothing():
    e = engine()
    a = xid(79, node="n1")
    e.ingest([a], at(0))
    assert e.ingest([a], at(5)) == []  # same state again (HA peer)
    old = resolved(a, 1)
    old.starts_at = at(-100)  # an older occurrence's resolve arrives late
    assert e.ingest([old], at(6)) == []


def test_resolved_xid_never_seen_firing_opens_an_incident_that_resolves_after_the_hold_down():
    e = engine()
    inc = only(e.ingest([resolved(xid(79, node="n1"), 10)], at(10)))
    assert inc.status == OPEN and inc.firing == 0 and inc.xids == [79] and inc.severity == "critical"
    assert "before it reached alertd" in inc.timeline[0].text
    assert only(e.tick(at(10 + 300))).status == CLOSED


def test_resolved_xid_never_seen_firing_joins_its_nodes_open_incident():
    e = engine()
    inc = only(e.ingest([alert("DCGMExporterDown", node="n1")], at(0)))
    same = only(e.ingest([resolved(xid(79, node="n1"), 10)], at(10)))
    assert same is inc and inc.xids == [79] and inc.title.startswith("Xid 79") and inc.firing == 1


def test_resolved_follower_never_seen_firing_opens_nothing():
    e = engine()
    assert e.ingest([resolved(alert("DCGMExporterDown", node="n1"), 10)], at(10)) == []


def test_acknowledge_then_manual_resolve():
    e = engine()
    inc = only(e.ingest([xid(79, node="n1")], at(0)))
    ack = only(e.correlator.acknowledge(inc.id, "alice", at(5)))
    assert ack.status == ACKNOWLEDGED and ack.acknowledged_by == "alice"
    assert e.correlator.acknowledge(inc.id, "bob", at(6)) == []  # already acknowledged
    res = e.correlator.resolve(inc.id, "alice", at(7))
    assert res[0].urgent and res[0].incident.status == CLOSED
    assert inc.id not in e.state.incidents


def test_watchdog_silence_opens_pipeline_incident_and_return_resolves_it():
    e = engine()
    hb = alert("Watchdog", severity="none")
    assert e.ingest([hb], at(0)) == []  # heartbeats are not incidents
    assert e.tick(at(599)) == []
    inc = only(e.tick(at(601)))
    assert inc.severity == "critical" and inc.signals == ["watchdog"] and "silent" in inc.title
    assert e.tick(at(700)) == []  # only one
    hb2 = alert("Watchdog", severity="none")
    hb2.received_at = at(800)
    back = only(e.ingest([hb2], at(800)))
    assert back.status == CLOSED


def test_non_gpu_alerts_flow_as_their_own_incidents():
    e = engine()
    inc = only(e.ingest([alert("KubePodCrashLooping", namespace="web", pod="api-1", severity="warning",
                               annotations={"summary": "api-1 crash looping"})], at(0)))
    assert inc.signals == ["other"] and inc.group == "other"
    assert inc.title.startswith("api-1 crash looping")


def test_metrics_missing_exporter_versus_node_down():
    e = engine()
    exp = only(e.ingest([alert("DCGMExporterDown", node="n1", severity="critical")], at(0)))
    node = only(e.ingest([alert("NodeDown", node="n2", severity="critical")], at(0)))
    assert exp.primary.detail == "exporter_down" and "dcgm-exporter down" in exp.title
    assert node.primary.detail == "node_down"


def test_thermal_decodes_harmful_bits():
    e = engine()
    inc = only(e.ingest([alert("GPUClockEventThrottling", node="n1", gpu="0", UUID="GPU-x",
                               clock_event_reasons="64", severity="warning")], at(0)))
    assert inc.primary.kind == "thermal" and inc.primary.detail == "hw_thermal_slowdown"


def test_evidence_from_logs_upgrades_classification():
    e = engine()
    inc = only(e.ingest([alert("DCGMExporterDown", node="n1", severity="warning")], at(0)))
    sig = e.rules.catalog.lookup(79).signal()
    up = only(e.correlator.enrich(inc.id, at(3), "kernel log", {}, [sig]))
    assert up.title.startswith("Xid 79") and up.severity == "critical" and up.xids == [79]
    assert up.timeline[-1].kind == "classification_upgraded"
    assert e.correlator.enrich(inc.id, at(4), "kernel log", {}, [sig]) == []  # same evidence twice: no change


def test_enrichment_annotations_and_upgrade_are_one_change():
    e = engine()
    inc = only(e.ingest([alert("DCGMExporterDown", node="n1", severity="warning")], at(0)))
    sig = e.rules.catalog.lookup(79).signal()
    found = {"log_evidence": ([{"xid": 79}], "kernel log: 1 line(s)"), "logs_unavailable": (None, "available again")}
    inc.annotations["logs_unavailable"] = "timeout"
    changes = e.correlator.enrich(inc.id, at(3), "kernel log", found, [sig, sig])
    assert [c.kinds for c in changes] == [["enrichment", "enrichment", "classification_upgraded"]]
    assert inc.annotations["log_evidence"] == [{"xid": 79}] and "logs_unavailable" not in inc.annotations
    assert inc.xids == [79] and len(inc.annotations["evidence_signals"]) == 1  # a signal twice counts once
    assert changes[0].incident.version == 2
    assert e.correlator.enrich("INC-none", at(4), "kernel log", found, [sig]) == []


def test_benign_clock_bits_are_not_a_thermal_incident():
    e = engine()
    inc = only(e.ingest([alert("GPUClockEventThrottling", node="n1", gpu="0", UUID="GPU-x",
                               clock_event_reasons="5", severity="warning")], at(0)))
    assert inc.primary.kind == "other" and inc.severity == "info"


def test_alerts_without_cluster_label_still_group_by_node():
    e = engine()
    a = xid(79, node="n1")
    del a.labels["cluster"]
    b = alert("KubeNodeCordoned", node="n1")
    del b.labels["cluster"]
    inc = only(e.ingest([a, b], at(0)))
    assert inc.group == "node" and inc.cluster == "default" and len(inc.members) == 2


def test_fleet_title_never_names_one_gpu():
    e = engine()
    for i in range(5):
        changes = e.ingest([alert("GPUNVLinkErrors", node=f"n{i}", gpu="0", severity="error")], at(i))
    fleet = next(c.incident for c in changes if c.incident.fleet)
    assert fleet.title.endswith("on 5 nodes in prod"), fleet.title


def test_alerts_joining_in_one_step_make_one_timeline_line():
    e = engine()
    inc = only(e.ingest([xid(79, node="n1", gpu=str(g)) for g in range(8)], at(0)))
    assert [ev.kind for ev in inc.timeline] == ["opened", "alert_joined"]
    joined = inc.timeline[1]
    assert len(joined.data["fingerprints"]) == 7 and joined.text.startswith("7 alerts joined, first GPUXidError")
    assert len(inc.members) == 8


def test_reopening_is_judged_by_the_alerts_own_times_not_by_their_arrival():
    e = engine()
    a = xid(79, node="n1")
    inc = only(e.ingest([a], at(0)))
    e.correlator.resolve(inc.id, "ops", at(10))  # resolved by hand while the alert still fired
    older = xid(79, node="n1")
    older.starts_at = at(-3600 * 20)  # a backfilled occurrence from before: another incident, not a flap
    assert only(e.ingest([older], at(20))).id != inc.id
    e2 = engine()
    b = xid(79, node="n1")
    inc2 = only(e2.ingest([b], at(0)))
    e2.ingest([resolved(b, 60)], at(60))
    e2.tick(at(360))
    late = xid(79, node="n1")
    late.starts_at = at(60 + 4200)  # started 70 minutes after the last end, delivered only now
    assert only(e2.ingest([late], at(60 + 4200 + 5))).id != inc2.id


def test_a_late_resolve_is_known_while_its_incident_is_remembered_and_forgotten_after():
    import dataclasses
    from datetime import timedelta

    from alertd.engine.pipeline import Engine
    from testkit.builders import shipped_rules

    rules = shipped_rules()
    rules = dataclasses.replace(rules, correlation=dataclasses.replace(rules.correlation,
                                                                       reopen_window=timedelta(0)))
    e = Engine(rules)
    a = xid(79, node="n1")
    e.ingest([a], at(0))
    e.ingest([resolved(a, 60)], at(60))
    e.tick(at(360))
    c = alert("KubeNodeCordoned", node="n1", starts=400)  # no reopening: a new incident of the same key
    e.ingest([c], at(400))
    e.ingest([resolved(c, 420)], at(420))
    e.tick(at(720))
    assert e.ingest([resolved(a, 60)], at(730)) == []  # the first incident's alert, resolved before: not news
    e.tick(at(720 + 1801))
    assert e.correlator.state.closed_fps == {} and e.correlator.state.closed == {}


def test_a_title_whose_own_text_names_its_host_does_not_name_it_twice():
    """The GPU Operator's dcgm-exporter (Hostname from NODE_NAME) and a site rule whose summary names the host
    (tests/fixtures/gpu-rule-corpus/dcgm-gpu-operator.rules.yml, GPUUtilizationLow), with no rule classifying it."""
    e = engine()
    idle = alert("GPUUtilizationLow", Hostname="gpu-node-4", gpu="1", severity="info", instance="10.244.4.21:9400",
                 job="nvidia-dcgm-exporter", pod="nvidia-dcgm-exporter-q9d4m", namespace="gpu-operator",
                 annotations={"summary": "GPU 1 on gpu-node-4 mostly idle"})
    [change] = e.ingest([idle], at(0))
    assert change.incident.title == "GPU 1 on gpu-node-4 mostly idle"
    # a host:port names the host too; a longer name that merely starts with it does not
    for summary, title in [("fan stuck on gpu-ws-1:9835", "fan stuck on gpu-ws-1:9835"),
                           ("fan stuck on gpu-ws-10", "fan stuck on gpu-ws-10 on gpu-ws-1")]:
        [change] = engine().ingest([alert("GpuFanStuck", node="gpu-ws-1", annotations={"summary": summary})], at(1))
        assert change.incident.title == title
