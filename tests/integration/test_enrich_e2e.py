"""End to end in-process: webhook -> store -> engine -> outbox, and enrichment from a REAL
OpenSearch (Graylog-shaped kernel logs) and the Kubernetes API test server.

A "GPU metrics missing" (DCGMExporterDown) incident on gpu-node-2 is upgraded to
"Xid 79: GPU has fallen off the bus" from the node's kernel log, with the affected
jobs' owners named; a down, slow or garbage log backend never holds the notification
back, marks the incident and updates it when evidence arrives.
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from alertd.config.settings import parse_config
from alertd.enrich import Enricher
from alertd.rules.ruleset import load_rules
from alertd.app.service import Service
from alertd.store.sqlite import SqliteStore
from testkit.served import served
from testkit.es_compat_server import SearchCompatServer
from testkit.fakes import Recorder
from testkit.graylog_server import kernel_log_corpus, load_graylog_indices
from testkit.kube_server import KubeTestServer
from testkit.process import http_json
from testkit.webhooks import FIRING_END, fingerprint, iso, webhook

pytest_plugins = ("tests.support.fixtures",)

ROOT = Path(__file__).resolve().parents[2]
HOOK = "/api/v1/alerts/alertmanager"
PREFIX = "e2e_graylog_"
T = datetime.now(timezone.utc).replace(second=30, microsecond=0) - timedelta(minutes=20)
DOCS, WANT = kernel_log_corpus(T)


@pytest.fixture(scope="module")
def e2e_logs(opensearch):
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, load_graylog_indices(opensearch.url, DOCS, prefix=PREFIX)).result()
    # A search server that has just started answers its first searches slowly (class loading, JIT, caches);
    # on a busy machine slower than the enricher's 5 s log timeout, after which it retries only 30 s later.
    # One search of the same indices here, outside the tests' timed waits, so they time alertd.
    status, body = http_json("POST", f"{opensearch.url}/{PREFIX}*/_search",
                             {"query": {"match_all": {}}, "size": 1}, timeout=120)
    assert status == 200, body
    return opensearch.url


@pytest.fixture
async def kube(tmp_path):
    server = KubeTestServer()
    await server.start()
    names = server.sample_cluster()
    yield server, names, server.write_kubeconfig(tmp_path / "kubeconfig")
    await server.stop()


def exporter_down(node: str, exporter_pod: str, starts: datetime) -> dict[str, Any]:
    """DCGMExporterDown as Prometheus sends it: the scrape target's labels, no GPU labels."""
    labels = {"alertname": "DCGMExporterDown", "severity": "warning", "cluster": "prod-gpu-1", "node": node,
              "instance": "10.0.3.17:9400", "job": "dcgm-exporter", "namespace": "gpu-operator",
              "pod": exporter_pod, "service": "nvidia-dcgm-exporter", "container": "nvidia-dcgm-exporter"}
    return {"status": "firing", "labels": labels,
            "annotations": {"summary": f"dcgm-exporter on node {node} is down"},
            "startsAt": iso(starts), "endsAt": FIRING_END,
            "generatorURL": "http://prometheus.example:9090/graph?g0.expr=up", "fingerprint": fingerprint(labels)}


class Stack:
    """Service + HTTP app + enricher, started in-process."""

    def __init__(self, tmp_path: Path, enrich: dict[str, Any]):
        # No fleet sample: the tests count the enricher's own Kubernetes requests against the server's.
        self.cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "enrich": enrich,
                                 "report": {"sample_fleet": False}}, "test")
        self.enricher = Enricher.from_settings(self.cfg.enrich)
        self.recorder = Recorder()
        self.svc = Service(self.cfg, SqliteStore(tmp_path / "alertd.sqlite3"), load_rules(self.cfg.rule_paths),
                           notifiers={"console": self.recorder}, enricher=self.enricher)
        self.client = TestClient(TestServer(served(self.svc), host="127.0.0.1"))

    async def __aenter__(self) -> "Stack":
        await self.client.start_server()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.close()

    async def post(self, doc: dict) -> float:
        t0 = time.monotonic()
        resp = await self.client.post(HOOK, json=doc)
        assert resp.status == 200, await resp.text()
        return t0

    async def incident(self, timeout: float = 10.0, predicate=lambda inc: True) -> dict:
        deadline, last = time.monotonic() + timeout, "no incident"
        while time.monotonic() < deadline:
            resp = await self.client.get("/api/v1/incidents")
            rows = (await resp.json())["incidents"]
            if rows:
                resp = await self.client.get(f"/api/v1/incidents/{rows[0]['id']}")
                inc = await resp.json()
                if predicate(inc):
                    return inc
                last = f"annotations {inc.get('annotations')}"  # logs_unavailable, kube_unavailable: why not
            await asyncio.sleep(0.05)
        raise AssertionError(f"incident not in the expected state in {timeout} s; last seen: {last}")

    def opened_at(self) -> float | None:
        return next((t for t, p in self.recorder.items if p["kinds"] and p["kinds"][0] == "opened"), None)


