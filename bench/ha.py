"""Side by side on one machine: alertd on its defaults (durable SQLite) against Alertmanager's own
``POST /api/v2/alerts``, the same closed-loop load; then alertd's ack p99 at a fixed 1,000 webhooks/s,
a cold storm of 10,000 nodes, and 3 replicas on PostgreSQL with a kill -9 of the leader.

    python -m bench.ha                                  # everything, ~3 minutes
    python -m bench.ha --phases compare --receivers 0,1,2 --seconds 10
    python -m bench.ha --phases postgres
    python -m bench.ha --phases compare --webhooks 20000 --rounds 3   # the headline compare, ratio per round
    python -m bench.ha --phases storm --receivers 2      # the cold storm with and without receivers

Nothing is pinned (both systems share every core, as they would in production). The load generator
is bench/loadgen (Go) with ``-closed``: each of ``--conns`` connections sends its next body as soon as
the previous one was answered. Both systems get the same alerts: alertd as webhooks (8 GPU alerts
each), Alertmanager as the same 8 alerts in its API's body. The compare phase is a fleet of
``--fleet`` nodes (2,000) firing again and again, after a warm-up that sends every node once; the cold
storm (every node new, incidents and fleets forming) is its own phase. A benchmark: it prints figures and
asserts nothing. Bounded: every phase sends a bounded number of bodies for a bounded time.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from bench.ingest import build_loadgen  # noqa: E402
from testkit.alertd_proc import AlertdProcess  # noqa: E402
from testkit.process import http  # noqa: E402
from testkit.services import start_alertmanager, start_postgres  # noqa: E402
from testkit.webhooks import UniqueWebhooks, dumps  # noqa: E402


def write_bodies(work: Path, name: str, count: int, *, distinct: bool, run: str, fleet: int = 0,
                 gen: UniqueWebhooks | None = None) -> tuple[Path, Path]:
    """The same alerts twice: webhook documents for alertd, API v2 bodies for Alertmanager.

    ``fleet``: the nodes cycle through a fleet of this size (each cycle a later startsAt, so every alert
    is still new to the inbox); 0: every webhook a node never seen. ``gen`` continues another file's."""
    gen = gen or UniqueWebhooks(run=run, nodes=fleet or max(count, 1), distinct_nodes=distinct, seed=7)
    hooks, api = work / f"{name}.webhooks", work / f"{name}.api"
    with open(hooks, "wb") as wh, open(api, "wb") as am:
        for _ in range(count):
            doc = gen.next()
            wh.write(dumps(doc) + b"\n")
            am.write(dumps([{k: a[k] for k in ("labels", "annotations", "startsAt", "endsAt", "generatorURL")}
                            for a in doc["alerts"]]) + b"\n")
    return hooks, api


def loadgen(binary: Path, url: str, bodies: Path, *, seconds: float, conns: int, closed: bool = True,
            rate: float = 100000) -> dict:
    cmd = [str(binary), "-url", url, "-bodies", str(bodies), "-duration", f"{seconds}s", "-conns", str(conns),
           "-rate", str(rate), "-timeout", "30s"] + (["-closed"] if closed else [])
    before = machine_ticks()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 90)
    if done.returncode != 0:
        raise RuntimeError(f"loadgen failed: {done.stderr}")
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    result["machine"] = machine_share(before, machine_ticks())
    return result


def machine_ticks() -> list[int]:
    """The whole machine's CPU time by kind since boot (/proc/stat): user nice system idle iowait irq softirq
    steal."""
    return [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]


def machine_share(before: list[int], after: list[int]) -> str:
    """How the machine's cores were spent over a run. Steal is time the hypervisor gave this virtual machine's
    cores to others: on a shared host it varies from hour to hour, and every figure of the run moves with it."""
    spent = [b - a for a, b in zip(before, after)]
    total = max(1, sum(spent))
    idle, iowait, steal = spent[3], spent[4], spent[7]
    busy = total - idle - iowait - steal
    return (f"machine over the run: {100 * busy / total:.0f}% busy, {100 * idle / total:.0f}% idle, "
            f"{100 * iowait / total:.0f}% iowait, {100 * steal / total:.0f}% stolen by the hypervisor")


