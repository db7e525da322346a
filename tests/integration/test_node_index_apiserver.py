"""The exporter pod -> node index against a REAL kube-apiserver (etcd, RBAC, static tokens), as alertd's own
account under the shipped RBAC (deploy/kubernetes/rbac.yaml, bound to the test's user): stock dcgm-exporter
labels (the GPU Operator's exporter pod in Hostname and pod, its pod IP in instance) become the node the pod
runs on, and an account without those rights gets nothing instead of a wrong node."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from alertd.engine.pipeline import Engine
from alertd.enrich.node_index import NodeIndex, NodeIndexSettings
from alertd.enrich.settings import KubeSettings
from alertd.core.model import Alert
from alertd.engine.normalize import NormalizeConfig
from testkit.kube_apiserver import KubeAPIServer, bind_shipped_enrichment_role
from testkit.builders import shipped_rules

pytestmark = pytest.mark.services
ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
NODES = {"gpu-node-1": "10.1.0.11", "gpu-node-2": "10.1.0.12"}
EXPORTERS = {"nvidia-dcgm-exporter-7xk2p": ("gpu-node-1", "10.244.1.17"),
             "nvidia-dcgm-exporter-q9d4m": ("gpu-node-2", "10.244.2.23")}


def ok(answer: tuple[int, Any], *also: int) -> Any:
    status, body = answer
    assert status in (200, 201, *also), body
    return body


@pytest.fixture(scope="module")
def cluster(kube_apiserver: KubeAPIServer) -> KubeAPIServer:
    k = kube_apiserver
    bind_shipped_enrichment_role(k)
    for name, ip in NODES.items():
        node = ok(k.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}))
        node["status"] = {"addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]}
        ok(k.request("PUT", f"/api/v1/nodes/{name}/status", node))
    ok(k.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "gpu-operator"}}))
    for pod, (node, ip) in EXPORTERS.items():
        created = ok(k.request("POST", "/api/v1/namespaces/gpu-operator/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "labels": {"app": "nvidia-dcgm-exporter"}},
            "spec": {"nodeName": node, "containers": [{"name": "nvidia-dcgm-exporter",
                                                         "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3"}]}}))
        created["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
        ok(k.request("PUT", f"/api/v1/namespaces/gpu-operator/pods/{pod}/status", created))  # as the kubelet would
    return k


def kubeconfig(path: Path, k: KubeAPIServer, user: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": k.url, "certificate-authority": str(k.ca_file)}}],
        "users": [{"name": user, "user": {"token": k.token(user)}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}]}))
    return path


def xid_alert(labels: dict[str, str], fingerprint: str) -> Alert:
    return Alert(fingerprint=fingerprint, status="firing", annotations={}, starts_at=T0, ends_at=None, received_at=T0,
                 labels={"alertname": "GPUXidError", "xid": "79", "cluster": "prod", "gpu": "3",
                         "UUID": f"GPU-{fingerprint}", "pci_bus_id": "00000000:3B:00.0",
                         "modelName": "NVIDIA H100 80GB HBM3", "job": "nvidia-dcgm-exporter",
                         "container": "nvidia-dcgm-exporter", **labels})


async def test_stock_exporter_labels_resolve_to_the_node_through_the_real_api_server(cluster, tmp_path) -> None:
    index = NodeIndex(KubeSettings(kubeconfig=str(kubeconfig(tmp_path / "kubeconfig", cluster, "alertd"))),
                      NodeIndexSettings(), NormalizeConfig())
    engine = Engine(shipped_rules(), nodes=index)
    by_pod = xid_alert({"Hostname": "nvidia-dcgm-exporter-q9d4m", "pod": "nvidia-dcgm-exporter-q9d4m",
                        "namespace": "gpu-operator", "instance": "10.244.2.23:9400"}, "a1")
    by_address = xid_alert({"instance": "10.1.0.11:9400"}, "a2")  # a host-network exporter: the node's own IP
    try:
        await index.prepare([by_pod, by_address])
        subject = engine.prepare(by_pod).subject
        assert (subject.node, subject.node_source) == ("gpu-node-2", "kubernetes pod gpu-operator/nvidia-dcgm-exporter-q9d4m")
        assert engine.prepare(by_address).subject.node == "gpu-node-1"
        engine.ingest([by_pod, by_address], T0)
        keys = sorted(inc.key for inc in engine.state.incidents.values())
        assert keys == ["node|cluster=prod|node=gpu-node-1", "node|cluster=prod|node=gpu-node-2"]
    finally:
        await index.close()


async def test_an_account_without_the_rights_finds_no_node_rather_than_a_wrong_one(cluster, tmp_path) -> None:
    index = NodeIndex(KubeSettings(kubeconfig=str(kubeconfig(tmp_path / "kubeconfig", cluster, "nobody"))),
                      NodeIndexSettings(), NormalizeConfig())
    engine = Engine(shipped_rules(), nodes=index)
    alert = xid_alert({"Hostname": "nvidia-dcgm-exporter-7xk2p", "pod": "nvidia-dcgm-exporter-7xk2p",
                       "namespace": "gpu-operator"}, "b1")
    assert cluster.request("GET", "/api/v1/namespaces/gpu-operator/pods", token=cluster.token("nobody"))[0] == 403
    try:
        await index.prepare([alert])
        subject = engine.prepare(alert).subject
        assert subject.node == "" and "nvidia-dcgm-exporter" not in subject.node  # never the exporter pod's name
    finally:
        await index.close()