def enrich_config(logs_url: str, kubeconfig: Path | None, **logs: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "deadline": "3s",
        "write_delay": "20ms",
        "logs": {"backend": "opensearch", "urls": [logs_url], "index": f"{PREFIX}*", "timeout": "5s", **logs},
    }
    if kubeconfig is not None:
        doc["kube"] = {"kubeconfig": str(kubeconfig), "timeout": "3s"}
    return doc


async def test_metrics_missing_upgraded_to_xid79_with_owner_named(tmp_path, e2e_logs, kube) -> None:
    server, names, kubeconfig = kube
    exporter_pod = names["daemonset"]["pods"][1]  # the exporter pod on gpu-node-2
    async with Stack(tmp_path, enrich_config(e2e_logs, kubeconfig)) as st:
        doc = webhook([exporter_down("gpu-node-2", exporter_pod, T)], cluster="prod-gpu-1", node="gpu-node-2")
        await st.post(doc)
        inc = await st.incident(predicate=lambda i: xid79_with_evidence(i) and "owners" in i["annotations"])
        assert inc["primary"]["title"] == "Xid 79: GPU has fallen off the bus"
        assert inc["title"] == "Xid 79: GPU has fallen off the bus on gpu-node-2"
        assert inc["primary"]["detail"] == "from kernel log" and inc["severity"] == "critical"
        assert "metrics_missing" in inc["signals"] and 79 in inc["xids"]
        ann = inc["annotations"]
        # the kernel lines of that node and window, nothing else
        assert [e["line"] for e in ann["log_evidence"]] == WANT["gpu-node-2"]
        xid = next(e for e in ann["log_evidence"] if e["xid"] == 79)
        assert xid["pci"] == "0000:3b:00" and xid["host"] == "gpu-node-2"
        assert xid["gpu_uuid"].startswith("GPU-8f6e1b4c")  # from the "NVRM: GPU at" line
        assert xid["time"] == iso(T - timedelta(seconds=120))
        mig = next(e for e in ann["log_evidence"] if e["xid"] == 43)
        assert mig["pid"] == 1234 and mig["process"] == "python" and mig["mig"] == {"gpu_instance": 2, "compute_instance": 1}
        # the affected jobs and whose they are
        owners = {(o["kind"], o["name"]): o for o in ann["owners"]}
        ptj = owners[("PyTorchJob", names["pytorchjob"]["name"])]
        assert ptj["team"] == "ml-platform" and ptj["namespace"] == "ml-training"
        assert ptj["channel"] == "#ml-platform-alerts"
        assert ("JobSet", names["jobset"]["name"]) in owners
        assert {p["name"] for p in ann["pods"]} == {
            next(p for p in names["pytorchjob"]["pods"] if "worker" in p), names["jobset"]["pods"][1]}
        assert ann["kube_node"]["cordoned"] is True and ann["kube_node"]["cordoned_by"] == "kubectl-cordon"
        assert ann["node_events"][0]["reason"] == "NodeNotSchedulable"
        assert "logs_unavailable" not in ann and "kube_unavailable" not in ann
        kinds = [e["kind"] for e in inc["timeline"]]
        assert kinds[0] == "opened" and "classification_upgraded" in kinds
        upgraded = next(e for e in inc["timeline"] if e["kind"] == "classification_upgraded")
        assert upgraded["text"] == "Xid 79: GPU has fallen off the bus (from kernel log)"
        # the notification went out first; the enrichment arrived as updates
        await st.svc.outbox.drain()
        kinds_sent = [p["kinds"] for _, p in st.recorder.items]
        assert kinds_sent[0][0] == "opened" and any("classification_upgraded" in k for k in kinds_sent)
        # enrichment ran once, not on each of its own annotation changes
        assert st.enricher.searcher.stats.queries == 1
        # the metric counts the enricher's requests; the server also saw the node index's (its own client)
        calls = st.enricher.kube.stats.calls
        assert 0 < calls <= server.count()
        metrics = await (await st.client.get("/metrics")).text()
        assert "alertd_enrichment_log_requests_total 1.0" in metrics
        assert f"alertd_enrichment_kube_requests_total {float(calls)}" in metrics
        assert "alertd_enrichment_seconds_count 1.0" in metrics


