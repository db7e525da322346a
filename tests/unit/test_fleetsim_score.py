"""bench/fleetsim's scorer on a hand-built run whose figures are known."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from bench.fleetsim.model import Problem
from bench.fleetsim.score import score

START = datetime(2026, 11, 2, tzinfo=timezone.utc)


def ts(t: float) -> str:
    return (START + timedelta(seconds=t)).isoformat().replace("+00:00", "Z")


def problem(pid: str, node: str | list[str], alerts: list[tuple[str, float, float]], first: float, *,
            worthy: bool, storm: bool = False) -> Problem:
    nodes = node if isinstance(node, list) else [node]
    p = Problem(pid, pid, nodes, alerts[0][1], page_worthy=worthy, storm=storm, first_received=first)
    p.alerts = [(fp, s) for fp, s, _ in alerts]
    p.spells = [(s, e) for _, s, e in alerts]
    return p


def incident(iid: str, members: list[tuple[str, float]], *, parent: str = "", previous: str = "",
             timeline: list[tuple[str, float]] = ()) -> dict:
    return {"id": iid, "parentId": parent, "previousId": previous,
            "members": [{"fingerprint": fp, "startsAt": ts(t)} for fp, t in members],
            "timeline": [{"at": ts(t), "kind": "alert_joined", "data": {"fingerprint": fp}} for fp, t in timeline]}


def note(iid: str, kind: str, target: str, at: float, sent: bool = True) -> dict:
    return {"incident": iid, "kind": kind, "target": target, "due": ts(at), "at": ts(at), "sent": sent}


@pytest.fixture
def case():
    problems = {p.id: p for p in [
        problem("P1", "n1", [("A", 100, 500), ("B", 400, 600)], 130, worthy=True),
        problem("P2", "n2", [("C", 1000, 1200)], 1030, worthy=False),
        problem("P3", "n3", [("D", 2000, 2300), ("D", 5000, 5300)], 2030, worthy=True),
        problem("S", ["n4", "n5"], [("E", 3000, 3600), ("F", 3010, 3600)], 3020, worthy=True, storm=True),
        problem("P5", "n6", [("G", 4000, 4100)], 4030, worthy=False),
        problem("P6", "n7", [("H", 6000, 6100)], None, worthy=False),  # never reached alertd
    ]}
    report = {
        "incidents": [
            incident("INC-1", [("A", 100), ("B", 400)]),
            incident("INC-2", [("C", 1000)]),
            incident("INC-3", [("D", 2000)]),
            incident("INC-4", [("D", 5000)], previous="INC-3"),
            incident("INC-5", []),
            incident("INC-6", [("E", 3000)], parent="INC-5"),
            incident("INC-7", [("F", 3010)], parent="INC-5"),
            incident("INC-8", [("G", 4000)], timeline=[("A", 4500)]),  # holds P1's alert A: mixes n1 and n6
        ],
        "notifications": [
            note("INC-1", "page", "pagerduty:oncall", 200),
            note("INC-1", "show", "slack:#oncall", 200),
            note("INC-1", "show", "slack:#oncall", 300),       # an update, not a post
            note("INC-1", "page", "pagerduty:oncall", 400),    # the page raised, not a new page
            note("INC-2", "page", "pagerduty:oncall", 1100),   # maintenance: a false page
            note("INC-3", "page", "pagerduty:oncall", 2500),   # 470 s after P3's first alert: late
            note("INC-3", "show", "slack:#oncall", 2500, sent=False),
            note("INC-6", "page", "pagerduty:oncall", 3050),   # a child's page counts for its fleet
            note("INC-5", "page", "pagerduty:oncall", 3100),
            note("INC-5", "show", "slack:#oncall", 3100),
            note("INC-5", "show", "slack:#oncall|thread", 3100),
            note("INC-8", "show", "slack:#alerts", 4100),
            note("INC-8", "escalate", "pagerduty:escalation", 5000),
        ],
    }
    return report, problems


def test_scores_a_known_case(case):
    report, problems = case
    s = score(report, problems, START, reopen_window=300.0)
    assert s.problems == 5 and s.page_worthy == 3
    assert s.incidents == 6
    assert s.incidents_per_problem == pytest.approx((2 + 1 + 2 + 1 + 1) / 5)
    assert (s.split, s.split_by_gap) == (1, 1)  # P1 over INC-1 and INC-8 with no gap; P3 after a 2,700 s gap
    assert s.mixed == 1 and s.mixes == ["INC-8"] and s.orphans == 0 and s.splits == ["P1"]
    assert s.pages == 5 and s.false_pages == 1 and s.false == ["INC-2"]
    assert s.recall == 1.0 and s.recall_5m == pytest.approx(2 / 3) and s.late == ["P3"]
    assert s.pages_per_page_worthy == pytest.approx(5 / 3)
    assert s.posts_per_problem == pytest.approx(3 / 5)
    [storm] = s.storms
    assert (storm.nodes, storm.incidents, storm.pages) == (2, 1, 2)


def test_a_gap_shorter_than_the_reopen_window_is_a_real_split(case):
    report, problems = case
    s = score(report, problems, START, reopen_window=3600.0)
    assert (s.split, s.split_by_gap) == (2, 0)


def test_an_unpaged_page_worthy_problem_is_missed(case):
    report, problems = case
    report["notifications"] = [n for n in report["notifications"] if n["incident"] != "INC-1"]
    s = score(report, problems, START, reopen_window=300.0)
    assert s.missed == ["P1"] and s.recall == pytest.approx(2 / 3)


def test_a_fault_seen_only_after_the_operator_acted_is_left_out_of_recall(case):
    report, problems = case
    report["notifications"] = [n for n in report["notifications"] if n["incident"] != "INC-1"]
    problems["P1"].acted_at = 120.0  # cordoned before anything of it reached alertd (first received at 130)
    s = score(report, problems, START, reopen_window=300.0)
    assert s.unseen == ["P1"] and s.missed == [] and s.page_worthy == 2 and s.recall == 1.0
    problems["P1"].acted_at = 140.0  # its alert arrived first: a page was due, and none came
    s = score(report, problems, START, reopen_window=300.0)
    assert s.unseen == [] and s.missed == ["P1"]


def test_a_fleet_taking_over_its_nodes_page_is_no_second_page(case):
    report, problems = case
    for n in report["notifications"]:
        if n["incident"] == "INC-5" and n["kind"] == "page":
            n["payload"] = {"adopt": "INC-6"}  # the fleet's trigger goes to its node's PagerDuty alert
    s = score(report, problems, START, reopen_window=300.0)
    [storm] = s.storms
    assert storm.pages == 1 and s.pages == 4


def test_a_failed_repair_counts_its_pages_from_the_failure_on_apart_from_the_others(case):
    report, problems = case
    before = score(report, problems, START, reopen_window=300.0).pages
    problems["P3"].repair_failed_at = 4900.0  # the fault is back after the uncordon (alert D again at 5000)
    report["notifications"].append(note("INC-4", "page", "pagerduty:oncall", 5010))
    s = score(report, problems, START, reopen_window=300.0)
    assert s.repair_pages == {"P3": 1}
    assert s.pages == before, "the failed repair's page is not one of the problem's own pages"
    report["notifications"].append(note("INC-4", "page", "pagerduty:oncall", 5400))
    assert score(report, problems, START, reopen_window=300.0).repair_pages == {"P3": 2}
    problems["P3"].repair_failed_at = 6000.0  # nothing sent after it
    assert score(report, problems, START, reopen_window=300.0).repair_pages == {"P3": 0}


def test_the_share_of_page_worthy_incidents_whose_final_title_names_the_cause(case):
    report, problems = case
    titles = {"INC-1": "Xid 48: Double-bit ECC error on n1", "INC-3": "Node down: no metrics from the node on n3",
              "INC-4": "Xid 79 on n3", "INC-5": "Xid 119 on 2 nodes in c1", "INC-8": "Xid 48 on n1"}
    for inc in report["incidents"]:
        inc["title"] = titles.get(inc["id"], "")
    for pid, words in {"P1": ("Xid 48", "ECC"), "P3": ("Xid 79",), "S": ("Xid 119",), "P2": ("Xid 13",)}.items():
        problems[pid].names = words
    s = score(report, problems, START, reopen_window=300.0)
    # INC-1, INC-3, INC-4, INC-5 and INC-8 (which holds P1's alert) hold page-worthy problems; INC-2 holds
    # only P2, which is not page-worthy. INC-3 ends titled by its node being down.
    assert s.worthy_incidents == 5
    assert s.unnamed == ["INC-3: Node down: no metrics from the node on n3"]
    assert s.named == pytest.approx(4 / 5)
