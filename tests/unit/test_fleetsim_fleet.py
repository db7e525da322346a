"""bench/fleetsim's fleet: seeded, shaped on the Llama 3 failure table, storms of the promised size."""
from __future__ import annotations

import math
from collections import Counter

from bench.fleetsim.alertmanager import ROUTES
from bench.fleetsim.faults import LLAMA3_INTERRUPTIONS, MIX, build_fleet
from bench.fleetsim.sim import deliver


def test_the_same_seed_gives_the_same_webhooks_and_another_seed_others():
    def run(seed: int) -> list:
        fleet = build_fleet(128, 3, seed)
        return [(t.isoformat(), b) for t, b in deliver(fleet, ROUTES["node"], seed).webhooks]

    first = run(7)
    assert first and first == run(7)
    assert first != run(8)


def test_the_llama3_run_gives_about_its_419_interruptions_in_its_mix():
    fleet = build_fleet(2048, 54, 1)  # 16,384 GPUs for 54 days: the run of the table
    causes = Counter(p.cause for p in fleet.problems.values() if p.cause in MIX)
    total = sum(causes.values())
    assert abs(total - LLAMA3_INTERRUPTIONS) < 4 * math.sqrt(LLAMA3_INTERRUPTIONS)
    assert causes.most_common(2)[0][0] == "faulty_gpu" and causes.most_common(2)[1][0] == "gpu_hbm3"
    share = causes["faulty_gpu"] / total
    assert 0.22 < share < 0.38  # 30.1 % in the table


def test_three_storms_of_the_promised_size():
    fleet = build_fleet(2048, 30, 3)
    storms = {p.cause: p for p in fleet.problems.values() if p.storm}
    assert set(storms) == {"storm_driver_rollout", "storm_rack_cooling", "storm_exporter_rollout"}
    assert 36 <= len(storms["storm_driver_rollout"].nodes) <= 40
    assert 12 <= len(storms["storm_rack_cooling"].nodes) <= 16
    assert len({n.rsplit("-n", 1)[0] for n in storms["storm_rack_cooling"].nodes}) == 1  # one rack
    rollout = storms["storm_exporter_rollout"].nodes
    assert len(rollout) >= 80 and len({n.split("-r")[0] for n in rollout}) == 1  # one cluster's DaemonSet
    days = {int(p.start // 86400) for p in storms.values()}
    assert len(days) == 3


def test_unrelated_problems_do_not_overlap_on_a_node():
    fleet = build_fleet(256, 30, 4)
    spans: dict[str, list[tuple[float, float, str]]] = {}
    for node in fleet.nodes:
        for f in node.facts:
            spans.setdefault(node.name, []).append((f.start, f.end, f.problem))
    clashes = []
    for name, facts in spans.items():
        by_problem: dict[str, tuple[float, float]] = {}
        for s, e, p in facts:
            lo, hi = by_problem.get(p, (s, e))
            by_problem[p] = (min(lo, s), max(hi, e))
        items = sorted(by_problem.items(), key=lambda kv: kv[1])
        for (p, (_, e)), (q, (s, _)) in zip(items, items[1:]):
            found_in_maintenance = "found_in_maintenance" in q and "maintenance" in p
            if s < e and not found_in_maintenance and not (fleet.problems[p].storm or fleet.problems[q].storm):
                clashes.append((name, p, q))
    assert not clashes