async def test_a_gpu_lost_without_an_xid_line_upgrades_to_xid79(tmp_path, e2e_logs) -> None:
    """Newer drivers report a GPU gone from the bus without an Xid line, in three kernel lines the log pipeline
    stored as three messages: read back from the real OpenSearch, they upgrade the exporter-down incident."""
    async with Stack(tmp_path, enrich_config(e2e_logs, None)) as st:
        await st.post(webhook([exporter_down("gpu-node-5", "dcgm-exporter-q8d2n", T)], cluster="prod-gpu-1",
                              node="gpu-node-5"))
        inc = await st.incident(predicate=xid79_with_evidence)
        assert inc["title"] == "Xid 79: GPU has fallen off the bus on gpu-node-5"
        assert inc["primary"]["detail"] == "from kernel log" and "metrics_missing" in inc["signals"]
        evidence = inc["annotations"]["log_evidence"]
        assert [e["line"] for e in evidence] == WANT["gpu-node-5"]
        assert [(e["xid"], e["pci"]) for e in evidence if e["xid"]] == [(79, "0000:b3:00")]
        assert evidence[2]["line"].startswith("NVRM: fallen off the bus")


async def test_two_gpus_lost_at_once_with_interleaved_reports_are_both_in_the_evidence(tmp_path, e2e_logs) -> None:
    """Two GPUs behind one PCIe switch fall off the bus together; the real OpenSearch returns their split
    reports interleaved line by line, and each "fallen off" line is read with the GPU its report names."""
    async with Stack(tmp_path, enrich_config(e2e_logs, None)) as st:
        await st.post(webhook([exporter_down("gpu-node-6", "dcgm-exporter-w4k9t", T)], cluster="prod-gpu-1",
                              node="gpu-node-6"))
        inc = await st.incident(predicate=xid79_with_evidence)
        assert inc["title"] == "Xid 79: GPU has fallen off the bus on gpu-node-6"
        evidence = inc["annotations"]["log_evidence"]
        assert [e["line"] for e in evidence] == WANT["gpu-node-6"]
        assert [(e["xid"], e["pci"]) for e in evidence if e["xid"]] == [(79, "0000:18:00"), (79, "0000:2a:00")]


async def test_dcgm_pod_labels_name_the_pod(tmp_path, e2e_logs, kube) -> None:
    server, names, kubeconfig = kube
    worker = next(p for p in names["pytorchjob"]["pods"] if "worker" in p)
    labels = {"alertname": "GPUXidError", "severity": "critical", "cluster": "prod-gpu-1", "node": "gpu-node-2",
              "gpu": "2", "UUID": "GPU-aaaaaaaa-1111-2222-3333-444444444444", "pci_bus_id": "00000000:3B:00.0",
              "xid": "48", "exported_namespace": "ml-training", "exported_pod": worker, "modelName": "NVIDIA H100"}
    alert = {"status": "firing", "labels": labels, "annotations": {}, "startsAt": iso(T), "endsAt": FIRING_END,
             "generatorURL": "", "fingerprint": fingerprint(labels)}
    async with Stack(tmp_path, enrich_config(e2e_logs, kubeconfig)) as st:
        await st.post(webhook([alert], cluster="prod-gpu-1", node="gpu-node-2"))
        inc = await st.incident(predicate=lambda i: "pods" in i["annotations"] and "log_evidence" in i["annotations"])
        (pod,) = inc["annotations"]["pods"]
        assert pod["name"] == worker and pod["gpu_devices"][0]["uuid"] == "GPU-aaaaaaaa-1111-2222-3333-444444444444"
        assert inc["annotations"]["owners"][0]["kind"] == "PyTorchJob"
        # the log's Xid 79 on the same GPU (0000:3b:00) outranks the alert's Xid 48
        await st.incident(predicate=lambda i: (i.get("primary") or {}).get("xid") == 79)


def xid79_with_evidence(inc: dict[str, Any]) -> bool:
    """Read as Xid 79 from the kernel log, with the log lines behind it (both are written in one engine step;
    the lines are what the tests go on to check)."""
    return (inc.get("primary") or {}).get("xid") == 79 and "log_evidence" in inc["annotations"]


async def down_backend(kubeconfig: Path, retry: str) -> tuple[str, dict[str, Any]]:
    """A log backend URL where nothing listens any more, and the enrich config that points at it."""
    compat = SearchCompatServer("opensearch")
    await compat.start()
    url = compat.url
    await compat.stop()
    cfg = enrich_config(url, kubeconfig)
    cfg["retry"] = [retry]
    return url, cfg


