"""What one history verdict costs: the store's snapshot read (alertd/store/history_snapshot.py) and the judge.

    python -m bench.history_snapshot                    # 1 GPU and 256 GPUs of history, 20,000 other incidents
    python -m bench.history_snapshot --other 50000 --reads 500

A SQLite store (synchronous=OFF) holds ``--other`` unrelated node incidents (8 GPUs each, Xid 48) and the
history under test: a node with ``--past`` earlier incidents (each an Xid 79 on every one of its GPUs, a
cordon answered and uncordoned, so the judge has a repair to look at), once for a node of 1 GPU and once
for a node of 256 GPUs. Each read is what the processor does before routing an opened incident: the
snapshot of the GPUs' and node's past over the rules' longest look-back, then the judge with the shipped
rules/history.yml. Figures: p50 / p95 / max wall per read, the rows it returned, the judge's own time.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone


from alertd.app.verdicts import gpu_uuids  # noqa: E402
from alertd.core.model import GPU, Change, Event, Incident, Member, Signal, Subject  # noqa: E402
from alertd.engine.judge import judge  # noqa: E402
from alertd.gpu.catalog import XidCatalog  # noqa: E402
from alertd.rules.history import longest_lookback  # noqa: E402
from alertd.rules.ruleset import load_rules  # noqa: E402
from alertd.rules.shipped import SHIPPED_RULES  # noqa: E402
from alertd.store.base import Step  # noqa: E402
from alertd.store.sqlite import SqliteStore  # noqa: E402

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)
CORDON = Signal(kind="node_cordoned", severity="info", category="informational", title="Node cordoned")


def node_incident(n: int, node: str, gpus: int, xid: int, at: datetime, catalog: XidCatalog, *,
                  repaired: bool = False) -> Incident:
    """A node incident: one Xid member per GPU (and a cordon answered and lifted when ``repaired``)."""
    inc = Incident(id=f"INC-{n}", key=f"node|cluster=prod-a|node={node}", group="node", title=f"Xid {xid} on {node}",
                   severity="critical", category="hardware", status="open", opened_at=at, updated_at=at,
                   cluster="prod-a", node=node, signals=["xid"], xids=[xid])
    sig = catalog.lookup(xid).signal(basis="bench")
    inc.primary = sig
    for g in range(gpus):
        uuid = f"GPU-{abs(hash(node)) % 16**8:08x}-{g:04x}-2dac-b1f9-eeb85c344fc3"
        gpu = GPU(uuid=uuid, index=str(g), pci_bus_id=f"0000:{g % 256:02x}:00")
        m = Member(fingerprint=f"{n:010x}{g:06x}", alertname="GPUXidError", status="firing", signal=sig,
                   subject=Subject(cluster="prod-a", node=node, gpu=gpu), labels={"node": node, "UUID": uuid},
                   starts_at=at, last_seen=at)
        inc.members[m.fingerprint] = m
        inc.gpus.append(gpu.to_dict())
    if repaired:
        m = Member(fingerprint=f"{n:010x}cordon", alertname="KubeNodeCordoned", status="resolved", signal=CORDON,
                   subject=Subject(cluster="prod-a", node=node), labels={"node": node}, starts_at=at + timedelta(minutes=10),
                   ends_at=at + timedelta(hours=2), response=True)
        inc.members[m.fingerprint] = m
    inc.timeline = [Event(at=at, kind="opened", text=inc.title)]
    return inc


async def commit(store: SqliteStore, inc: Incident) -> None:
    await store.commit_step(Step(changes=[Change(incident=inc, kinds=["opened"], events=inc.timeline,
                                                 members=list(inc.members))]))


async def measure(store: SqliteStore, inc: Incident, reads: int, rules: tuple, now: datetime) -> str:
    since = now - longest_lookback(rules)
    uuids = gpu_uuids(inc)
    walls, judged, rows = [], [], 0
    for _ in range(reads):
        t = time.perf_counter()
        snap = await store.history_snapshot(uuids, inc.node, since, inc.id)
        walls.append(time.perf_counter() - t)
        t = time.perf_counter()
        verdict = judge(inc, snap, rules, now)
        judged.append(time.perf_counter() - t)
        rows = len(snap.faults)
    walls.sort()
    p95 = walls[int(len(walls) * 0.95) - 1]
    return (f"{len(uuids):>3} GPU(s): read p50 {statistics.median(walls) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms, "
            f"max {walls[-1] * 1000:.2f} ms ({rows} rows); judge p50 {statistics.median(judged) * 1000:.2f} ms; "
            f"verdict: {verdict.rule if verdict else 'none'}")


async def run(other: int, past: int, reads: int) -> None:
    catalog = XidCatalog.load(SHIPPED_RULES / "xid-catalog.yml")
    rules = tuple(r for r in load_rules([SHIPPED_RULES]).history if r.action)
    with tempfile.TemporaryDirectory(prefix="alertd-history-snapshot-") as work:
        store = SqliteStore(os.path.join(work, "alertd.sqlite3"), synchronous="OFF")
        await store.open()
        n = 0
        for i in range(other):
            n += 1
            await commit(store, node_incident(n, f"other-node-{i:06d}", 8, 48, T0 - timedelta(minutes=i % 40000), catalog))
        lines = []
        for gpus in (1, 256):
            node = f"history-node-{gpus}"
            for k in range(past):
                n += 1
                await commit(store, node_incident(n, node, gpus, 79, T0 - timedelta(days=6) + timedelta(hours=5 * k),
                                                  catalog, repaired=True))
            n += 1
            now = T0 + timedelta(hours=1)
            lines.append(await measure(store, node_incident(n, node, gpus, 79, now, catalog), reads, rules, now))
        await store.close()
    print(f"# {other} other incidents, {past} earlier incidents of the node under test, {reads} reads each")
    for line in lines:
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", type=int, default=20000, help="unrelated incidents in the store")
    parser.add_argument("--past", type=int, default=20, help="earlier incidents of the node (and its GPUs)")
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args(argv)
    asyncio.run(run(args.other, args.past, args.reads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
