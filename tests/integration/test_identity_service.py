"""alertd serve (in-process, built as the CLI builds it) with enrich.kube pointing at the Kubernetes API
test server: a GPU alert with stock dcgm-exporter labels (no node label; Hostname and pod name the GPU
Operator's exporter pod, instance its pod IP) meets the node's cordon from kube-state-metrics in one
incident, because the service asks Kubernetes for the exporter pod's node before the engine step."""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from alertd.app.assemble import build_service
from alertd.config.settings import parse_config
from alertd.store.sqlite import SqliteStore
from testkit.served import served
from testkit.kube_server import KubeTestServer
from testkit.webhooks import FIRING_END, fingerprint, iso

ROOT = Path(__file__).resolve().parents[2]
T = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=2)


@pytest.fixture
async def kube(tmp_path: Path):
    server = KubeTestServer()
    await server.start()
    names = server.sample_cluster()
    yield server, names, server.write_kubeconfig(tmp_path / "kubeconfig")
    await server.stop()


def alert(labels: dict[str, str], summary: str) -> dict[str, Any]:
    return {"status": "firing", "labels": labels, "annotations": {"summary": summary}, "startsAt": iso(T),
            "endsAt": FIRING_END, "generatorURL": "http://prometheus-k8s-0:9090/graph?g0.expr=x", "fingerprint":
            fingerprint(labels)}


def hook(alerts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"receiver": "alertd", "status": "firing", "alerts": alerts, "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://alertmanager:9093", "version": "4",
            "groupKey": "{}:{alertname}", "truncatedAlerts": 0}


async def test_stock_dcgm_alert_meets_the_nodes_cordon(tmp_path: Path, kube) -> None:
    server, names, kubeconfig = kube
    pod = names["daemonset"]["pods"][1]  # runs on gpu-node-2, which the sample cluster has cordoned
    pod_ip = server.get("v1", "Pod", pod, "gpu-operator")["status"]["podIP"]
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]},
                        "enrich": {"kube": {"kubeconfig": str(kubeconfig), "timeout": "3s"}}}, "test")
    svc = build_service(cfg, SqliteStore(tmp_path / "alertd.sqlite3"))
    assert svc.nodes is not None
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    try:
        xid = alert({"alertname": "GPUXidError", "severity": "critical", "cluster": "prod-gpu-1", "xid": "79",
                     "Hostname": pod, "pod": pod, "namespace": "gpu-operator", "instance": f"{pod_ip}:9400",
                     "job": "nvidia-dcgm-exporter", "container": "nvidia-dcgm-exporter", "gpu": "3", "device": "nvidia3",
                     "UUID": "GPU-5f3e9c1a-0b7d-4c52-9e61-2a8f4d7b3c10", "pci_bus_id": "00000000:3B:00.0",
                     "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DRIVER_VERSION": "550.54.15",
                     "exported_pod": "trainer-0", "exported_namespace": "ml-training"}, "GPU has fallen off the bus")
        cordon = alert({"alertname": "KubeNodeCordoned", "severity": "info", "cluster": "prod-gpu-1",
                        "node": "gpu-node-2", "job": "kube-state-metrics", "namespace": "monitoring",
                        "pod": "kube-state-metrics-7d9c5b8f6-q2w8z", "instance": "10.244.1.5:8080"}, "Node cordoned")
        for body in (hook([xid]), hook([cordon])):
            resp = await client.post("/api/v1/alerts/alertmanager", json=body)
            assert resp.status == 200, await resp.text()
        rows = await until(client, lambda rows: len(rows) == 1 and {"xid", "node_cordoned"} <= set(rows[0]["signals"]))
        assert rows[0]["node"] == "gpu-node-2" and rows[0]["title"].endswith("on gpu-node-2 GPU 3"), rows
        detail = await (await client.get(f"/api/v1/incidents/{rows[0]['id']}")).json()
        sources = {m["alertname"]: m["subject"].get("node_source") for m in detail["members"]}
        assert sources == {"GPUXidError": f"kubernetes pod gpu-operator/{pod}", "KubeNodeCordoned": "label node"}
    finally:
        await client.close()


async def until(client: TestClient, done: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
    deadline, rows = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        rows = (await (await client.get("/api/v1/incidents")).json())["incidents"]
        if done(rows):
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"incidents not as expected in time: {rows}")
