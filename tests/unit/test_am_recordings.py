"""Real Alertmanager runs (tests/fixtures/alertmanager-runs, recorded by bench/record_am_run.py) through alertd replay.

The recordings are what two clustered Alertmanager peers really delivered (group_wait 30s, group_interval 5m,
repeat_interval 4h, send_resolved) for the shipped Prometheus rules evaluated by the real Prometheus over a
simulated 24-node cluster. The ground truth (groundtruth.json) says which node had which problem when. Each
recording is checked against the targets of one incident and at most one page per real problem:

  flap         one incident, which says it flaps, at most one page
  storm        one top-level (fleet) incident, at most one page
  maintenance  no page
  control      exactly one page, within 5 minutes of its first alert's arrival

Pages are counted as testkit/am_recordings.py says (PagerDuty's dedup key; escalations left out).
The last test checks that the recordings carry Alertmanager's own cadence, so they cannot be
replaced by hand-made data without failing.
"""
from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import pytest

from testkit.am_recordings import (
    ROUTES, AmRun, describe, describe_pages, incidents_on, mixed, own_incidents, pages, ts,
)

GROUP_INTERVAL_S, GROUP_WAIT_S, PEER_TIMEOUT_S = 300.0, 30.0, 15.0
PAGE_WITHIN = timedelta(minutes=5)
RUN = AmRun()


# ------------------------------------------------------ per-problem targets


@pytest.mark.parametrize("route", ROUTES)
def test_flapping_node_is_one_incident_that_says_it_flaps_and_pages_at_most_once(route):
    out, flap = RUN.replayed(route), RUN.problem("flap")
    incs = own_incidents(out, flap["nodes"])
    assert len(incs) == 1, f"{len(incs)} incidents for the flapping node: {describe(incs)}"
    assert incs[0]["flaps"] >= 1, f"the incident does not say it flaps: {describe(incs)}"
    ps = pages(out, {i["id"] for i in incs})
    assert len(ps) <= 1, f"{len(ps)} pages: {describe_pages(ps)}"


@pytest.mark.parametrize("route", ROUTES)
def test_storm_is_one_top_level_incident_with_at_most_one_page(route):
    out, storm = RUN.replayed(route), RUN.problem("storm")
    incs = incidents_on(out, storm["nodes"])
    top = [i for i in incs if not i["parentId"]]
    assert len(top) == 1, f"{len(top)} top-level incidents for the storm: {describe(top)}"
    assert top[0]["fleet"], f"the storm's incident is not a fleet: {describe(top)}"
    ps = pages(out, {i["id"] for i in incs})
    assert len(ps) <= 1, f"{len(ps)} pages for the storm: {describe_pages(ps)}"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("pid", ["maintenance-reboot", "maintenance-exporter"])
def test_planned_maintenance_pages_nothing(route, pid):
    out, work = RUN.replayed(route), RUN.problem(pid)
    incs = own_incidents(out, work["nodes"])
    ps = pages(out, {i["id"] for i in incs})
    assert not ps, f"maintenance paged: {describe_pages(ps)}; incidents: {describe(incs)}"


@pytest.mark.parametrize("route", ROUTES)
def test_control_fault_pages_once_within_5_minutes_of_its_first_alert(route):
    out, fault = RUN.replayed(route), RUN.problem("control")
    incs = own_incidents(out, fault["nodes"])
    ps = pages(out, {i["id"] for i in incs})
    assert len(ps) == 1, f"{len(ps)} pages: {describe_pages(ps)}; incidents: {describe(incs)}"
    late = ts(ps[0]["due"]) - RUN.first_arrival(route, fault["nodes"])
    assert late <= PAGE_WITHIN, f"paged {late.total_seconds():.0f} s after the first alert arrived"


@pytest.mark.parametrize("route", ROUTES)
def test_no_incident_mixes_problems(route):
    """A top-level incident stands for one problem: its nodes all belong to the same one."""
    found = mixed(RUN.replayed(route), RUN.truth)
    assert not found, f"incidents mixing problems: {describe(found)}"


def test_every_problem_reached_alertd():
    """The recordings are worth testing with: each problem's nodes had firing alerts delivered, on both routes."""
    for route in ROUTES:
        seen = {a["labels"].get("node") for _, b in RUN.webhooks(route) for a in b["alerts"] if a["status"] == "firing"}
        for p in RUN.truth["problems"]:
            assert set(p["nodes"]) & seen, f"{route}: no firing alert for {p['id']}"