def row(name: str, r: dict) -> str:
    errors = sum(r["errors"].values())
    return (f"| {name} | {r['ok_per_s']:,.0f} | {r['latency_ms']['p50']:.1f} | {r['latency_ms']['p99']:.1f} | "
            f"{r['latency_ms']['max']:.1f} | {errors} |")


HEADER = "| system | webhooks/s | p50 ms | p99 ms | max ms | errors |\n|---|---:|---:|---:|---:|---:|"


def alertd(work: Path, receivers: int | None, cfg: dict | None = None) -> AlertdProcess:
    args = [] if receivers is None else ["--receivers", str(receivers)]
    return AlertdProcess(work, {"log": {"level": "warning"}, **(cfg or {})}, serve_args=args).start(timeout=60)


def compare(args: argparse.Namespace, binary: Path, work: Path) -> None:
    """A fleet of --fleet nodes firing again and again (each webhook's alerts new to the inbox, with a later
    startsAt): both systems first get every node once (a warm-up, not measured), then the measured run:
    ``--seconds`` of load, or with ``--webhooks N`` exactly N requests each (bounded by 120 s)."""
    gen = UniqueWebhooks(run="cmp", nodes=args.fleet, seed=7)
    warm, warm_api = write_bodies(work, "warm", args.fleet, distinct=False, run="cmp", gen=gen)
    count = args.webhooks or int(args.seconds * 6000)
    seconds = 120.0 if args.webhooks else args.seconds
    hooks, api = write_bodies(work, "compare", count, distinct=False, run="cmp", gen=gen)
    size = f"{args.webhooks:,} requests" if args.webhooks else f"{args.seconds:.0f} s"
    print(f"\nclosed loop, {args.conns} in flight, {size} each, 8 GPU alerts per request, a fleet of "
          f"{args.fleet:,} nodes firing again (after a warm-up of one webhook per node), nothing pinned")
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    print(HEADER)
    rounds: list[tuple[dict, dict[str, dict]]] = []
    for n_round in range(args.rounds):
        am = alertmanager_run(binary, work / f"am{n_round}", warm_api, api, args, conns=args.conns, seconds=seconds)
        ours = {name_of(n): alertd_run(binary, work / f"alertd-{n}-{n_round}", n, warm, hooks, args, seconds)
                for n in settings(args)}
        rounds.append((am, ours))
    verdict(rounds)


def alertd_run(binary: Path, work: Path, receivers: int | None, warm: Path, hooks: Path, args: argparse.Namespace,
               seconds: float) -> dict:
    """A fresh alertd warmed with the fleet, then the measured load; its rows printed, its figures returned."""
    server = alertd(work, receivers)
    try:
        loadgen(binary, server.receiver_url, warm, seconds=120, conns=args.conns)
        server.wait_drained(timeout=180)
        before = process_use(server.pid)
        r = loadgen(binary, server.receiver_url, hooks, seconds=seconds, conns=args.conns)
        use = per_webhook(before, process_use(server.pid), r)
        behind = server.inbox_pending()
        scrape = scrapes(server)
    finally:
        server.stop()
    print(row(f"{name_of(receivers)} (SQLite, synchronous=FULL)", r), flush=True)
    print(f"  {r['machine']}", flush=True)
    print(f"  GET /metrics after the run: {scrape}", flush=True)
    print(f"  per process (engine first): {use}", flush=True)
    print(f"  processed by the engine meanwhile: {(r['ok'] - behind) / max(1e-3, r['elapsed_s']):,.0f} "
          f"webhooks/s ({behind:,} acknowledged and still pending at the end)", flush=True)
    return r


