"""Enrichment under a storm: 64 nodes x 8 GPUs alerting at once.

Runs alertd in-process (SQLite store, shipped rules, HTTP app) with its enricher pointed
at a real OpenSearch node (started from the test cache, see scripts/install-test-deps.sh)
or, when none is installed, at the Elasticsearch/OpenSearch compat server; Kubernetes is
the API test server with a GPU pod of a PyTorchJob on every node. Each node's dcgm alerts
arrive as one webhook (8 alerts), all nodes within about a second, and the kernel log of
every node holds Xid lines around the alerts' startsAt.

Prints: log search requests on the wire (target: at most one per node per window),
distinct node+window searches, enrichment latency (change committed -> annotations
written) p50/p95/max, Kubernetes API calls, and how long the first notification took.

    python -m bench.enrich_storm [--nodes 64] [--gpus 8] [--backend auto|opensearch|compat]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from alertd.config.settings import parse_config  # noqa: E402
from alertd.enrich import Enricher  # noqa: E402
from alertd.integrations.base import Delivered, Notifier  # noqa: E402
from alertd.rules.ruleset import load_rules  # noqa: E402
from alertd.app.service import Service  # noqa: E402
from alertd.store.sqlite import SqliteStore  # noqa: E402
from testkit.es_compat_server import SearchCompatServer  # noqa: E402
from testkit.graylog_server import graylog_message, load_graylog_indices  # noqa: E402
from testkit.kube_server import KubeTestServer  # noqa: E402
from testkit.webhooks import PCI_BUSES, node_webhook  # noqa: E402
from testkit.served import served  # noqa: E402

CLUSTER = "storm-1"


class Recorder(Notifier):
    kind = "console"

    def __init__(self) -> None:
        self.first: float | None = None
        self.count = 0

    async def deliver(self, items, ref) -> Delivered:
        self.count += len(items)
        if self.first is None:
            self.first = time.monotonic()
        return Delivered()


class WireCounter:
    """Counts _msearch requests by wrapping the backend's search call."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.calls = 0
        inner = backend.search

        async def search(queries):
            self.calls += 1
            return await inner(queries)

        backend.search = search


def node_name(i: int) -> str:
    return f"gpu-node-{i:03d}"


def kernel_docs(nodes: int, starts: datetime) -> list[tuple[str, dict]]:
    docs = []
    for i in range(nodes):
        n = node_name(i)
        for g in range(8):
            bus = PCI_BUSES[g].lower()
            docs.append(("graylog_1", graylog_message(
                n, starts - timedelta(seconds=40 - g), f"NVRM: Xid (PCI:0000:{bus}:00): 74, pid=3101, name=python, "
                                                       f"NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0)")))
        if i % 8 == 0:
            docs.append(("graylog_1", graylog_message(n, starts - timedelta(seconds=30),
                                                      "NVRM: Xid (PCI:0000:3a:00): 79, pid='<unknown>', name=<unknown>, "
                                                      "GPU has fallen off the bus.", level=3)))
        docs.append(("graylog_1", graylog_message(n, starts - timedelta(seconds=20), "GET /healthz 200",
                                                  facility="user", level=6)))
    return docs


