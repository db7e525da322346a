"""Web UI render times with 50,000 stored incidents and an open 500-node storm: the incidents list, a GPU page,
a fleet's node incidents.

    python -m bench.ui_render                       # 50,000 incidents and a 500-node storm, SQLite
    python -m bench.ui_render --storm 2000          # a larger storm
    python -m bench.ui_render --incidents 10000 --requests 50
    python -m bench.ui_render --db /tmp/ui.sqlite3  # keep (and reuse) the populated store

The store is filled through ``commit_step`` (the path the engine's commits take,
history tables included): a fleet of 1,250 nodes x 8 GPUs; each incident is one
node's Xid (79, 48, 63, 94, 74, 119) or thermal/ECC/NVLink alert on one or two
GPUs, 95 % of them resolved, spread over 90 days; one GPU in 40 is a "bad board"
with about 25 incidents, and one board in 400 moved between nodes. Then the real
app (alertd.web.app.build_app) answers HTTP requests on loopback through aiohttp's
test server, and each figure is the time from request to last byte, measured
client-side, after two warm-up requests.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from alertd.config.settings import parse_config
from alertd.core.model import GPU, Change, Event, Incident, Member, Signal, Subject
from alertd.app.lifecycle import cleanup_ctx
from alertd.rules.ruleset import load_rules
from alertd.app.service import Service
from alertd.store.base import Step
from alertd.store.sqlite import SqliteStore
from alertd.web.app import build_app

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime.now(timezone.utc).replace(microsecond=0)
XIDS = (79, 48, 63, 94, 74, 119)
OTHER = (("thermal", "GPUTemperatureHigh", "warning"), ("ecc", "GPUEccDoubleBitErrors", "error"),
         ("nvlink", "GPUNVLinkErrors", "error"))


def uuid_of(node: int, gpu: int) -> str:
    return f"GPU-{node:08x}-{gpu:04x}-4c52-9e61-{(node * 8 + gpu):012x}"


def make_incident(seq: int, rng: random.Random, nodes: int, bad: list[tuple[int, int]]) -> Incident:
    if rng.random() < 0.4:  # bad boards collect a large share of the failures
        node, gpu = rng.choice(bad)
    else:
        node, gpu = rng.randrange(nodes), rng.randrange(8)
    moved = node % 400 == 7 and seq % 2 == 0  # this board sat in the next node for a while
    name = f"gpu-node-{(node + 1 if moved else node):04d}"
    opened = NOW - timedelta(minutes=rng.randrange(90 * 24 * 60))
    inc = Incident(id=f"INC-{seq}", key=f"node|cluster=prod|node={name}", group="node", title="", severity="critical",
                   category="hardware", status="resolved" if rng.random() < 0.95 else "open", opened_at=opened,
                   updated_at=opened + timedelta(minutes=20), cluster="prod", node=name)
    for k in range(1 + (rng.random() < 0.3)):
        g = GPU(uuid=uuid_of(node, (gpu + k) % 8), index=str((gpu + k) % 8), pci_bus_id=f"0000:{0x18 + gpu:02x}:00",
                model="NVIDIA H100 80GB HBM3", serial=f"16549{node:05d}{gpu:03d}")
        if rng.random() < 0.7:
            code = rng.choice(XIDS)
            sig = Signal(kind="xid", severity="critical", category="hardware", xid=code, title=f"Xid {code}")
            alertname = "GPUXidError"
        else:
            kind, alertname, severity = rng.choice(OTHER)
            sig = Signal(kind=kind, severity=severity, category="hardware", title=alertname)
        fp = f"{seq:012x}{k:04x}"
        inc.members[fp] = Member(fingerprint=fp, alertname=alertname, status="resolved", signal=sig,
                                 subject=Subject(cluster="prod", node=name, gpu=g),
                                 labels={"alertname": alertname, "node": name, "UUID": g.uuid},
                                 starts_at=opened, ends_at=opened + timedelta(minutes=15), last_seen=opened,
                                 generator_url="http://prometheus.example:9090/graph", summary=alertname)
        inc.gpus.append(g.to_dict())
    sigs = [m.signal for m in inc.members.values()]
    inc.primary = sigs[0]
    inc.title = f"{sigs[0].title} on {name} GPU {gpu}"
    inc.signals = sorted({s.kind for s in sigs})
    inc.xids = sorted({s.xid for s in sigs if s.xid})
    inc.timeline = [Event(at=opened, kind="opened", text=inc.title),
                    Event(at=opened + timedelta(minutes=20), kind="resolved", text="all alerts resolved")]
    return inc


async def populate(store: SqliteStore, n: int) -> str:
    """Fill the store; returns the UUID of the GPU with the most incidents."""
    rng = random.Random(11)
    nodes = 1250
    bad = [(rng.randrange(nodes), rng.randrange(8)) for _ in range(nodes * 8 // 40)]
    started = time.perf_counter()
    for first in range(1, n + 1, 500):
        batch = [make_incident(seq, rng, nodes, bad) for seq in range(first, min(first + 500, n + 1))]
        await store.commit_step(Step(changes=[Change(incident=i, kinds=["opened"], events=i.timeline,
                                                     members=list(i.members)) for i in batch],
                                     next_seq=first + len(batch)))
    print(f"stored {n:,} incidents in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    top = await store.ranking(NOW - timedelta(days=365), limit=1)
    return top["gpus"][0]["uuid"]


async def add_storm(store: SqliteStore, first: int, nodes: int) -> str:
    """An open Xid 119 storm: ``nodes`` node incidents folded into one fleet incident (its id is returned),
    their alerts labelled as dcgm-exporter and the site label them (rack, model, driver)."""
    opened = NOW - timedelta(minutes=10)
    sig = Signal(kind="xid", severity="error", category="driver", xid=119, title="Xid 119: GSP RPC timeout")
    fleet = Incident(id=f"INC-{first + nodes}", key="fleet|cluster=prod|event=gpu-fault", group="fleet",
                     title=f"Xid 119: GSP RPC timeout on {nodes} nodes in prod", severity="error", category="driver",
                     status="open", opened_at=opened, updated_at=opened, cluster="prod", fleet=True, primary=sig,
                     signals=["xid"], xids=[119])
    children = []
    for i in range(nodes):
        name = f"gpu-storm-{i:04d}"
        inc = Incident(id=f"INC-{first + i}", key=f"node|cluster=prod|node={name}", group="node",
                       title=f"Xid 119: GSP RPC timeout on {name} GPU {i % 8}", severity="error", category="driver",
                       status="open", opened_at=opened, updated_at=opened, cluster="prod", node=name, primary=sig,
                       signals=["xid"], xids=[119], parent_id=fleet.id)
        g = GPU(uuid=uuid_of(100_000 + i, i % 8), index=str(i % 8), model="NVIDIA H100 80GB HBM3")
        labels = {"alertname": "GPUXidError", "node": name, "UUID": g.uuid, "xid": "119", "rack": f"r{i // 32}",
                  "modelName": g.model, "DCGM_FI_DRIVER_VERSION": "550.54.15"}
        fp = f"{first + i:012x}0000"
        inc.members[fp] = Member(fingerprint=fp, alertname="GPUXidError", status="firing", signal=sig,
                                 subject=Subject(cluster="prod", node=name, gpu=g), labels=labels, starts_at=opened,
                                 last_seen=opened, summary="Xid 119")
        inc.gpus.append(g.to_dict())
        inc.timeline = [Event(at=opened, kind="opened", text=inc.title)]
        children.append(inc)
    fleet.children = [c.id for c in children]
    fleet.nodes = [c.node for c in children]
    fleet.timeline = [Event(at=opened, kind="opened", text=fleet.title)]
    await store.commit_step(Step(changes=[Change(incident=i, kinds=["opened"], events=i.timeline, members=list(i.members))
                                          for i in [*children, fleet]], next_seq=first + nodes + 1))
    return fleet.id


async def timed(client: TestClient, path: str, requests: int) -> tuple[list[float], int, int]:
    for _ in range(2):
        await (await client.get(path)).read()
    times, size = [], 0
    for _ in range(requests):
        started = time.perf_counter()
        resp = await client.get(path)
        body = await resp.read()
        times.append((time.perf_counter() - started) * 1000)
        assert resp.status == 200, (path, resp.status, body[:300])
        size = len(body)
    return times, size, body.count(b"<tr") - body.count(b"<thead")


async def main(args: argparse.Namespace) -> None:
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp(prefix="alertd-ui-bench-")) / "alertd.sqlite3"
    fresh = not db.exists()
    store = SqliteStore(db)
    await store.open()
    uuid = await populate(store, args.incidents) if fresh else \
        (await store.ranking(NOW - timedelta(days=365), limit=1))["gpus"][0]["uuid"]
    fleet = await add_storm(store, args.incidents + 1, args.storm) if fresh and args.storm else \
        f"INC-{args.incidents + args.storm + 1}"
    await store.close()
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "notify": {"console": {"enabled": False}}}, "bench")
    svc = Service(cfg, SqliteStore(db), load_rules(cfg.rule_paths))
    app = build_app(svc)
    app.cleanup_ctx.append(cleanup_ctx(svc))  # the service starts and stops with the app
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        history = len(await svc.store.gpu_history(uuid))
        serial = (await svc.store.find_gpus(uuid))[0]["serial"]
        pages = [("incidents list (50 rows)", "/ui/incidents"),
                 ("incidents list, status=resolved&xid=79", "/ui/incidents?status=resolved&xid=79"),
                 ("incidents list, gpu=<serial>", f"/ui/incidents?gpu={serial}"),
                 (f"incidents list, severity=error (the {args.storm}-node storm)", "/ui/incidents?severity=error"),
                 (f"fleet node incidents ({args.storm}), first page", f"/ui/incidents/{fleet}/nodes"),
                 (f"GPU page ({history} incidents)", f"/ui/gpus/{uuid}"),
                 ("API: GET /api/v1/incidents?limit=100", "/api/v1/incidents?limit=100"),
                 ("API: GET /api/v1/gpus/{uuid}", f"/api/v1/gpus/{uuid}")]
        print(f"{args.incidents:,} incidents stored ({db}); {args.requests} requests per page\n")
        print(f"{'page':45} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'bytes':>9} {'rows':>6}")
        for label, path in pages:
            times, size, rows = await timed(client, path, args.requests)
            times.sort()
            p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
            print(f"{label:45} {statistics.median(times):8.1f} {p95:8.1f} {times[-1]:8.1f} {size:9,} {max(rows, 0):6}")
    finally:
        await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--incidents", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--storm", type=int, default=500, help="nodes of the open storm stored besides (0: none)")
    parser.add_argument("--db", help="SQLite file to fill (first run) and reuse (later runs)")
    asyncio.run(main(parser.parse_args()))