def verdict(rounds: list[tuple[dict, dict[str, dict]]]) -> None:
    """Per round: alertd's webhooks/s over Alertmanager's and both p99s; then the worst and best ratio."""
    print("\n| round | Alertmanager /s | alertd defaults /s | ratio | AM p99 ms | alertd p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for i, (am, ours) in enumerate(rounds, 1):
        r = ours["alertd defaults"]
        ratios.append(r["ok_per_s"] / max(1e-9, am["ok_per_s"]))
        print(f"| {i} | {am['ok_per_s']:,.0f} | {r['ok_per_s']:,.0f} | {ratios[-1]:.2f}x | "
              f"{am['latency_ms']['p99']:.1f} | {r['latency_ms']['p99']:.1f} |")
    lower = all(o["alertd defaults"]["latency_ms"]["p99"] < am["latency_ms"]["p99"] for am, o in rounds)
    print(f"\nratio alertd defaults / Alertmanager: worst {min(ratios):.2f}x, best {max(ratios):.2f}x over "
          f"{len(rounds)} rounds; alertd's p99 lower in every round: {'yes' if lower else 'no'}")
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")


def alertmanager_run(binary: Path, work: Path, warm_api: Path, api: Path, args: argparse.Namespace,
                     **load: Any) -> dict:
    """A fresh Alertmanager (no receiver: its API in memory) warmed with the fleet, then the measured load;
    its row printed, its figures returned."""
    work.mkdir(parents=True, exist_ok=True)
    cfg = work / "am.yml"
    cfg.write_text("route:\n  receiver: none\nreceivers:\n  - name: none\n")
    am = start_alertmanager(cfg, work)
    try:
        loadgen(binary, am.url + "/api/v2/alerts", warm_api, seconds=60, conns=args.conns)
        r = loadgen(binary, am.url + "/api/v2/alerts", api, **{"seconds": args.seconds, **load})
    finally:
        am.stop()
    print(row("Alertmanager POST /api/v2/alerts (in memory)", r), flush=True)
    print(f"  {r['machine']}", flush=True)
    return r


def fixed_rate(args: argparse.Namespace, binary: Path, work: Path) -> None:
    gen = UniqueWebhooks(run="rate", nodes=args.fleet, seed=7)
    warm, warm_api = write_bodies(work, "rate-warm", args.fleet, distinct=False, run="rate", gen=gen)
    hooks, api = write_bodies(work, "rate", int(1000 * args.seconds), distinct=False, run="rate", gen=gen)
    print(f"\nopen loop at 1,000 webhooks/s, the fleet of {args.fleet:,} nodes after its warm-up "
          "(latency from each request's scheduled start)")
    print(HEADER)
    # The same machine's reference: Alertmanager's in-memory API at the same rate and connections.
    alertmanager_run(binary, work / "am-rate", warm_api, api, args, conns=64, closed=False, rate=1000)
    for n in settings(args):
        server = alertd(work / f"alertd-rate-{n}", n)
        try:
            loadgen(binary, server.receiver_url, warm, seconds=120, conns=args.conns)
            server.wait_drained(timeout=180)
            r = loadgen(binary, server.receiver_url, hooks, seconds=args.seconds, conns=64, closed=False, rate=1000)
            behind = server.inbox_pending()
        finally:
            server.stop()
        print(row(name_of(n), r), flush=True)
        print(f"  {r['machine']}", flush=True)
        print(f"  still pending at the end: {behind:,} webhooks", flush=True)


def storm(args: argparse.Namespace, binary: Path, work: Path) -> None:
    print("\ncold storm: 10,000 nodes never seen before, one webhook of 8 GPU alerts each, 64 in flight")
    print(HEADER)
    for n in settings(args):
        hooks, _ = write_bodies(work, f"storm-{n}", 10_000, distinct=True, run=f"storm{n}")
        server = alertd(work / f"alertd-storm-{n}", n)
        try:
            r = loadgen(binary, server.receiver_url, hooks, seconds=60, conns=64)
            scrape = scrapes(server)
        finally:
            server.stop()
        print(row(name_of(n), r), flush=True)
        print(f"  {r['machine']}", flush=True)
        print(f"  GET /metrics after the storm: {scrape}", flush=True)


def scrapes(server: AlertdProcess, count: int = 50) -> str:
    """Median and worst time of ``count`` scrapes, one new connection each (with receivers, the merge of
    every process's metric files happens in each of them)."""
    took = []
    for _ in range(count):
        t0 = time.perf_counter()
        status, _, body = http("GET", server.url + "/metrics", timeout=10)
        took.append((time.perf_counter() - t0) * 1000)
        assert status == 200, status
    took.sort()
    return f"median {took[len(took) // 2]:.1f} ms, worst {took[-1]:.1f} ms over {count} scrapes, {len(body):,} bytes"


def process_use(pid: int) -> dict[int, tuple[float, int, int]]:
    """CPU seconds, bytes written and write calls of the process and its children (the receivers)."""
    out = {}
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for p in [pid, *map(int, children)]:
        try:
            stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            io = dict(line.split(": ") for line in Path(f"/proc/{p}/io").read_text().splitlines())
        except OSError:
            continue
        out[p] = ((int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"), int(io["write_bytes"]), int(io["syscw"]))
    return out


def per_webhook(before: dict[int, tuple[float, int, int]], after: dict[int, tuple[float, int, int]], r: dict) -> str:
    """Each process's share of a core, and its disk bytes and write calls per webhook, over the measured run."""
    taken, seconds = max(1, r["ok"]), max(1e-3, r["elapsed_s"])
    parts = []
    for p, (cpu, wb, calls) in after.items():
        cpu0, wb0, calls0 = before.get(p, (0.0, 0, 0))
        parts.append(f"{(cpu - cpu0) / seconds:.2f} core, {(wb - wb0) / 1024 / taken:.1f} KB and "
                     f"{(calls - calls0) / taken:.1f} writes per webhook")
    return "; ".join(parts)


def settings(args: argparse.Namespace) -> list[int | None]:
    """alertd's defaults (None), then each --receivers count asked for."""
    return [None] + [int(x) for x in args.receivers.split(",") if x]


def name_of(receivers: int | None) -> str:
    return "alertd defaults" if receivers is None else f"alertd --receivers {receivers}"


def postgres(args: argparse.Namespace, binary: Path, work: Path) -> None:
    pg = start_postgres(work / "pg")
    cfg = {"storage": {"backend": "postgres", "postgres_dsn": pg.dsn}}
    replicas = [alertd(work / f"replica{i}", 0, cfg) for i in range(3)]
    try:
        per = max(1, args.conns // 3)
        hooks = [write_bodies(work, f"pg{i}", int(args.seconds * 3000), distinct=False, run=f"pg{i}")[0] for i in range(3)]
        before = machine_ticks()
        procs = [subprocess.Popen([str(binary), "-url", r.receiver_url, "-bodies", str(h), "-duration", f"{args.seconds}s",
                                   "-conns", str(per), "-rate", "100000", "-timeout", "30s", "-closed"],
                                  stdout=subprocess.PIPE, text=True) for r, h in zip(replicas, hooks)]
        outs = [json.loads(p.communicate(timeout=args.seconds + 90)[0].strip().splitlines()[-1]) for p in procs]
        machine = machine_share(before, machine_ticks())
        total = sum(o["ok_per_s"] for o in outs)
        p99 = max(o["latency_ms"]["p99"] for o in outs)
        print(f"\n3 replicas on one PostgreSQL, closed loop, {per} in flight per replica, {args.seconds:.0f} s")
        print(f"| replicas | webhooks/s (sum) | worst p99 ms |\n|---|---:|---:|\n| 3 | {total:,.0f} | {p99:.1f} |")
        print(f"  {machine}")
        leader = next(r for r in replicas if b"leader" in http("GET", r.url + "/readyz")[2])
        t0 = time.monotonic()
        leader.kill9()
        others = [r for r in replicas if r is not leader]
        while time.monotonic() - t0 < 30:
            if any(b"leader" in http("GET", r.url + "/readyz", timeout=1)[2] for r in others):
                break
            time.sleep(0.05)
        print(f"failover after kill -9 of the leader: a follower reported leader after {time.monotonic() - t0:.2f} s "
              f"(lease ttl 5 s, renewal every 1 s)")
    finally:
        for r in replicas:
            r.stop()
        pg.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phases", default="compare,rate,storm,postgres")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--fleet", type=int, default=2000, help="nodes of the fleet in the compare phase")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--webhooks", type=int, default=0, help="compare phase: send exactly this many requests "
                        "to each system (bounded by 120 s) instead of --seconds of load")
    parser.add_argument("--receivers", default="", help="also run alertd with these --receivers counts, e.g. 0,1,2 "
                        "(compare, rate and storm phases)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="alertd-bench-ha-"))
    try:
        binary = build_loadgen(work)
        phases = {"compare": compare, "rate": fixed_rate, "storm": storm, "postgres": postgres}
        for name in args.phases.split(","):
            phases[name](args, binary, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