def kube_cluster(server: KubeTestServer, nodes: int) -> None:
    server.add_namespace("ml-training", {"team": "ml-platform"}, {"alertd.io/slack-channel": "#ml-platform-alerts"})
    jobs = max(1, nodes // 8)
    for j in range(jobs):
        server.add_object({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                           "metadata": {"name": f"train-{j}", "namespace": "ml-training"}, "spec": {}})
    for i in range(nodes):
        n = node_name(i)
        server.add_node(n)
        server.add_pod("ml-training", f"train-{i % jobs}-worker-{i}", n, gpus=8,
                       owner=("kubeflow.org/v1", "PyTorchJob", f"train-{i % jobs}"))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="alertd-enrich-storm-"))
    started_search = None
    compat = None
    backend_kind = args.backend
    starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=10)
    docs = kernel_docs(args.nodes, starts)
    if backend_kind in ("auto", "opensearch"):
        try:
            from testkit.services import start_opensearch

            started_search = await asyncio.to_thread(start_opensearch, work / "opensearch")
            url = started_search.url
            await load_graylog_indices(url, docs)
            backend_kind = "opensearch"
        except Exception as exc:  # noqa: BLE001 - fall back to the compat server
            if args.backend == "opensearch":
                raise
            print(f"(no real OpenSearch: {exc}; using the compat server)", file=sys.stderr)
            backend_kind = "compat"
    if backend_kind == "compat":
        compat = SearchCompatServer("opensearch")
        for index, doc in docs:
            compat.add(index, doc)
        url = await compat.start()
    kube = KubeTestServer()
    await kube.start()
    kube_cluster(kube, args.nodes)
    kubeconfig = kube.write_kubeconfig(work / "kubeconfig")
    cfg = parse_config({
        "rules": {"paths": [str(ROOT / "rules")]},
        "storage": {"synchronous": "NORMAL"} if args.fast_disk else {},
        "enrich": {"logs": {"backend": "opensearch", "urls": [url]}, "kube": {"kubeconfig": str(kubeconfig)}},
    }, "bench")
    enricher = None if args.no_enrich else Enricher.from_settings(cfg.enrich)
    wire = WireCounter(enricher.searcher.backend) if enricher else None
    recorder = Recorder()
    svc = Service(cfg, SqliteStore(work / "alertd.sqlite3", synchronous=cfg.storage.synchronous), load_rules(cfg.rule_paths),
                  notifiers={"console": recorder}, enricher=enricher)  # the service binds its enricher
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    try:
        hooks = [node_webhook(CLUSTER, node_name(i), starts_at=starts + timedelta(milliseconds=15 * i), kind=0,
                              gpus=args.gpus, node_index=i) for i in range(args.nodes)]
        t0 = time.monotonic()

        async def post(doc):
            resp = await client.post("/api/v1/alerts/alertmanager", json=doc)
            assert resp.status == 200, await resp.text()

        await asyncio.gather(*(post(h) for h in hooks))
        acked = time.monotonic() - t0
        # wait for the engine to take everything in, then for enrichment to finish
        while (await svc.store.stats()).get("inbox_pending", 0):
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        if enricher is None:  # baseline: the same storm without enrichment
            await svc.outbox.drain()
            return {"backend": "none (enrichment off)", "nodes": args.nodes, "alerts": args.nodes * args.gpus,
                    "webhooks_acked_s": round(acked, 3),
                    "first_notification_s": round(recorder.first - t0, 3) if recorder.first else None,
                    "notifications_delivered": recorder.count}
        idle = await enricher.wait_idle(120)
        total = time.monotonic() - t0
        stats = enricher.stats()
        incidents = list(svc.engine.state.incidents.values())
        upgraded = sum(1 for inc in incidents if inc.primary and inc.primary.detail == "from kernel log")
        fleet = [inc for inc in incidents if inc.fleet]
        return {
            "backend": backend_kind,
            "nodes": args.nodes,
            "alerts": args.nodes * args.gpus,
            "incidents_open": len(incidents),
            "fleet_nodes": len(fleet[0].nodes) if fleet else 0,
            "webhooks_acked_s": round(acked, 3),
            "first_notification_s": round(recorder.first - t0, 3) if recorder.first else None,
            "enrichment_done_s": round(total, 3),
            "idle": idle,
            "log_search_requests": wire.calls,
            "log_searches_node_window": stats["logs"]["searched"],
            "log_cache_hits": stats["logs"]["cache_hits"],
            "log_joined_inflight": stats["logs"]["joined"],
            "enrichment_targets": stats["targets"],
            "enrichment_p50_s": round(stats.get("latency_p50", 0), 3),
            "enrichment_p95_s": round(stats.get("latency_p95", 0), 3),
            "enrichment_max_s": round(stats.get("latency_max", 0), 3),
            "kube_api_calls": kube.count(),
            "kube_cache_hits": stats["kube"]["cache_hits"],
            "annotation_writes": stats["writes"],
            "upgraded_from_kernel_log": upgraded,
            "notifications_delivered": recorder.count,
        }
    finally:
        await client.close()
        await kube.stop()
        if compat is not None:
            await compat.stop()
        if started_search is not None:
            await asyncio.to_thread(started_search.stop)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--backend", choices=["auto", "opensearch", "compat"], default="auto")
    parser.add_argument("--fast-disk", action="store_true", help="SQLite synchronous=NORMAL (default FULL)")
    parser.add_argument("--no-enrich", action="store_true", help="baseline: the same storm with enrichment off")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        width = max(map(len, result))
        for key, value in result.items():
            print(f"{key:<{width}}  {value}")
    if args.no_enrich:
        return 0
    per_node = result["log_searches_node_window"] / max(1, result["nodes"])
    return 0 if per_node <= 1.0 and result["idle"] else 1


if __name__ == "__main__":
    sys.exit(main())
