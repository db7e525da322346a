"""The report's tables on both backends (SQLite and the session's real PostgreSQL): the hand-built week's
figures, pruning, fleet samples replaced per cluster, and the digest's claim that only one caller wins."""
from __future__ import annotations

from datetime import timedelta

from alertd.core.fleet import NodeSample
from alertd.report.build import reliability
from testkit.stores import make_store, store  # noqa: F401  (fixtures)
from tests.unit.test_report_week import MON, WEEK, replay, week_fleet

NOW = MON + timedelta(days=8)


async def test_the_week_reports_the_same_on_both_backends_and_after_pruning(store):  # noqa: F811
    await store.record_fleet_sample("prod", week_fleet(), MON + timedelta(hours=1))
    await replay(store)
    r = await reliability(store, WEEK, NOW)
    assert (r["gpuDays"], r["failures"], r["gpuHoursOutOfService"]) == (336, 4, 68.0)
    assert r["mttrSeconds"]["byAction"]["reboot_node"]["repairs"] == 3
    assert [n["node"] for n in r["lemons"]["nodes"]] == ["gpu-node-1"]
    assert await store.prune(MON + timedelta(days=30), resolved_before=MON + timedelta(days=30)) > 0
    assert await reliability(store, WEEK, NOW) == r


async def test_a_sample_replaces_the_clusters_nodes_and_sets_the_days_row(store):  # noqa: F811
    await store.record_fleet_sample("prod", week_fleet(), MON)
    await store.record_fleet_sample("other", [NodeSample("x-1", "L40S", 4, False)], MON)
    await store.record_fleet_sample("prod", [NodeSample("gpu-node-1", "NVIDIA-H100-80GB-HBM3", 8, True)],
                                    MON + timedelta(hours=5))
    assert await store.fleet_nodes("prod") == [("prod", "gpu-node-1", "NVIDIA-H100-80GB-HBM3", 8, True)]
    assert await store.fleet_days("2026-11-30") == [("2026-11-30", "other", "L40S", 1, 4, 0, 0),
                                                    ("2026-11-30", "prod", "NVIDIA-H100-80GB-HBM3", 1, 8, 1, 8)]


async def test_one_claim_wins_a_stale_one_is_taken_over_a_done_one_never(store):  # noqa: F811
    key, hour = "digest-2026-11-30", timedelta(hours=1)
    assert await store.claim_digest(key, "a", MON, MON - hour)
    assert not await store.claim_digest(key, "b", MON + timedelta(minutes=5), MON + timedelta(minutes=5) - hour)
    assert await store.claim_digest(key, "b", MON + 2 * hour, MON + hour)  # a died an hour ago: b takes it
    await store.finish_digest(key, MON + 2 * hour)
    assert not await store.claim_digest(key, "c", MON + 9 * hour, MON + 8 * hour)
