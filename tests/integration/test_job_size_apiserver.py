"""A stalled job's size against a REAL kube-apiserver: the hang's alerts name two of its nodes and no GPU;
enrichment reads the job's pods through its owner labels (alertd's own account under the shipped RBAC,
deploy/kubernetes/rbac.yaml) and the job incident then lists all eight nodes and is titled with its 64 GPUs."""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from alertd.core.model import Alert
from alertd.engine.jobs import SIZE, is_job
from alertd.enrich.kube import KubeContext
from alertd.enrich.settings import KubeSettings
from testkit.enrich_harness import Harness
from tests.support.fixtures import require
from testkit.kube_apiserver import KubeAPIServer, bind_shipped_enrichment_role
from testkit.kubeflow_crd import pytorchjob_crd
from testkit.notify_harness import wait_for

pytestmark = pytest.mark.services
NS = "pretrain"
NODES = [f"gpu-p-{i}" for i in range(1, 9)]
JOB = {"namespace": NS, "owner_kind": "PyTorchJob", "owner_name": "llama-70b"}


def pod(name: str, node: str, owner: dict[str, Any], gpus: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "ownerReferences": [owner]},
            "spec": {"nodeName": node, "containers": [{"name": "pytorch", "image": "ghcr.io/example/llama:1",
                                                       "resources": {"limits": limits}}]}}


@pytest.fixture(scope="module")
def cluster(kube_apiserver: KubeAPIServer) -> KubeAPIServer:
    k = kube_apiserver
    k.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", require(pytorchjob_crd))  # or 409
    bind_shipped_enrichment_role(k)
    k.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for node in NODES:
        k.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    deadline = time.monotonic() + 30
    while k.request("GET", f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs")[0] != 200:
        assert time.monotonic() < deadline, "the PyTorchJob CRD never became established"
        time.sleep(0.2)
    job = k.create(f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "llama-70b"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 8, "template": {"spec": {"containers": [
            {"name": "pytorch", "image": "ghcr.io/example/llama:1"}]}}}}}})
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "llama-70b",
             "uid": job["metadata"]["uid"], "controller": True}
    for i, node in enumerate(NODES):
        created = k.create(f"/api/v1/namespaces/{NS}/pods", pod(f"llama-70b-worker-{i}", node, owner, 8))
        created["status"] = {"phase": "Running"}
        status, body = k.request("PUT", f"/api/v1/namespaces/{NS}/pods/{created['metadata']['name']}/status", created)
        assert status == 200, body
    k.create(f"/api/v1/namespaces/{NS}/pods", pod("llama-70b-tensorboard", NODES[0], owner, 0))
    return k


def kube(k: KubeAPIServer, tmp_path: Path) -> KubeContext:
    path = k.kubeconfig(tmp_path / "kubeconfig", "alertd")
    return KubeContext(KubeSettings.from_doc({"kubeconfig": str(path), "timeout": "5s"}))


def stalled(node: str, since: datetime) -> Alert:
    labels = {"alertname": "GPUJobStalled", "cluster": "prod", "node": node, "signal": "job_stalled",
              "severity": "critical", **JOB}
    return Alert(fingerprint=f"{NODES.index(node) + 0xa0:x}", status="firing", labels=labels, starts_at=since + timedelta(minutes=3),
                 ends_at=None, received_at=since + timedelta(minutes=3),
                 annotations={"stalled_since": f"{since.timestamp():.0f}"})


async def test_a_hang_naming_two_nodes_is_titled_with_the_jobs_64_gpus_read_from_the_api(cluster, tmp_path):
    since = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=5)
    async with Harness(tmp_path, kube=kube(cluster, tmp_path)) as h:
        await h.send(stalled(NODES[2], since), stalled(NODES[5], since))
        job = next(i for i in h.svc.engine.state.incidents.values() if is_job(i))
        assert job.title.startswith(f"Job {NS}/llama-70b (2 nodes) stalled since {since:%H:%M}")
        await wait_for(lambda: SIZE in job.annotations, timeout=20)
        assert job.annotations[SIZE] == {"gpus": 64, "pods": 8, "nodes": NODES}  # the tensorboard pod holds none
        assert job.nodes == [NODES[2], NODES[5], *[n for n in NODES if n not in (NODES[2], NODES[5])]]
        assert job.title.startswith(f"Job {NS}/llama-70b (64 GPUs) stalled since {since:%H:%M}; no suspect: "
                                    "nothing on its 8 node(s)")
