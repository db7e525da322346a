"""bench/fleetsim/response.py: people (and alertd's remediation) answer faults and storms as real ones do.

Field facts: a single fault gets a cordon 2-15 minutes after it (alertd's approved remediation, 1-4), then
a reboot or a power-off for a swap, then an uncordon once repaired; a driver-rollout storm gets a cordon on
every node once its Xid alert has resolved, 15-25 minutes in, rollback reboots in batches 45-90 minutes in,
and uncordons about two hours after it began. Some repairs fail. What kube-state-metrics and the scrapes
show of it is what the shipped rules fire on.
"""
from __future__ import annotations

import functools

from bench.fleetsim import model as m
from bench.fleetsim.faults import Rates, build_fleet
from bench.fleetsim.response import ALERTD, ON_CALL, People
from bench.fleetsim.rules import load_alert_rules
from bench.fleetsim.sim import evaluate

MIN = 60.0
HARDWARE = {"faulty_gpu", "gpu_hbm3", "gpu_sram", "gpu_gsp"}


@functools.lru_cache(maxsize=None)
def fleet(seed: int = 3, fail: float = 0.05) -> m.Fleet:
    return build_fleet(512, 14, seed, Rates(people=People(fail_not_ready=fail, fail_fault_back=fail)))


def facts(f: m.Fleet, p: m.Problem, kind: str) -> list[m.Fact]:
    return sorted((x for n in f.nodes if n.name in p.nodes for x in n.facts if x.problem == p.id and x.kind == kind),
                  key=lambda x: x.start)


def test_the_response_is_seeded():
    def shape(f: m.Fleet) -> list[tuple[str, str, float, float]]:
        return [(n.name, x.kind, x.start, x.end) for n in f.nodes for x in n.facts]
    assert shape(build_fleet(256, 7, 4, Rates(people=People()))) == shape(build_fleet(256, 7, 4, Rates(people=People())))
    assert shape(build_fleet(256, 7, 4, Rates(people=People()))) != shape(build_fleet(256, 7, 5, Rates(people=People())))


def test_single_faults_are_cordoned_within_minutes_then_rebooted_or_swapped_then_uncordoned():
    f, kinds = fleet(), set()
    faults = [p for p in f.problems.values() if p.cause in HARDWARE and p.repair_failed_at is None]
    assert len(faults) > 10
    for p in faults:
        [cordon] = facts(f, p, m.CORDON)
        lo, hi = (1 * MIN, 4 * MIN) if p.responder == ALERTD else (2 * MIN, 15 * MIN)
        assert lo <= cordon.start - p.start <= hi, (p.id, p.responder, cordon.start - p.start)
        assert cordon.value == (1.0 if p.responder == ALERTD else 0.0), "alertd's cordon carries its mark"
        [down] = facts(f, p, m.NODE_DOWN)
        assert cordon.start < down.start and down.end < cordon.end, "rebooted while cordoned, uncordoned after"
        kinds.add("swap" if down.end - down.start >= 30 * MIN else "reboot")
        ready = facts(f, p, m.NOT_READY)
        assert ready and ready[0].start == down.start + 40.0 and ready[-1].end > down.end
    assert kinds == {"swap", "reboot"}
    assert {p.responder for p in faults} == {ALERTD, ON_CALL}


def test_failed_repairs_stay_not_ready_or_see_the_fault_again_after_the_uncordon():
    f, seen = fleet(fail=0.3), set()
    for p in f.problems.values():
        if p.repair_failed_at is None:
            continue
        down = facts(f, p, m.NODE_DOWN)
        if any(x.start == p.repair_failed_at for x in facts(f, p, m.XID)):
            seen.add("fault back")
            first_uncordon = facts(f, p, m.CORDON)[0].end
            assert p.repair_failed_at > first_uncordon and len(down) == 2
        else:
            seen.add("not ready")
            assert any(x.end == p.repair_failed_at for x in down), "NotReady from the moment it is back"
            stuck = [x for x in facts(f, p, m.NOT_READY) if x.start == p.repair_failed_at]
            assert stuck and stuck[0].end - stuck[0].start >= 25 * MIN
    assert seen == {"fault back", "not ready"}


