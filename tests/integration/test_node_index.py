"""The exporter pod -> node index through the real kubernetes_asyncio client, against the Kubernetes API
test server (real object shapes, field selectors, Status errors): what stock dcgm-exporter labels point
at (the GPU Operator's exporter pod in Hostname and pod, its pod IP in instance) becomes the node."""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from alertd.engine.pipeline import Engine
from alertd.enrich.node_index import NodeIndex, NodeIndexSettings
from alertd.enrich.settings import KubeSettings
from alertd.core.model import Alert
from alertd.engine.normalize import NormalizeConfig
from testkit.kube_server import KubeTestServer
from testkit.builders import shipped_rules

T0 = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)


@pytest.fixture
async def cluster(tmp_path: Path):
    server = KubeTestServer()
    await server.start()
    names = server.sample_cluster()
    yield server, names, server.write_kubeconfig(tmp_path / "kubeconfig")
    await server.stop()


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def index_for(kubeconfig: Path, clock: Clock, **kw: float) -> NodeIndex:
    return NodeIndex(KubeSettings(kubeconfig=str(kubeconfig)), NodeIndexSettings(**kw), NormalizeConfig(),
                     monotonic=clock)


def xid_alert(labels: dict[str, str], fingerprint: str = "f1") -> Alert:
    return Alert(fingerprint=fingerprint, status="firing", annotations={}, starts_at=T0, ends_at=None, received_at=T0,
                 labels={"alertname": "GPUXidError", "xid": "79", "cluster": "prod", "gpu": "3",
                         "UUID": "GPU-5f3e9c1a-0b7d-4c52-9e61-2a8f4d7b3c10", "pci_bus_id": "00000000:3B:00.0",
                         "modelName": "NVIDIA H100 80GB HBM3", "DCGM_FI_DRIVER_VERSION": "550.54.15",
                         "job": "nvidia-dcgm-exporter", "container": "nvidia-dcgm-exporter", **labels})


def exporter_labels(server: KubeTestServer, pod: str) -> dict[str, str]:
    obj = server.get("v1", "Pod", pod, "gpu-operator")
    assert obj is not None
    return {"Hostname": pod, "pod": pod, "namespace": "gpu-operator", "instance": f"{obj['status']['podIP']}:9400"}


async def test_exporter_pod_resolves_to_its_node_and_is_cached(cluster) -> None:
    server, names, kubeconfig = cluster
    clock = Clock()
    index = index_for(kubeconfig, clock)
    pod = names["daemonset"]["pods"][1]  # on gpu-node-2
    alert = xid_alert(exporter_labels(server, pod))
    engine = Engine(shipped_rules(), nodes=index)
    try:
        await index.prepare([alert])
        subject = engine.prepare(alert).subject
        assert (subject.node, subject.node_source) == ("gpu-node-2", f"kubernetes pod gpu-operator/{pod}")
        asked = server.count()
        await index.prepare([alert])  # known: no request
        assert server.count() == asked
        engine.ingest([alert], T0)
        (inc,) = engine.state.incidents.values()
        assert inc.key == "node|cluster=prod|node=gpu-node-2" and "gpu-node-2" in inc.title
    finally:
        await index.close()
    assert server.requests_to(f"/api/v1/namespaces/gpu-operator/pods/{pod}")


async def test_instance_pod_ip_resolves_when_the_hostname_is_unknown(cluster) -> None:
    """Hostname only (no pod/namespace labels): a lookup by name in every namespace and one by pod IP."""
    server, names, kubeconfig = cluster
    pod = names["daemonset"]["pods"][0]
    labels = exporter_labels(server, pod)
    alert = xid_alert({"Hostname": "nvidia-dcgm-exporter-zzzzz", "instance": labels["instance"]})
    index = index_for(kubeconfig, Clock())
    try:
        await index.prepare([alert])
        subject = Engine(shipped_rules(), nodes=index).prepare(alert).subject
    finally:
        await index.close()
    assert subject.node == "gpu-node-1" and subject.node_source.startswith("instance ")
    assert any(r.path == "/api/v1/nodes" for r in server.requests)  # node addresses listed first