async def test_backend_down_marks_then_recovers(tmp_path, kube) -> None:
    server, names, kubeconfig = kube
    url, cfg = await down_backend(kubeconfig, "1s")
    async with Stack(tmp_path, cfg) as st:
        t0 = await st.post(webhook([exporter_down("gpu-node-2", "x", T)], cluster="prod-gpu-1", node="gpu-node-2"))
        inc = await st.incident(predicate=lambda i: "logs_unavailable" in i["annotations"])
        assert "onnect" in inc["annotations"]["logs_unavailable"]
        assert inc["primary"]["kind"] == "metrics_missing"
        assert "owners" in (await st.incident(predicate=lambda i: "owners" in i["annotations"]))["annotations"]
        await st.svc.outbox.drain()
        assert st.opened_at() is not None and st.opened_at() - t0 < 1.0
        # the backend comes back on the same port: the retry finds the evidence
        compat = SearchCompatServer("opensearch")
        for index, doc in DOCS:
            compat.add(PREFIX + index.removeprefix("graylog_"), doc)
        from aiohttp import web

        port = int(url.rsplit(":", 1)[1])
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", compat._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            inc = await st.incident(
                predicate=lambda i: xid79_with_evidence(i) and "logs_unavailable" not in i["annotations"])
            assert [e["line"] for e in inc["annotations"]["log_evidence"]] == WANT["gpu-node-2"]
        finally:
            await runner.cleanup()


async def test_a_restart_resumes_enrichment_against_the_real_backend(tmp_path, e2e_logs, kube) -> None:
    """The log backend was down and the retry waited in the stopped engine's memory (60 s away): the next engine on
    the same store asks the real OpenSearch again at its start and finds the node's kernel lines."""
    _, names, kubeconfig = kube
    _, down = await down_backend(kubeconfig, "60s")
    exporter_pod = names["daemonset"]["pods"][1]
    async with Stack(tmp_path, down) as st:
        await st.post(webhook([exporter_down("gpu-node-2", exporter_pod, T)], cluster="prod-gpu-1", node="gpu-node-2"))
        inc = await st.incident(predicate=lambda i: "logs_unavailable" in i["annotations"] and "owners" in i["annotations"])
        assert inc["primary"]["kind"] == "metrics_missing"
    async with Stack(tmp_path, enrich_config(e2e_logs, kubeconfig)) as again:
        inc = await again.incident(
            timeout=20, predicate=lambda i: xid79_with_evidence(i) and "logs_unavailable" not in i["annotations"])
        assert [e["line"] for e in inc["annotations"]["log_evidence"]] == WANT["gpu-node-2"]
        assert inc["annotations"]["owners"] and again.enricher.searcher.stats.queries == 1


@pytest.mark.parametrize("mode", ["slow", "garbage"])
async def test_slow_or_garbage_backend_never_holds_the_notification(tmp_path, mode) -> None:
    compat = SearchCompatServer("opensearch", delay=4.0 if mode == "slow" else 0.0,
                                mode="garbage" if mode == "garbage" else "ok")
    for index, doc in DOCS:
        compat.add(PREFIX + index.removeprefix("graylog_"), doc)
    async with compat:
        cfg = enrich_config(compat.url, None, timeout="10s")
        cfg["deadline"] = "1s"
        async with Stack(tmp_path, cfg) as st:
            t0 = await st.post(webhook([exporter_down("gpu-node-2", "x", T)], cluster="prod-gpu-1", node="gpu-node-2"))
            inc = await st.incident(predicate=lambda i: "logs_unavailable" in i["annotations"])
            marked = time.monotonic()
            await st.svc.outbox.drain()
            assert st.opened_at() - t0 < 0.5, "routed and delivered without waiting for the search"
            if mode == "garbage":
                assert "opensearch:" in inc["annotations"]["logs_unavailable"]
                assert inc["primary"]["kind"] == "metrics_missing"
                return
            assert inc["annotations"]["logs_unavailable"] == "no answer within 1s (still searching)"
            assert 0.9 <= marked - t0 < 3.5
            inc = await st.incident(timeout=15, predicate=lambda i: (i.get("primary") or {}).get("xid") == 79)
            assert "logs_unavailable" not in inc["annotations"]
            assert time.monotonic() - t0 >= 4.0
            await st.svc.outbox.drain()
            texts = [e.get("text", "") for _, p in st.recorder.items for e in p["events"]]
            assert "kernel log unavailable: no answer within 1s (still searching)" in texts
