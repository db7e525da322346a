"""A storm of thousands of nodes with Kubernetes enrichment on: engine time and memory per node, /readyz.

A real kube-apiserver with etcd (testkit/kube_apiserver.py; built by scripts/install-test-deps.sh)
holds the fleet: every node a Node object with one GPU pod of a training job on it. alertd runs
in-process on the shipped rules, a SQLite store and ``enrich.kube`` reading that API server as the
shipped read-only role (deploy/kubernetes/rbac.yaml). Each storm is one Xid 79 alert per node, as
Alertmanager sends one group (alertname, cluster) of a fleet-wide fault: webhooks of 1,000 alerts,
posted together. Each storm runs in a fresh process with a fresh store, so its memory is its own.

Per storm it prints: the seconds from the first webhook until the engine has taken every alert (all
nodes in one fleet incident), the engine process's CPU over that time per node, the enrichment targets
answered by Kubernetes (each node twice: its own incident and the fleet's) until enrichment was idle or
``--enrich-wait`` passed, the resident memory it added (peak) per node, and /readyz: polled every 100 ms
from another thread with a 1 s timeout, how many polls, how many were not 200 within the timeout, and
the slowest answer.

    python -m bench.storm_scale                       # 1,000, 5,000 and 20,000 nodes: about 10 minutes
    python -m bench.storm_scale --sizes 1000,5000

A benchmark: it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CLUSTER = "prod-a"
NAMESPACE = "ml-training"
PER_WEBHOOK = 1000
POLL = 0.1  # seconds between /readyz polls
POLL_TIMEOUT = 1.0


def node_name(i: int) -> str:
    return f"gpu-node-{i:05d}"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


# ----- the fleet in the API server (parent process) -----

def create_fleet(k: Any, nodes: int) -> float:
    """Node objects and one GPU pod each, 32 requests in flight; returns the seconds it took."""
    k.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": NAMESPACE, "labels": {"team": "ml-platform"}}})

    def one(i: int) -> None:
        name = node_name(i)
        k.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                                     "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}})
        k.create(f"/api/v1/namespaces/{NAMESPACE}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"train-{i // 8}-worker-{i % 8}", "namespace": NAMESPACE}, "spec": {
            "nodeName": name, "containers": [{"name": "main", "image": "trainer:1",
                                              "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}})

    started = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(one, range(nodes)))
    return time.monotonic() - started


# ----- one storm (child process) -----

class GcPauses:
    """The cyclic garbage collector's pauses (they stop the event loop too), from gc.callbacks."""

    def __init__(self) -> None:
        self.total = self.worst = 0.0
        self._started = 0.0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            took = time.perf_counter() - self._started
            self.total, self.worst = self.total + took, max(self.worst, took)