async def test_an_unreachable_api_leaves_the_node_unknown_and_is_not_asked_again_at_once(cluster) -> None:
    server, names, kubeconfig = cluster
    pod = names["daemonset"]["pods"][2]
    alert = xid_alert({"Hostname": pod, "pod": pod, "namespace": "gpu-operator"})
    clock = Clock()
    index = index_for(kubeconfig, clock, failure_ttl=30.0)
    try:
        server.fail_next(503, count=1)
        await index.prepare([alert])
        subject = Engine(shipped_rules(), nodes=index).prepare(alert).subject
        assert subject.node == "" and subject.origin == f"exporter pod gpu-operator/{pod}"
        asked = server.count()
        await index.prepare([alert])
        assert server.count() == asked  # within failure_ttl: not asked again
        clock.t += 31
        await index.prepare([alert])
        assert index.node_of_pod("prod", "gpu-operator", pod) == "gpu-node-3"
    finally:
        await index.close()


async def test_a_slow_api_holds_a_step_no_longer_than_wait(cluster) -> None:
    server, names, kubeconfig = cluster
    pod = names["daemonset"]["pods"][0]
    alert = xid_alert({"Hostname": pod, "pod": pod, "namespace": "gpu-operator"})
    server.delay = 1.0
    index = index_for(kubeconfig, Clock(), wait=0.1)
    try:
        started = time.monotonic()
        await index.prepare([alert])
        assert time.monotonic() - started < 0.9
        assert index.node_of_pod("prod", "gpu-operator", pod) == ""
    finally:
        await index.close()


async def test_a_workload_pods_ip_is_no_node_and_a_name_the_node_list_lacks_is_refused(cluster) -> None:
    """Only a per-node agent's pod IP names its node: a training pod's IP (its pod owned by a PyTorchJob)
    in instance is refused, and so is a Hostname no node has, once the node list is known."""
    server, names, kubeconfig = cluster
    trainer = server.get("v1", "Pod", "llama-finetune-master-0", "ml-training")
    assert trainer is not None and trainer["spec"]["nodeName"] == "gpu-node-1"
    ip = trainer["status"]["podIP"]
    by_ip = xid_alert({"instance": f"{ip}:8000", "job": "trainer-metrics"}, "f2")
    by_name = xid_alert({"Hostname": "render-box-9"}, "f3")
    index = index_for(kubeconfig, Clock())
    try:
        await index.prepare([by_ip, by_name])
        engine = Engine(shipped_rules(), nodes=index)
        ip_subject, name_subject = engine.prepare(by_ip).subject, engine.prepare(by_name).subject
    finally:
        await index.close()
    assert any(r.query.get("fieldSelector") == f"status.podIP={ip}" for r in server.requests)  # it was asked
    assert ip_subject.node == "" and f"instance={ip}:8000: no node of cluster prod" in ip_subject.node_refused
    assert ip_subject.origin == f"target {ip}:8000"
    assert name_subject.node == "" and "Hostname=render-box-9: no node of cluster prod" in name_subject.node_refused
    assert index.is_node("prod", "gpu-node-2") and index.is_node("prod", "render-box-9") is False


async def test_the_topology_snapshot_is_listed_from_the_cache_and_refreshed_every_refresh(cluster) -> None:
    server, _, kubeconfig = cluster
    rack = "topology.kubernetes.io/rack"
    server.add_node("gpu-node-9", labels={rack: "r1"}, zone="us-east-1c")
    clock = Clock()
    index = index_for(kubeconfig, clock, refresh=300.0)
    Engine(shipped_rules(), nodes=index, topology=index)  # tells the index the labels the domains name
    alert = xid_alert({"node": "gpu-node-9"})
    try:
        await index.prepare([alert])
        assert index.node_labels("prod", "gpu-node-9") == {rack: "r1", "topology.kubernetes.io/zone": "us-east-1c"}
        lists = server.requests_to("/api/v1/nodes")
        assert lists and lists[0].query.get("resourceVersion") == "0"  # the API server's watch cache
        server.add_node("gpu-node-9", labels={rack: "r2"}, zone="us-east-1c")  # moved
        clock.t += 299
        await index.prepare([alert])
        assert len(server.requests_to("/api/v1/nodes")) == len(lists)  # not due yet
        clock.t += 2
        await index.prepare([alert])  # due: listed again in the background, the step not held
        deadline = time.monotonic() + 5
        while index.node_labels("prod", "gpu-node-9").get(rack) != "r2":
            assert time.monotonic() < deadline, "the relabelled node not seen after refresh"
            await asyncio.sleep(0.02)
        assert index.nodes_with("prod", rack, "r2") == 1 and index.nodes_with("prod", rack, "r1") == 0
    finally:
        await index.close()
