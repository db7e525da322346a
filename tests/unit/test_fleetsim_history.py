"""The fleet simulation's faults with a past (bench/fleetsim/history.py, --history), through alertd replay:
a GPU's third Xid 79 in 7 days and a node whose repair did not hold are each paged once, with the verdict
line and the escalated action on that page; the GPU's first Xid 79 is unchanged."""
from __future__ import annotations

import functools
import re

from bench.fleetsim.__main__ import main as fleetsim_main
from bench.fleetsim.faults import Rates, build_fleet
from bench.fleetsim.run import RunResult, run_one


@functools.lru_cache(maxsize=None)
def run() -> RunResult:
    return run_one(nodes=64, days=7, seed=1, route="node", rates=Rates(history=True))


def cases() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for h in run().score.history:
        out.setdefault(h["cause"], []).append(h)
    return out


def page_of(incident: str) -> dict:
    [page] = [n for n in run().report["notifications"]
              if n["sent"] and n["kind"] == "page" and n["incident"] == incident]
    return page


def test_the_third_xid79_of_a_gpu_in_7_days_is_paged_once_with_replace_gpu():
    first, second, third = cases()["faulty_gpu_repeat"]
    assert first["verdict"] == "" and first["pages"] == 1  # a first Xid 79: unchanged
    assert second["verdict"] == "repair-did-not-hold" and second["pages"] == 1
    assert third["pages"] == 1 and third["verdict"] == "xid79-third-in-7d" and third["action"] == "replace_gpu"
    [inc] = third["incidents"]
    assert re.fullmatch(rf"3rd Xid 79 on GPU GPU-…-[0-9a-f]{{4}} in 7 days \(last: {second['incidents'][0]}, "
                        rf"{first['incidents'][0]}\); action: replace GPU \(was: reboot node\)", third["line"])
    page = page_of(inc)
    assert "verdict" in page["change"]  # the first page already carries it
    assert all(h["ok"] for h in (first, second, third))


def test_a_repair_that_did_not_hold_is_paged_once_with_the_escalated_action():
    before, back = cases()["gpu_hbm3_repeat"]
    assert before["verdict"] == ""
    assert back["pages"] == 1 and back["verdict"] == "repair-did-not-hold" and back["action"] == "drain_and_handoff"
    assert re.fullmatch(rf"Xid 48 back on node {back['node']} 6 hours after the uncordon of {before['incidents'][0]}: "
                        r"the repair did not hold; action: drain and hand off \(was: reset GPU\)", back["line"])
    assert "verdict" in page_of(back["incidents"][0])["change"]


def test_the_cases_leave_the_rest_of_the_fleet_as_it_was():
    def shape(rates: Rates) -> list[tuple]:
        f = build_fleet(64, 7, 1, rates)
        return sorted((p.id, p.cause, tuple(p.nodes), p.start) for p in f.problems.values()
                      if p.expect_verdict is None)
    assert shape(Rates()) == shape(Rates(history=True))


def test_the_command_line_lists_each_case(capsys):
    assert fleetsim_main(["--nodes", "64", "--days", "7", "--seeds", "1", "--route", "node", "--history"]) == 0
    out = capsys.readouterr().out
    assert out.count("     history ok ") == 5 and "BAD" not in out
    assert "verdict xid79-third-in-7d: 3rd Xid 79 on GPU" in out