def test_the_storm_is_cordoned_after_its_alerts_resolved_rebooted_in_batches_and_uncordoned_hours_later():
    f = fleet()
    [storm] = [p for p in f.problems.values() if p.cause == "storm_driver_rollout"]
    assert len(storm.nodes) >= 30
    reboots = []
    for name in storm.nodes:
        node = next(n for n in f.nodes if n.name == name)
        mine = [x for x in node.facts if x.problem == storm.id]
        xid = min(x.start for x in mine if x.kind == m.XID)
        [cordon] = [x for x in mine if x.kind == m.CORDON]
        [down] = [x for x in mine if x.kind == m.NODE_DOWN]
        assert cordon.start >= xid + 5.5 * MIN, "cordoned after its Xid alert's 5-minute window"
        assert 15 * MIN <= cordon.start - storm.start <= 25 * MIN or cordon.start <= xid + 10 * MIN
        assert 45 * MIN <= down.start - storm.start <= 93 * MIN
        assert cordon.end - storm.start >= 110 * MIN and cordon.end > down.end
        reboots.append(down.start)
    starts = sorted(reboots)
    batches = 1 + sum(1 for a, b in zip(starts, starts[1:]) if b - a > 3 * MIN)
    assert 3 <= batches <= 8, starts


def test_an_unrelated_fault_on_the_storms_cluster_while_it_is_answered():
    f = fleet()
    [storm] = [p for p in f.problems.values() if p.cause == "storm_driver_rollout"]
    [other] = [p for p in f.problems.values() if p.cause.endswith("_during_storm")]
    assert other.page_worthy and not set(other.nodes) & set(storm.nodes)
    assert other.nodes[0].rsplit("-r", 1)[0] == storm.nodes[0].rsplit("-r", 1)[0], "same cluster"
    assert storm.start + 20 * MIN <= other.start <= storm.start + 80 * MIN


def test_the_shipped_rules_fire_on_the_response_as_on_a_real_cordon_and_reboot():
    """kube_node_spec_unschedulable, the Ready condition and up change as a real cordon and reboot change them:
    KubeNodeCordoned, NodeDown and KubeNodeNotReady fire for the storm's nodes, credited to the storm; a node
    back from its reboot but NotReady fires KubeNodeNotReady without NodeDown."""
    f = fleet(fail=0.3)
    alerts = evaluate(f, load_alert_rules(), 30.0)
    [storm] = [p for p in f.problems.values() if p.cause == "storm_driver_rollout"]
    fired = {a.rule.name for a in alerts if a.problem == storm.id}
    assert {"GPUXidError", "KubeNodeCordoned", "NodeDown", "KubeNodeNotReady"} <= fired
    stuck = [p for p in f.problems.values() if p.repair_failed_at is not None
             and any(x.start == p.repair_failed_at for x in facts(f, p, m.NOT_READY))]
    assert stuck
    for p in stuck:
        after = {a.rule.name for a in alerts if a.problem == p.id
                 and p.repair_failed_at + 3 * MIN <= a.starts_at <= p.repair_failed_at + 20 * MIN}
        assert "KubeNodeNotReady" in after or any(a.rule.name == "KubeNodeNotReady" and a.problem == p.id
                                                  and a.starts_at < p.repair_failed_at
                                                  and (a.resolved_at or 1e12) > p.repair_failed_at + 20 * MIN
                                                  for a in alerts), p.id
        assert not any(a.rule.name == "NodeDown" and a.problem == p.id
                       and p.repair_failed_at + 3 * MIN <= a.starts_at <= p.repair_failed_at + 20 * MIN for a in alerts)
