"""Kubernetes context through the real kubernetes_asyncio client, against the Kubernetes API
test server (real API shapes, field selectors, Status errors) via a kubeconfig file."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from alertd.enrich.kube import KubeContext
from alertd.enrich.kube_api import KubeUnavailable
from alertd.enrich.settings import KubeSettings
from testkit.kube_server import KubeTestServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def cluster(tmp_path):
    server = KubeTestServer()
    await server.start()
    names = server.sample_cluster()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    yield server, names, kubeconfig
    await server.stop()


def context(kubeconfig: Path, **kw) -> KubeContext:
    return KubeContext(KubeSettings(kubeconfig=str(kubeconfig), **kw))


async def test_cordoned_node_with_pytorchjob_and_jobset(cluster) -> None:
    server, names, kubeconfig = cluster
    ctx = context(kubeconfig)
    try:
        c = await ctx.node_context("gpu-node-2")
    finally:
        await ctx.close()
    node = c.node.to_json()  # the kube_node annotation as stored
    assert node["name"] == "gpu-node-2" and node["cordoned"] is True and node["ready"] == "True"
    assert node["cordoned_by"] == "kubectl-cordon" and node["cordoned_at"]
    assert node["instance_type"] == "p5.48xlarge" and node["gpu_product"] == "NVIDIA-H100-80GB-HBM3"
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}.items() <= node["taints"][0].items()
    pods = {p.name: p.to_json() for p in c.pods}
    ptj = names["pytorchjob"]
    js = names["jobset"]
    worker = next(p for p in ptj["pods"] if "worker" in p)
    trainer = js["pods"][1]
    assert set(pods) == {worker, trainer}  # the dcgm-exporter pod holds no GPU: left out
    assert pods[worker]["owner_chain"] == [{"kind": "PyTorchJob", "name": ptj["name"], "apiVersion": "kubeflow.org/v1"}]
    assert [o["kind"] for o in pods[trainer]["owner_chain"]] == ["Job", "JobSet"]
    assert pods[trainer]["owner_chain"][1]["name"] == js["name"]
    for p in pods.values():
        assert p["gpus"] == 4 and p["phase"] == "Running" and p["namespace"] == "ml-training"
        assert p["team"] == "ml-platform" and p["channel"] == "#ml-platform-alerts"
    assert [(e.reason, e.source) for e in c.events] == [("NodeNotSchedulable", "kubelet")]


async def test_not_ready_mig_node_with_raycluster(cluster) -> None:
    server, names, kubeconfig = cluster
    ctx = context(kubeconfig)
    try:
        c = await ctx.node_context("gpu-node-3")
    finally:
        await ctx.close()
    node = c.node.to_json()
    assert node["ready"] == "Unknown" and not node["cordoned"]
    assert node["mig"] == {"nvidia.com/mig-1g.10gb": "56"}
    assert [t.key for t in c.node.taints] == ["node.kubernetes.io/unreachable"] * 2
    (found,) = c.pods  # the Ray head pod holds no GPU
    pod = found.to_json()
    assert pod["gpu_resources"] == {"nvidia.com/mig-1g.10gb": 1} and pod["gpus"] == 1
    assert pod["owner_chain"][0]["kind"] == "RayCluster" and pod["team"] == "research"
    assert c.events[0].reason == "NodeNotReady"


async def test_cached_per_node_and_owners_shared(cluster) -> None:
    server, _, kubeconfig = cluster
    ctx = context(kubeconfig)
    try:
        await ctx.node_context("gpu-node-1")
        first = server.count()
        await ctx.node_context("gpu-node-1")
        assert server.count() == first, "node context cached"
        await ctx.node_context("gpu-node-2")
        ptj_reads = [r for r in server.requests if r.path.endswith("/pytorchjobs/llama-finetune")]
        ns_reads = [r for r in server.requests if r.path == "/api/v1/namespaces/ml-training"]
        assert len(ptj_reads) == 1 and len(ns_reads) == 1, "owners and namespaces cached across nodes"
        assert ctx.stats.calls == server.count()
    finally:
        await ctx.close()


async def test_requests_stay_within_the_shipped_rbac(cluster) -> None:
    """Every request alertd makes is allowed by deploy/kubernetes/rbac.yaml (read-only verbs)."""
    server, _, kubeconfig = cluster
    ctx = context(kubeconfig)
    try:
        for node in ("gpu-node-1", "gpu-node-2", "gpu-node-3"):
            await ctx.node_context(node)
    finally:
        await ctx.close()
    docs = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/rbac.yaml").read_text()))
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    allowed = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert server.requests
    for req in server.requests:
        assert req.method == "GET"
        parts = [p for p in req.path.split("/") if p]
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        if rest[0] == "namespaces" and len(rest) > 2:
            rest = rest[2:]
        resource, named = rest[0], len(rest) > 1
        verb = "get" if named else "list"
        assert (group, resource, verb) in allowed, req


async def test_api_errors_and_missing_objects(cluster) -> None:
    server, _, kubeconfig = cluster
    ctx = context(kubeconfig)
    try:
        server.fail_next(403, path="/api/v1/nodes/")
        with pytest.raises(KubeUnavailable, match="HTTP 403"):
            await ctx.node_context("gpu-node-1")
        # not cached: the next call succeeds
        assert (await ctx.node_context("gpu-node-1")).node.name == "gpu-node-1"
        c = await ctx.node_context("gpu-node-99")
        assert c.node.to_json() == {"name": "gpu-node-99", "missing": True} and c.pods == []
        # a pod whose owner is gone keeps the link it knows
        server.add_pod("ml-training", "orphan-0", "gpu-node-99", gpus=2, owner=("batch/v1", "Job", "gone"))
        ctx2 = context(kubeconfig)
        try:
            (found,) = (await ctx2.node_context("gpu-node-99")).pods
            pod = found.to_json()
            assert pod["owner_chain"] == [{"kind": "Job", "name": "gone", "apiVersion": "batch/v1", "missing": True}]
            assert pod["team"] == "ml-platform"  # still known from the namespace
        finally:
            await ctx2.close()
    finally:
        await ctx.close()


async def test_slow_api_times_out(cluster) -> None:
    server, _, kubeconfig = cluster
    server.delay = 1.0
    ctx = context(kubeconfig, timeout=0.2)
    try:
        with pytest.raises(KubeUnavailable, match="no answer within 0.2s|Timeout"):
            await ctx.node_context("gpu-node-1")
    finally:
        await ctx.close()


async def test_bad_kubeconfig_is_unavailable(tmp_path) -> None:
    ctx = context(tmp_path / "missing-kubeconfig")
    try:
        with pytest.raises(KubeUnavailable, match="no Kubernetes credentials"):
            await ctx.node_context("gpu-node-1")
    finally:
        await ctx.close()


async def test_a_nodes_pods_and_events_are_read_from_the_api_servers_cache(cluster) -> None:
    """resourceVersion=0, as the kubelet lists its pods: the API server answers from its watch cache, where pods
    are indexed by node. A consistent read costs the server every pod of the cluster per node enriched."""
    server, names, kubeconfig = cluster
    ctx = context(kubeconfig)
    try:
        await ctx.node_context("gpu-node-2")
    finally:
        await ctx.close()
    lists = {r.path: r.query for r in server.requests if r.path in ("/api/v1/pods", "/api/v1/events")}
    assert {path: query.get("resourceVersion") for path, query in lists.items()} == \
        {"/api/v1/pods": "0", "/api/v1/events": "0"}
