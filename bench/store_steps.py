"""The store thread's CPU per engine step of a storm, and the database bytes per alert it leaves.

    python -m bench.store_steps                 # 3,000 steps
    python -m bench.store_steps --steps 10000

Each step is what a storm webhook becomes: a new node incident with 8 GPU members (dcgm-exporter
labels, catalog Xid 48), its two timeline events and one outbox item, which is then delivered (the
outbox row marked done). SQLite on a temporary file with synchronous=OFF, so the figure is the store
thread's CPU (encoding, index writes), not fsync. No HTTP, no engine: the store's share of ingest.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone


from alertd.rules.shipped import SHIPPED_RULES  # noqa: E402
from alertd.core.outbox_items import Intent, Show  # noqa: E402
from alertd.gpu.catalog import XidCatalog  # noqa: E402
from alertd.core.model import GPU, Change, Event, Incident, Member, Subject  # noqa: E402
from alertd.store.base import OutboxItem, Step  # noqa: E402
from alertd.store.sqlite import SqliteStore  # noqa: E402

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)
MODEL = "NVIDIA H100 80GB HBM3"


def storm_incident(i: int, catalog: XidCatalog) -> Incident:
    node = f"storm-gpu-node-{i:06d}"
    inc = Incident(id=f"INC-{i + 1}", key=f"node|cluster=prod-a|node={node}", group="node",
                   title=f"Xid 48: Double-bit ECC error on {node}", severity="error", category="memory",
                   status="open", opened_at=T0, updated_at=T0, cluster="prod-a", node=node)
    for g in range(8):
        uuid = f"GPU-{i:08x}-{g:04x}-2dac-b1f9-eeb85c344fc3"
        gpu = GPU(uuid=uuid, index=str(g), pci_bus_id=f"0000:{g * 16 + 24:02x}:00", model=MODEL)
        m = Member(fingerprint=f"{i:012x}{g:04x}", alertname="GPUXidError", status="firing",
                   signal=catalog.lookup(48).signal(basis="signals rules/signals.yml:47: labels xid=48"),
                   subject=Subject(cluster="prod-a", node=node, gpu=gpu),
                   labels={"alertname": "GPUXidError", "node": node, "UUID": uuid, "gpu": str(g), "xid": "48",
                           "modelName": MODEL, "job": "dcgm-exporter", "namespace": "gpu-operator"},
                   starts_at=T0, last_seen=T0)
        inc.members[m.fingerprint] = m
        inc.gpus.append(gpu.to_dict())
    inc.signals, inc.xids = ["xid"], [48]
    inc.timeline = [Event(at=T0, kind="opened", text="GPUXidError: Xid 48: Double-bit ECC error (GPU 0)"),
                    Event(at=T0, kind="alert_joined", text="7 alerts joined", data={"fingerprints": list(inc.members)[1:]})]
    return inc


async def run(steps: int) -> None:
    catalog = XidCatalog.load(SHIPPED_RULES / "xid-catalog.yml")
    incidents = [storm_incident(i, catalog) for i in range(steps)]
    with tempfile.TemporaryDirectory(prefix="alertd-store-steps-") as work:
        path = os.path.join(work, "alertd.sqlite3")
        store = SqliteStore(path, synchronous="OFF")
        await store.open()
        thread_cpu = store.db._executor.submit(time.thread_time).result()
        started = time.monotonic()
        for inc in incidents:
            step = Step(changes=[Change(incident=inc, kinds=["opened"], events=inc.timeline, members=list(inc.members))],
                        outbox=[OutboxItem(inc.id, "console", Intent.SHOW, Show(kinds=("opened",), route="", receiver="", team="",
                                                                           incident={"id": inc.id, "title": inc.title}), T0)])
            await store.commit_step(step)
            due = await store.due_outbox(T0 + timedelta(hours=1), 10)
            await store.finish_outbox_batch([(o.id, None) for o in due if o.id is not None])
        wall = time.monotonic() - started
        thread_cpu = store.db._executor.submit(time.thread_time).result() - thread_cpu
        await store.close()
        size = os.path.getsize(path)
    print(f"{steps} steps ({steps * 8} alerts): store thread CPU {thread_cpu:.2f} s = {thread_cpu / steps * 1000:.2f} ms "
          f"per step, wall {wall:.1f} s; database {size / (steps * 8):.0f} bytes per alert")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args(argv)
    asyncio.run(run(args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