class ReadyzPoller(threading.Thread):
    """Polls /readyz from its own thread, so a stalled event loop shows as a slow or missing answer."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.polls, self.unready, self.worst = url, 0, 0, 0.0
        self.failing_since = self.longest = 0.0
        self.peak_rss = rss_bytes()
        self.stopping = threading.Event()

    def run(self) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                with opener.open(self.url, timeout=POLL_TIMEOUT) as resp:
                    ok = resp.status == 200
            except (urllib.error.URLError, OSError):
                ok = False
            took = time.monotonic() - started
            self.polls += 1
            failed = not ok or took > POLL_TIMEOUT
            self.unready += failed
            self.worst = max(self.worst, took)
            # the longest stretch with no 200 within the timeout: a kubelet probing every 5 s with a 1 s
            # timeout marks the pod unready after 3 failures in a row, so a stretch over 10 s can
            self.failing_since = (self.failing_since or started) if failed else 0.0
            if self.failing_since:
                self.longest = max(self.longest, time.monotonic() - self.failing_since)
            self.peak_rss = max(self.peak_rss, rss_bytes())
            self.stopping.wait(max(0.0, POLL - took))


def storm_webhooks(nodes: int, starts: datetime) -> list[dict[str, Any]]:
    from testkit.webhooks import gpu_alert, webhook

    alerts = [gpu_alert(CLUSTER, node_name(i), 0, 0, starts_at=starts + timedelta(milliseconds=i % 1000),
                        node_index=i, extra={"xid": "79", "node": node_name(i), "Hostname": node_name(i)})
              for i in range(nodes)]
    out = []
    for k in range(0, nodes, PER_WEBHOOK):
        doc = webhook(alerts[k:k + PER_WEBHOOK], cluster=CLUSTER, node="")
        doc["groupLabels"] = doc["commonLabels"] = {"alertname": "GPUXidError", "cluster": CLUSTER}
        doc["groupKey"] = '{}:{alertname="GPUXidError", cluster="prod-a"}'
        out.append(doc)
    return out


async def one_storm(nodes: int, kubeconfig: str, work: Path, enrich_wait: float) -> dict[str, Any]:
    from aiohttp.test_utils import TestClient, TestServer

    from alertd.app.service import Service
    from alertd.config.settings import parse_config
    from alertd.enrich import Enricher
    from alertd.integrations.base import Delivered, Notifier
    from alertd.rules.ruleset import load_rules
    from alertd.store.sqlite import SqliteStore
    from testkit.served import served

    class Quiet(Notifier):
        kind = "console"

        async def deliver(self, items: Any, ref: Any) -> Delivered:
            return Delivered()

    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "enrich": {"kube": {"kubeconfig": kubeconfig}}},
                       "bench")
    enricher = Enricher.from_settings(cfg.enrich)
    assert enricher is not None
    svc = Service(cfg, SqliteStore(work / "alertd.sqlite3", synchronous=cfg.storage.synchronous), load_rules(cfg.rule_paths),
                  notifiers={"console": Quiet()}, enricher=enricher)
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    hooks = storm_webhooks(nodes, datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=3))
    poller = ReadyzPoller(str(client.make_url("/readyz")))
    pauses = GcPauses()
    try:
        await svc.process_pending()
        base_rss, cpu0 = rss_bytes(), time.process_time()
        poller.start()
        t0 = time.monotonic()
        answers = await asyncio.gather(*(client.post("/api/v1/alerts/alertmanager", json=h) for h in hooks))
        assert all(a.status == 200 for a in answers), [a.status for a in answers]
        acked = time.monotonic() - t0
        while True:  # the engine has taken every alert: one fleet incident over all the nodes
            fleets = [i for i in svc.engine.state.incidents.values() if i.fleet] if svc.engine else []
            if fleets and len(fleets[0].nodes) >= nodes and not (await svc.store.stats()).get("inbox_pending"):
                break
            await asyncio.sleep(0.05)
        engine_s, engine_cpu = time.monotonic() - t0, time.process_time() - cpu0
        idle = await enricher.wait_idle(enrich_wait)
        enriched_s = time.monotonic() - t0
        stats = enricher.stats()
        kube = stats.get("kube") if isinstance(stats.get("kube"), dict) else {}
        return {"nodes": nodes, "acked_s": round(acked, 2), "engine_s": round(engine_s, 2), "alerts": nodes,
                "engine_ms_per_node": round(engine_s / nodes * 1000, 3),
                "cpu_ms_per_node": round(engine_cpu / nodes * 1000, 3),
                "enriched_s": round(enriched_s, 2), "enrichment_idle": idle, "kube_ok": stats.get("kube_ok"),
                "kube_unavailable": stats.get("kube_unavailable"), "kube_errors": kube.get("errors"),
                "kube_api_calls": kube.get("calls"), "rss_added_mb": round((poller.peak_rss - base_rss) / 2**20, 1),
                "kb_per_node": round((poller.peak_rss - base_rss) / nodes / 1024, 1),
                "summarised": len(svc.engine.state.summarised) if svc.engine else 0,
                "readyz_polls": poller.polls, "readyz_unready": poller.unready,
                "readyz_worst_ms": round(poller.worst * 1000, 1),
                "readyz_longest_failing_s": round(poller.longest, 1),
                "gc_worst_ms": round(pauses.worst * 1000, 1), "gc_total_s": round(pauses.total, 1)}
    finally:
        poller.stopping.set()
        await client.close()


# ----- driver -----

def storms(sizes: list[int], kubeconfig: str, enrich_wait: float) -> list[dict[str, Any]]:
    """Each storm in a process of its own; [] when one fails."""
    rows = []
    for size in sizes:
        out = subprocess.run([sys.executable, "-m", "bench.storm_scale", "--one", str(size), "--kubeconfig", kubeconfig,
                              "--enrich-wait", str(enrich_wait)], capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return []
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,5000,20000", help="storm sizes in nodes, comma-separated")
    ap.add_argument("--enrich-wait", type=float, default=120.0,
                    help="seconds after the engine is done to let enrichment run on, /readyz still polled (default 120)")
    ap.add_argument("--one", type=int, default=0, help=argparse.SUPPRESS)  # child: run one storm
    ap.add_argument("--kubeconfig", default="",
                    help="an API server that holds the fleet already (a previous run's): no server started")
    args = ap.parse_args(argv)
    if args.one:
        with tempfile.TemporaryDirectory(prefix="alertd-storm-scale-") as tmp:
            print(json.dumps(asyncio.run(one_storm(args.one, args.kubeconfig, Path(tmp), args.enrich_wait))))
        return 0
    from testkit.kube_apiserver import bind_shipped_enrichment_role, start_kube_apiserver

    sizes = [int(s) for s in args.sizes.split(",")]
    if args.kubeconfig:
        rows = storms(sizes, args.kubeconfig, args.enrich_wait)
    else:
        with tempfile.TemporaryDirectory(prefix="alertd-storm-scale-kube-") as tmp:
            k = start_kube_apiserver(Path(tmp))
            try:
                bind_shipped_enrichment_role(k)
                took = create_fleet(k, max(sizes))
                print(f"kube-apiserver {k.url}: {max(sizes)} nodes and {max(sizes)} GPU pods created in {took:.0f} s",
                      flush=True)
                rows = storms(sizes, str(k.kubeconfig(Path(tmp) / "alertd.kubeconfig", "alertd")), args.enrich_wait)
            finally:
                k.stop()
    if not rows:
        return 1
    print("\n| nodes | engine s | engine ms/node | CPU ms/node | targets enriched | in s | RSS added MB | KB/node | "
          "summarised | GC worst ms | /readyz polls | not ready in 1 s | slowest ms | longest failing s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['nodes']:,} | {r['engine_s']} | {r['engine_ms_per_node']} | {r['cpu_ms_per_node']} | "
              f"{r['kube_ok']:,} | {r['enriched_s']} | {r['rss_added_mb']} | {r['kb_per_node']} | {r['summarised']:,} | "
              f"{r['gc_worst_ms']} | {r['readyz_polls']} | {r['readyz_unready']} | {r['readyz_worst_ms']} | "
              f"{r['readyz_longest_failing_s']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