# ---------------------------------------------------------- it is Alertmanager


Delivery = tuple[datetime, dict[str, Any]]


def stalled(at: datetime) -> bool:
    """Within the run's peer stall (ground truth), or just after it: the stalled peer's overdue timers fire late."""
    marks = {s["action"]: ts(s["at"]) for s in RUN.truth["steps"] if s["action"] in ("stall_peer", "resume_peer")}
    return bool(marks) and marks["stall_peer"] <= at <= marks["resume_peer"] + timedelta(seconds=20)


def all_resolved(body: dict[str, Any]) -> bool:
    return all(a["status"] == "resolved" for a in body["alerts"])


def deliveries(route: str, *, by_peer: bool = True) -> dict[tuple[str, str], list[Delivery]]:
    """(peer's externalURL, groupKey) -> that peer's deliveries of that group in order; ("", groupKey) -> both
    peers' with by_peer=False. The Watchdog's own route (1 minute timers) is left out."""
    out: dict[tuple[str, str], list[Delivery]] = defaultdict(list)
    for at, body in RUN.webhooks(route):
        if "Watchdog" not in body["groupKey"]:
            out[(body["externalURL"] if by_peer else "", body["groupKey"])].append((at, body))
    return out


def on_grid(gap_s: float) -> bool:
    """A whole number of group_intervals, give or take one peer timeout (the second peer sends that much later)."""
    k = max(1, round(gap_s / GROUP_INTERVAL_S))
    return any(abs(gap_s - (k * GROUP_INTERVAL_S + d)) <= 2.0 for d in (-PEER_TIMEOUT_S, 0.0, PEER_TIMEOUT_S))


@pytest.mark.parametrize("route", ROUTES)
def test_recording_holds_both_peers_and_their_duplicate_deliveries(route):
    hooks = RUN.webhooks(route)
    assert all(b["version"] == "4" and b["receiver"] == "alertd" and "groupKey" in b for _, b in hooks)
    peers = {b["externalURL"] for _, b in hooks}
    assert len(peers) == 2, peers
    # Both peers delivered the same notification (group, status and alerts) at least once, beyond the Watchdog.
    seen: dict[str, set[str]] = defaultdict(set)
    for _, b in hooks:
        if "Watchdog" in b["groupKey"]:
            continue
        alerts = sorted((a["fingerprint"], a["status"]) for a in b["alerts"])
        seen[json.dumps([b["groupKey"], b["status"], alerts])].add(b["externalURL"])
    assert any(len(by) == 2 for by in seen.values()), "no notification delivered by both peers"


@pytest.mark.parametrize("route", ROUTES)
def test_recording_delivers_each_group_on_its_group_interval(route):
    """Within one group, a peer delivers on its group_interval ticks: gaps are whole multiples of 5 minutes.
    A group whose last delivery resolved everything is gone and starts over with a new group_wait."""
    gaps = [(a2 - a1).total_seconds() for seq in deliveries(route).values()
            for (a1, b1), (a2, _) in zip(seq, seq[1:]) if not all_resolved(b1) and not stalled(a2)]
    assert len(gaps) >= 10, gaps
    assert all(on_grid(g) for g in gaps), sorted(gaps)


@pytest.mark.parametrize("route", ROUTES)
def test_recording_delivers_a_new_group_after_group_wait(route):
    """A group's first delivery (or its first after one that resolved everything) comes group_wait after the
    alert's startsAt (when Prometheus saw it fire), the second peer's a peer timeout later."""
    waits = []
    for seq in deliveries(route, by_peer=False).values():
        for before, (at, body) in zip([None, *seq], seq):
            if (before is None or all_resolved(before[1])) and not stalled(at) and not all_resolved(body):
                waits.append((at - min(ts(a["startsAt"]) for a in body["alerts"] if a["status"] == "firing")).total_seconds())
    assert len(waits) >= 5, waits
    assert all(GROUP_WAIT_S - 0.5 <= w <= GROUP_WAIT_S + PEER_TIMEOUT_S + 2 for w in waits), sorted(waits)
    assert sum(1 for w in waits if w <= GROUP_WAIT_S + 1) >= len(waits) // 2, sorted(waits)
