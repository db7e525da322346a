"""The reliability report over a hand-built week, every figure checked against the answer worked out by hand.

The week: Monday 2026-11-30 00:00 to Monday 2026-12-07 00:00 UTC. The fleet, sampled on Monday: 4 H100
nodes and 2 A100 nodes of 8 GPUs each (48 GPUs), one A100 node cordoned. Alerts go through the real
engine (shipped rules) into a real SQLite store; the report is then computed from the store.

| incident | what | opened | alert ended (resolved 5m later) | kind |
|---|---|---|---|---|
| 1 | Xid 79 gpu-node-1 GPU 3 | Mon 10:00 | Mon 12:00 | failure (hardware, reboot_node) |
| 2 | Xid 48 gpu-node-2 GPU 0 | Tue 08:00 | Tue 08:30 | failure (memory, reset_gpu) |
| 3 | Xid 13 gpu-node-3 GPU 1 | Wed 14:00 | Wed 14:30 | application |
| 4 | Xid 79 gpu-node-1 GPU 3 | Thu 09:00 | Thu 13:00 | failure: node-1 and its GPU 3 repeat |
| 5 | Xid 79 gpu-node-5 GPU 2 (A100) | Sun 22:00 | Mon 02:00 (after the week) | failure |
"""
from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone

import pytest

from alertd.core.model import Alert
from alertd.engine.pipeline import Engine
from alertd.receive.payload import fingerprint_of
from alertd.report.build import BadPeriod, reliability
from alertd.report.compute import Period
from alertd.report.table import to_csv
from alertd.store.base import Step
from alertd.core.fleet import NodeSample
from alertd.store.sqlite import SqliteStore
from testkit.builders import shipped_rules

MON = datetime(2026, 11, 30, tzinfo=timezone.utc)
WEEK = Period(MON, MON + timedelta(days=7))
H = timedelta(hours=1)
HOLD = timedelta(minutes=5)


def xid(code: int, node: str, gpu: str, starts: datetime, status: str = "firing", ends: datetime | None = None) -> Alert:
    labels = {"alertname": "GPUXidError", "cluster": "prod", "xid": str(code), "node": node, "gpu": gpu,
              "UUID": f"GPU-{node}-{gpu}", "pci_bus_id": f"00000000:{0x18 + int(gpu):02X}:00.0",
              "Hostname": "dcgm-exporter-abcde"}
    return Alert(fingerprint=fingerprint_of(labels), status=status, labels=labels, annotations={}, starts_at=starts,
                 ends_at=ends, received_at=ends or starts)


# (code, node, gpu, start, end): each fires at start and resolves at end
FAULTS = [(79, "gpu-node-1", "3", MON + 10 * H, MON + 12 * H),
          (48, "gpu-node-2", "0", MON + 32 * H, MON + 32.5 * H),
          (13, "gpu-node-3", "1", MON + 62 * H, MON + 62.5 * H),
          (79, "gpu-node-1", "3", MON + 81 * H, MON + 85 * H),
          (79, "gpu-node-5", "2", MON + 166 * H, MON + 170 * H)]


async def replay(store: SqliteStore) -> None:
    engine = Engine(shipped_rules())
    moments = sorted([(f[3], "fire", f) for f in FAULTS] + [(f[4], "end", f) for f in FAULTS]
                     + [(f[4] + HOLD, "tick", f) for f in FAULTS])
    for now, what, (code, node, gpu, start, end) in moments:
        if what == "tick":
            changes = engine.tick(now)
        else:
            a = xid(code, node, gpu, start) if what == "fire" else xid(code, node, gpu, start, "resolved", end)
            changes = engine.ingest([a], now)
        await store.commit_step(Step(changes=changes))


def week_fleet() -> list[NodeSample]:
    nodes = [NodeSample(f"gpu-node-{i}", "NVIDIA-H100-80GB-HBM3", 8, False) for i in range(1, 5)]
    return nodes + [NodeSample("gpu-node-5", "NVIDIA-A100-SXM4-80GB", 8, False),
                    NodeSample("gpu-node-6", "NVIDIA-A100-SXM4-80GB", 8, True)]


