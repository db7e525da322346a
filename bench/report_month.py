"""The reliability report on a simulated month of a 2,048-node fleet: its figures beside the simulation's
ground truth, the report's compute time, and the report page's render time in Chromium.

    python -m bench.report_month                          # 2,048 nodes, 30 days, seed 1
    python -m bench.report_month --nodes 256 --days 7 --no-browser
    python -m bench.report_month --db /tmp/month.sqlite3  # keep the populated store

The month is bench/fleetsim's (docs/fleet-simulation.md): its webhooks replayed through alertd's engine,
the incidents committed into SQLite through ``commit_step`` (history tables included), one fleet sample
per day (every node, 8 GPUs, H100). The page figure is Chromium's, through selenium: navigation start to
the charts drawn (the page's script records ``performance.now()`` then in ``data-charts-ms``: selenium's
polling is not counted), median of ``--loads`` loads after one warm-up.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from alertd.app.lifecycle import cleanup_ctx
from alertd.app.service import Service
from alertd.config.settings import parse_config
from alertd.core.fleet import NodeSample
from alertd.core.model import Change, Incident
from alertd.report.build import reliability
from alertd.report.compute import Period
from alertd.rules.ruleset import load_rules
from alertd.store.base import Step
from alertd.store.sqlite import SqliteStore
from alertd.web.app import build_app
from bench.fleetsim.run import run_one
from bench.fleetsim.sim import START

ROOT = Path(__file__).resolve().parents[1]
GPUS = 8
OUT_OF_SCOPE = ("host_maintenance", "software_bug")  # counted apart by the report


def truth(problems: list[Any], days: float) -> dict[str, Any]:
    """What the simulation knows: page-worthy hardware problems, their spans and nodes."""
    hw = [p for p in problems if p.page_worthy and p.cause not in OUT_OF_SCOPE]
    spans = sorted(p.end - p.start for p in hw)
    per_node: dict[str, int] = {}
    for p in hw:
        for n in p.nodes:
            per_node[n] = per_node.get(n, 0) + 1
    causes: dict[str, int] = {}
    for p in hw:
        causes[p.cause] = causes.get(p.cause, 0) + 1
    return {"failures": len(hw), "byCause": causes,
            "mttrMedian": statistics.median(spans) if spans else None,
            "gpuHoursOutOfService": sum(len(p.nodes) * GPUS * (p.end - p.start) for p in hw) / 3600,
            "lemonNodes": sorted(n for n, k in per_node.items() if k >= 2)}


async def fill(store: SqliteStore, report: dict[str, Any], nodes: list[str], days: int) -> int:
    incidents = [Incident.from_dict(doc) for doc in report["incidents"]]
    for start in range(0, len(incidents), 200):
        await store.commit_step(Step(changes=[Change(incident=i, kinds=["opened"], members=list(i.members))
                                              for i in incidents[start:start + 200]]))
    for day in range(days):
        await store.record_fleet_sample("", [NodeSample(n, "NVIDIA-H100-80GB-HBM3", GPUS, False) for n in nodes],
                                        START + timedelta(days=day, hours=12))
    return len(incidents)


def side_by_side(r: dict[str, Any], t: dict[str, Any]) -> None:
    print(f"{'figure':<34} {'report':>12} {'simulation':>12}")
    print(f"{'hardware failures':<34} {r['failures']:>12} {t['failures']:>12}")
    print(f"{'GPU-days':<34} {r['gpuDays']:>12,.0f}")
    print(f"{'failures per 1,000 GPU-days':<34} {r['failuresPer1000GpuDays']:>12.3f} "
          f"{t['failures'] / r['gpuDays'] * 1000:>12.3f}")
    median = r["mttrSeconds"]["median"]
    print(f"{'MTTR median, min':<34} {(median or 0) / 60:>12.1f} {(t['mttrMedian'] or 0) / 60:>12.1f}")
    print(f"{'GPU-hours out of service':<34} {r['gpuHoursOutOfService']:>12,.1f} {t['gpuHoursOutOfService']:>12,.1f}")
    print(f"{'lemon nodes':<34} {len(r['lemons']['nodes']):>12} {len(t['lemonNodes']):>12}")
    print("by cause (report: category Xid):", ", ".join(f"{c['category']} {c['xid'] or ''}: {c['failures']}"
                                                          for c in r["byCause"]))
    print("by cause (simulation):          ", ", ".join(f"{k}: {v}" for k, v in sorted(t["byCause"].items())))
    print(f"counted apart: {r['apart']}")


def page_seconds(url: str, loads: int) -> list[float]:
    from testkit.browser import Browser

    b = Browser.start()
    try:
        times = []
        for i in range(loads + 1):
            b.driver.get(url)
            deadline = time.monotonic() + 10
            while b.driver.find_element("tag name", "body").get_attribute("data-charts") != "drawn":
                if time.monotonic() > deadline:
                    raise RuntimeError("the charts were not drawn within 10 s")
                time.sleep(0.005)
            drawn = b.driver.find_element("tag name", "body").get_attribute("data-charts-ms")  # set by the page
            if i:
                times.append(int(drawn) / 1000)
        return times
    finally:
        b.driver.quit()


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report_month", description=__doc__)
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--db", type=Path)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    run = run_one(nodes=args.nodes, days=args.days, seed=args.seed, route="node")
    print(f"simulated and replayed in {time.perf_counter() - t0:.1f} s: {len(run.report['incidents'])} incidents")
    db = args.db or Path(tempfile.mkdtemp(prefix="alertd-report-")) / "alertd.sqlite3"
    store = SqliteStore(db)
    await store.open()
    nodes = sorted({n.name for n in run.fleet.nodes})
    t1 = time.perf_counter()
    stored = await fill(store, run.report, nodes, args.days)
    print(f"stored {stored} incidents and {args.days} fleet samples in {time.perf_counter() - t1:.1f} s")
    period = Period(START, START + timedelta(days=args.days))
    end = START + timedelta(days=args.days + 1)
    t2 = time.perf_counter()
    report = await reliability(store, period, end)  # the first call rolls every incident up
    t3 = time.perf_counter()
    report = await reliability(store, period, end)
    t4 = time.perf_counter()
    print(f"report: first (rolls up {stored} incidents) {t3 - t2:.3f} s, then {t4 - t3:.3f} s")
    side_by_side(report, truth(list(run.fleet.problems.values()), args.days))
    await store.close()
    if args.no_browser:
        return 0
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "storage": {"sqlite_path": str(db)}}, "bench")
    svc = Service(cfg, SqliteStore(db), load_rules(cfg.rule_paths), clock=lambda: end)
    app = build_app(svc)
    app.cleanup_ctx.append(cleanup_ctx(svc))  # the service starts and stops with the app
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        url = str(server.make_url(f"/ui/reports/reliability?since={period.since.date()}&until={period.until.date()}"))
        served = []
        async with aiohttp.ClientSession() as http:
            for _ in range(args.loads + 1):
                t = time.perf_counter()
                async with http.get(url) as resp:
                    await resp.read()
                served.append(time.perf_counter() - t)
        print(f"page served (request to last byte): median {statistics.median(served[1:]):.3f} s")
        times = await asyncio.to_thread(page_seconds, url, args.loads)
    finally:
        await server.close()
    print(f"page in Chromium, navigation start to charts drawn: median {statistics.median(times):.3f} s, "
          f"max {max(times):.3f} s ({args.loads} loads)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
