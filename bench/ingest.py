"""Ingest benchmark: realistic GPU webhooks at rising rates against `alertd serve` on durable SQLite.

    python -m bench.ingest                      # the default run (see bench/README.md)
    python -m bench.ingest --rates 500,1000 --step-seconds 5 --skip-active
    python -m bench.ingest --profile prof.out   # the server under cProfile (slower: for where, not how fast)

For each rate step the compiled load generator (bench/loadgen, Go) replays
unique webhooks -- eight GPU alerts each, dcgm-exporter label sets -- at a fixed
open-loop rate over keep-alive connections, and this script prints the
sustained webhooks/s and alerts/s, the ack latency (p50/p99, measured from each
request's scheduled start, so a server that falls behind shows it), errors, the
server's CPU time split by thread (the event loop vs the store thread), how long
the engine needed to drain the inbox after the step, and peak RSS. A last phase
starts a fresh server, posts 12,500 webhooks of 8 distinct firing alerts
(100,000 active alerts on 12,500 nodes), waits until the engine has processed
them all and reports the resident memory.

Bounded: every step sends at most rate x step-seconds webhooks and stops after
step-seconds (plus a 30 s timeout for stragglers); every wait has a deadline.
Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from testkit.alertd_proc import AlertdProcess  # noqa: E402
from testkit.webhooks import UniqueWebhooks, dumps  # noqa: E402

ALERTS_PER_WEBHOOK = 8
WORKLOADS = {
    "fleet": "{n} nodes x 8 GPUs in 4 clusters; each node's first webhook opens or joins incidents (GPU signals "
             "on >= 5 nodes fold into fleet incidents), later ones re-fire with a new startsAt",
    "small-clusters": "{n} nodes x 8 GPUs, 4 nodes per cluster (no storm folding: one incident per node)",
    "duplicates": "{n} webhooks stored once up front, then only redelivered (receiver + dedup only, "
                  "the engine has nothing to do)",
}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def build_loadgen(out: Path) -> Path:
    binary = out / "loadgen"
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=REPO / "bench" / "loadgen", check=True,
                   env={**os.environ, "CGO_ENABLED": "0"})
    return binary


def write_bodies(path: Path, gen: UniqueWebhooks, count: int) -> None:
    with open(path, "wb") as fh:
        for _ in range(count):
            fh.write(dumps(gen.next()) + b"\n")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user+system) of the server's main thread (the event loop) and of all its other threads."""
    out = {"loop": 0.0, "other": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / CLK_TCK
        out["loop" if int(task.name) == pid else "other"] += seconds
    return out


def wait_drained(server: AlertdProcess, timeout: float) -> float | None:
    """Seconds until no inbox row is pending, or None if the deadline passed first."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if server.inbox_pending() == 0:
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def run_loadgen(loadgen: Path, server: AlertdProcess, bodies: Path, rate: float, seconds: float, conns: int,
                cpus: str | None) -> dict:
    cmd = [str(loadgen), "-url", server.receiver_url, "-bodies", str(bodies), "-rate", str(rate),
           "-duration", f"{seconds}s", "-conns", str(conns), "-timeout", "30s"]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 90)
    if done.returncode != 0:
        raise RuntimeError(f"loadgen failed: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def config(args: argparse.Namespace) -> dict:
    cfg: dict = {"log": {"level": "warning"}, "storage": {"synchronous": args.synchronous}}
    if args.rules:
        cfg["rules"] = {"paths": [str(Path(p).resolve()) for p in args.rules]}
    return cfg


def rate_steps(args: argparse.Namespace, loadgen: Path, work: Path) -> list[dict]:
    profiler = ["-m", "cProfile", "-o", str(Path(args.profile).resolve())] if args.profile else []
    server = AlertdProcess(work / "rates", config(args), cpus=args.server_cpus, python_args=profiler)
    server.start()
    gen = UniqueWebhooks(run="bench", nodes=args.nodes, seed=42,
                         nodes_per_cluster=4 if args.workload == "small-clusters" else 0)
    pool: list[bytes] = []
    if args.workload == "duplicates":  # store a pool once; the steps then only redeliver it
        pool = [dumps(gen.next()) for _ in range(args.nodes)]
        (work / "pool.jsonl").write_bytes(b"\n".join(pool) + b"\n")
        run_loadgen(loadgen, server, work / "pool.jsonl", 500, len(pool) / 500 + 1, args.conns, args.loadgen_cpus)
        wait_drained(server, args.drain_timeout)
    results = []
    print(f"server pid {server.pid} on {server.url}, SQLite synchronous={args.synchronous}, "
          f"server CPUs {args.server_cpus or 'any'}, load generator CPUs {args.loadgen_cpus or 'any'}, "
          f"{args.conns} connections, workload {args.workload}: {WORKLOADS[args.workload].format(n=args.nodes)}\n",
          flush=True)
    header = (f"{'target/s':>8} {'sent':>6} {'ok':>6} {'err':>5} {'webhooks/s':>10} {'alerts/s':>9} "
              f"{'p50 ms':>7} {'p99 ms':>8} {'max ms':>8} {'svc p99':>8} {'loop cpu':>8} {'store cpu':>9} "
              f"{'drain s':>7} {'HWM MB':>7}")
    print(header)
    try:
        for rate in args.rates:
            count = int(rate * args.step_seconds)
            bodies = work / f"bodies-{rate}.jsonl"
            if pool:
                bodies.write_bytes(b"".join(pool[i % len(pool)] + b"\n" for i in range(count)))
            else:
                write_bodies(bodies, gen, count)
            cpu0 = thread_cpu(server.pid)
            lg = run_loadgen(loadgen, server, bodies, rate, args.step_seconds, args.conns, args.loadgen_cpus)
            cpu1 = thread_cpu(server.pid)
            drained = wait_drained(server, args.drain_timeout)
            hwm = server.proc_status("VmHWM") / 1024
            errors = sum(lg["errors"].values())
            row = {"rate": rate, **lg, "loop_cpu": cpu1["loop"] - cpu0["loop"],
                   "store_cpu": cpu1["other"] - cpu0["other"], "drain_s": drained, "hwm_mb": hwm}
            results.append(row)
            print(f"{rate:>8} {lg['sent']:>6} {lg['ok']:>6} {errors:>5} {lg['ok_per_s']:>10.0f} "
                  f"{lg['ok_per_s'] * ALERTS_PER_WEBHOOK:>9.0f} {lg['latency_ms']['p50']:>7.1f} "
                  f"{lg['latency_ms']['p99']:>8.1f} {lg['latency_ms']['max']:>8.1f} {lg['service_ms']['p99']:>8.1f} "
                  f"{row['loop_cpu']:>7.1f}s {row['store_cpu']:>8.1f}s "
                  f"{'>' + str(args.drain_timeout) if drained is None else f'{drained:.1f}':>7} {hwm:>7.0f}",
                  flush=True)
            if lg["errors"]:
                print(f"         errors: {lg['errors']}")
            bodies.unlink()
        print(f"\npeak RSS of the server over all steps (VmHWM): {server.proc_status('VmHWM') / 1024:.0f} MB")
        with server.db() as conn:
            n_inbox = conn.execute("SELECT count(*) FROM inbox").fetchone()[0]
            n_inc = conn.execute("SELECT count(*) FROM incidents WHERE status <> 'resolved'").fetchone()[0]
            n_members = conn.execute("SELECT count(*) FROM members").fetchone()[0]
        print(f"store after the steps: {n_inbox} inbox rows, {n_inc} open incidents, {n_members} members")
    finally:
        server.stop()
    if args.profile:
        print_profile(Path(args.profile))
    return results


def active_alerts_phase(args: argparse.Namespace, loadgen: Path, work: Path) -> dict:
    """100,000 active alerts: 12,500 webhooks of 8 distinct firing GPU alerts, each on its own node."""
    webhooks = args.active_alerts // ALERTS_PER_WEBHOOK
    server = AlertdProcess(work / "active", config(args), cpus=args.server_cpus)
    server.start()
    try:
        rss_idle = server.proc_status("VmRSS") / 1024
        bodies = work / "bodies-active.jsonl"
        write_bodies(bodies, UniqueWebhooks(run="active", distinct_nodes=True, seed=7), webhooks)
        seconds = webhooks / args.active_rate
        started = time.monotonic()
        lg = run_loadgen(loadgen, server, bodies, args.active_rate, seconds + 1, args.conns, args.loadgen_cpus)
        drained = wait_drained(server, args.drain_timeout * 4)
        took = time.monotonic() - started
        time.sleep(1)
        rss, hwm = server.proc_status("VmRSS") / 1024, server.proc_status("VmHWM") / 1024
        bodies.unlink()
        with server.db() as conn:
            members = conn.execute("SELECT count(*) FROM members m JOIN incidents i ON i.id = m.incident_id "
                                   "WHERE i.status <> 'resolved'").fetchone()[0]
            incidents = conn.execute("SELECT count(*) FROM incidents WHERE status <> 'resolved'").fetchone()[0]
        status, firing = server.get_json("/api/v1/incidents?limit=1000&status=open")
        firing_api = sum(i["firing"] for i in firing["incidents"]) if status == 200 else -1
        print(f"\n100,000 active alerts: posted {lg['ok']}/{webhooks} webhooks ({lg['ok'] * 8} alerts) at "
              f"{lg['ok_per_s']:.0f}/s (p99 ack {lg['latency_ms']['p99']:.1f} ms, errors {lg['errors'] or 0}); "
              f"engine drained {'in %.1f s' % took if drained is not None else 'NOT within the deadline'}")
        print(f"  open incidents {incidents}, their members {members} (firing per the read API, first 1000 "
              f"incidents: {firing_api})")
        print(f"  server RSS: idle {rss_idle:.0f} MB, with 100,000 active alerts {rss:.0f} MB, peak {hwm:.0f} MB")
        return {"rss_mb": rss, "hwm_mb": hwm, "idle_mb": rss_idle, "members": members, "incidents": incidents,
                "drained": drained is not None}
    finally:
        server.stop()


def print_profile(path: Path, top: int = 25) -> None:
    """Where the event-loop thread spent its time (cProfile sees only the main thread)."""
    if not path.exists():
        print(f"no profile written to {path}")
        return
    stats = pstats.Stats(str(path))
    total = stats.total_tt
    groups = {
        "JSON decode (json.loads)": ("json/decoder.py", "json/__init__.py:299"),
        "JSON encode (json.dumps)": ("json/encoder.py",),
        "decoding and validation (msgspec, jsonschema)": ("msgspec", "jsonschema", "alertd/receive/wire.py"),
        "receiver (web/app.py, receive/)": ("alertd/web/app.py", "alertd/receive/payload.py"),
        "engine (engine/, normalize, classify)": ("alertd/engine/", "alertd/engine/normalize.py", "alertd/gpu/",
                                                  "alertd/core/matchers.py"),
        "model (to/from dict, iso)": ("alertd/core/model.py",),
        "store glue (backend, parts, sql; main thread side)": ("alertd/store/",),
        "outbox + notifiers": ("alertd/notify/",),
        "aiohttp": ("aiohttp/",),
        "asyncio + selectors (incl. idle poll)": ("asyncio/", "selectors.py", "select.epoll"),
        "prometheus_client": ("prometheus_client/",),
        "logging": ("logging/",),
    }
    sums = {name: 0.0 for name in groups}
    other = 0.0
    for (filename, line, func), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{filename}:{line}({func})" if filename != "~" else func
        for name, needles in groups.items():
            if any(n in where for n in needles):
                sums[name] += tt
                break
        else:
            other += tt
    print(f"\nprofile of the event-loop thread ({total:.1f} s of own time in total), by area:")
    for name, seconds in sorted(sums.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:7.2f} s {100 * seconds / total:5.1f} %  {name}")
    print(f"  {other:7.2f} s {100 * other / total:5.1f} %  everything else")
    print(f"\ntop {top} functions by own time:")
    stats.sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="250,500,1000,1500,2000",
                   type=lambda s: [float(x) if "." in x else int(x) for x in s.split(",")],
                   help="webhooks per second, one step each (default 250,500,1000,1500,2000)")
    p.add_argument("--step-seconds", type=float, default=10.0)
    p.add_argument("--conns", type=int, default=64, help="keep-alive connections of the load generator")
    p.add_argument("--nodes", type=int, default=5000,
                   help="fleet size for the rate steps; each webhook is one node's 8 GPUs, nodes re-fire in turn")
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="fleet",
                   help="fleet (default), small-clusters, or duplicates (the receiver alone)")
    p.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    p.add_argument("--server-cpus", default="0", help="taskset CPU list for alertd ('' = no pinning)")
    p.add_argument("--loadgen-cpus", default="1", help="taskset CPU list for the load generator ('' = no pinning)")
    p.add_argument("--drain-timeout", type=float, default=120.0, help="max seconds to wait for the engine per step")
    p.add_argument("--active-alerts", type=int, default=100_000)
    p.add_argument("--active-rate", type=float, default=150.0, help="webhooks/s while loading the active alerts")
    p.add_argument("--skip-rates", action="store_true")
    p.add_argument("--skip-active", action="store_true")
    p.add_argument("--rules", action="append", help="rule file or directory instead of the shipped rules/")
    p.add_argument("--profile", help="run the rate steps with the server under cProfile, write the stats here")
    p.add_argument("--workdir", help="keep data and logs here (default: a temp dir, removed afterwards)")
    args = p.parse_args(argv)
    args.server_cpus = args.server_cpus or None
    args.loadgen_cpus = args.loadgen_cpus or None

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="alertd-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        loadgen = build_loadgen(work)
        print(f"alertd ingest benchmark: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, work dir {work}")
        print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n")
        if not args.skip_rates:
            rate_steps(args, loadgen, work)
        if not args.skip_active:
            active_alerts_phase(args, loadgen, work)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
