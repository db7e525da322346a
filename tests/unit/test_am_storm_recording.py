"""The real Alertmanager run of a storm and the people answering it, through alertd replay.

tests/fixtures/alertmanager-runs/storm-response was recorded by ``bench/record_am_run.py --scenario
storm-response`` (bench/am_run_storm_scenario.py): the real Prometheus evaluating the shipped rules over a
simulated 24-node cluster, two clustered Alertmanager pairs (group_wait 30s, group_interval 5m), a 12-node
Xid 119 storm cordoned after its alerts resolved, rebooted in batches and uncordoned, two repairs that fail,
an unrelated fault cordoned by alertd's remediation, and a planned reboot. The targets:

  storm           one top-level fleet incident and at most one page over its whole life
  failed repairs  a page for the fault, and exactly one more from the moment the repair failed
  unrelated       one page, in no fleet
  maintenance     no page
  every title     the final title of each page-worthy problem's incidents names its cause
"""
from __future__ import annotations

from datetime import timedelta

import pytest

from testkit.am_recordings import (
    ROUTES, STORM_RESPONSE, AmRun, describe, describe_pages, incidents_on, mixed, own_incidents, pages, ts,
    triggers_since,
)

# The scenario compresses the field's waits about three times (the rollback 25-31 minutes in rather than
# 45-90, the uncordon 40 rather than 120; the fixture README): the repair timeout is compressed like them,
# the shipped 20m to 6m40s, from the node's return. gpu-node-22 is back from its reboot at 05:34:12 and, as
# alertd sees it, NotReady until 05:41:42 (the fixture README): 7m30s, at field pace about 22 minutes.
COMPRESSED_REPAIR_TIMEOUT = timedelta(minutes=20) / 3  # the shipped 20m, compressed like the scenario
# Recorded on a Sunday, when the shipped routing keeps error pages quiet: replayed with the mute windows off.
RUN = AmRun(STORM_RESPONSE, unmuted=True, repair_timeout=COMPRESSED_REPAIR_TIMEOUT)
FAILED_REPAIRS = ["fault-back", "still-notready"]


def failed_at(pid: str):
    return ts(RUN.truth["t0"]) + timedelta(seconds=RUN.problem(pid)["detail"]["repair_failed_s"])


def test_every_problem_reached_alertd_and_both_peers_delivered():
    for route in ROUTES:
        hooks = RUN.webhooks(route)
        assert len({b["externalURL"] for _, b in hooks}) == 2, route
        seen = {a["labels"].get("node") for _, b in hooks for a in b["alerts"] if a["status"] == "firing"}
        for p in RUN.truth["problems"]:
            assert set(p["nodes"]) & seen, f"{route}: no firing alert for {p['id']}"
        cordoned = {a["labels"].get("node") for _, b in hooks for a in b["alerts"]
                    if a["labels"]["alertname"] == "KubeNodeCordoned"}
        assert set(RUN.problem("storm")["nodes"]) <= cordoned, f"{route}: not every storm node's cordon arrived"


@pytest.mark.parametrize("route", ROUTES)
def test_storm_with_its_response_is_one_fleet_incident(route):
    out, storm = RUN.replayed(route), RUN.problem("storm")
    top = [i for i in incidents_on(out, storm["nodes"]) if not i["parentId"]]
    assert len(top) == 1, f"{len(top)} top-level incidents for the storm: {describe(top)}"
    assert top[0]["fleet"], f"the storm's incident is not a fleet: {describe(top)}"


@pytest.mark.parametrize("route", ROUTES)
def test_storm_pages_at_most_once_over_its_whole_life(route):
    out, storm = RUN.replayed(route), RUN.problem("storm")
    ps = pages(out, {i["id"] for i in incidents_on(out, storm["nodes"])})
    assert len(ps) <= 1, f"{len(ps)} pages for the storm: {describe_pages(ps)}"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("pid", FAILED_REPAIRS)
def test_the_fault_of_a_repair_that_will_fail_pages_once_before_it_fails(route, pid):
    out, p = RUN.replayed(route), RUN.problem(pid)
    incs = own_incidents(out, p["nodes"])
    before = [n for n in pages(out, {i["id"] for i in incs}) if ts(n["due"]) < failed_at(pid)]
    assert len(before) == 1, f"{len(before)} pages: {describe_pages(before)}; incidents: {describe(incs)}"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("pid", FAILED_REPAIRS)
def test_a_failed_repair_pages_exactly_once(pid, route):
    out, p = RUN.replayed(route), RUN.problem(pid)
    incs = incidents_on(out, p["nodes"])
    after = triggers_since(out, {i["id"] for i in incs}, failed_at(pid))
    assert len(after) == 1, f"{len(after)} pages after the repair failed: {describe_pages(after)}; {describe(incs)}"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("pid", "want"), [("unrelated", 1), ("maintenance", 0)])
def test_the_unrelated_fault_pages_once_on_its_own_and_the_planned_reboot_never(route, pid, want):
    out, p = RUN.replayed(route), RUN.problem(pid)
    incs = own_incidents(out, p["nodes"])
    ps = pages(out, {i["id"] for i in incs})
    assert len(ps) == want, f"{pid}: {len(ps)} pages: {describe_pages(ps)}; incidents: {describe(incs)}"


@pytest.mark.parametrize("route", ROUTES)
def test_no_incident_mixes_problems(route):
    found = mixed(RUN.replayed(route), RUN.truth)
    assert not found, f"incidents mixing problems: {describe(found)}"


def unnamed(route: str, pid: str) -> list[dict]:
    """Top-level incidents of the problem whose final title names neither its Xid nor, for a memory fault,
    the ECC errors (the words bench/fleetsim/faults.NAMES accepts)."""
    out, p = RUN.replayed(route), RUN.problem(pid)
    words = [p["detail"]["cause"], *(["ECC"] if p["detail"]["xid"] in (48, 95) else [])]
    top = [i for i in incidents_on(out, p["nodes"]) if not i["parentId"]]
    assert top, f"no incident for {pid}"
    return [i for i in top if not any(w.lower() in i["title"].lower() for w in words)]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("pid", ["unrelated", *FAILED_REPAIRS])
def test_the_final_title_names_the_cause(route, pid):
    bad = unnamed(route, pid)
    assert not bad, f"titles without {RUN.problem(pid)['detail']['cause']!r}: {describe(bad)}"


@pytest.mark.parametrize("route", ROUTES)
def test_the_storms_final_title_names_the_cause_through_the_rollback(route):
    bad = unnamed(route, "storm")
    assert not bad, f"titles without 'Xid 119': {describe(bad)}"