@pytest.fixture
async def store(tmp_path):
    s = SqliteStore(tmp_path / "alertd.sqlite3")
    await s.open()
    await s.record_fleet_sample("prod", week_fleet(), MON + H)
    await replay(s)
    yield s
    await s.close()


async def test_every_figure_of_the_week(store):
    r = await reliability(store, WEEK, MON + timedelta(days=8))
    assert r["gpuDays"] == 48 * 7
    assert r["failures"] == 4
    assert r["failuresPer1000GpuDays"] == round(4 / 336 * 1000, 3)
    assert r["apart"] == {"application": 1, "maintenance": 0, "other": 0}
    assert [(c["category"], c["xid"], c["failures"]) for c in r["byCause"]] == [("hardware", 79, 3), ("memory", 48, 1)]
    # repairs run from the opening to the last alert's end (resolution waits the 5m hold-down more)
    repairs = sorted(x.total_seconds() for x in (2 * H, 0.5 * H, 4 * H, 4 * H))
    m = r["mttrSeconds"]
    assert m["repairs"] == 4
    assert m["median"] == (repairs[1] + repairs[2]) / 2
    assert m["p90"] == round(repairs[2] + (repairs[3] - repairs[2]) * 0.7, 1)
    assert m["byAction"]["reboot_node"] == {"repairs": 3, "median": (4 * H).total_seconds(),
                                            "p90": (4 * H).total_seconds()}
    assert m["byAction"]["reset_gpu"]["median"] == (0.5 * H).total_seconds()
    # whole nodes (8 GPUs) out from opening to the last alert's end; the last one only up to the week's end
    out = 8 * (2 * H + 0.5 * H + 4 * H + 2 * H) / H
    assert r["gpuHoursOutOfService"] == round(out, 3)
    assert sum(d["gpuHoursOutOfService"] for d in r["daily"]) == pytest.approx(out, abs=0.005)  # days rounded
    assert [(n["node"], n["failures"]) for n in r["lemons"]["nodes"]] == [("gpu-node-1", 2)]
    assert [(g["uuid"], g["failures"]) for g in r["lemons"]["gpus"]] == [("GPU-gpu-node-1-3", 2)]
    assert r["cordoned"]["now"] == {"NVIDIA-A100-SXM4-80GB": 1, "NVIDIA-H100-80GB-HBM3": 0}
    assert r["cordoned"]["daily"] == [{"day": "2026-11-30", "byNodeType": {"NVIDIA-A100-SXM4-80GB": 1,
                                                                           "NVIDIA-H100-80GB-HBM3": 0}}]
    assert r["weekly"] == [{"week": "2026-11-30", "failures": 4, "gpuDays": 336.0,
                            "failuresPer1000GpuDays": round(4 / 336 * 1000, 3)}]
    assert r["jobsInterrupted"] == 0 and r["gpuHoursLost"] == 0


async def test_node_type_filter_and_denominator(store):
    a100 = await reliability(store, Period(WEEK.since, WEEK.until, node_type="NVIDIA-A100-SXM4-80GB"),
                             MON + timedelta(days=8))
    assert a100["gpuDays"] == 16 * 7 and a100["failures"] == 1
    assert a100["gpuHoursOutOfService"] == 16.0
    assert a100["lemons"] == {"nodes": [], "gpus": []}


async def test_pruned_incidents_still_report(store):
    before = await reliability(store, WEEK, MON + timedelta(days=8))
    assert await store.prune(MON + timedelta(days=30), resolved_before=MON + timedelta(days=30)) > 0
    assert await store.list_incidents() == []
    after = await reliability(store, WEEK, MON + timedelta(days=8))
    assert after == before


async def test_csv_has_every_figure(store):
    r = await reliability(store, WEEK, MON + timedelta(days=8))
    rows = {(s, k): v for s, k, v in list(csv.reader(io.StringIO(to_csv(r))))[1:]}
    assert rows[("summary", "failures")] == "4"
    assert rows[("summary", "gpuDays")] == "336.0"
    assert rows[("byCause", "hardware xid 79")] == "3"
    assert rows[("lemonNode", "gpu-node-1")] == "2"


async def test_a_period_that_ends_before_it_starts_is_refused(store):
    with pytest.raises(BadPeriod, match="must be after since"):
        await reliability(store, Period(WEEK.until, WEEK.since), MON)
