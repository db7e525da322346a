"""Job impact against a REAL kube-apiserver: an Xid 79 on a node running one pod of a 64-GPU PyTorchJob names
the job, its gang of 64 GPUs on 8 nodes and its owner, with the estimated GPU-hours lost, in Slack (the
on-call channel and the job owners' channel), the UI and the API.

The PyTorchJob CRD is the Kubeflow training operator's own (testkit/kubeflow_crd.py); pods are plain
API objects with the ownerReferences the operator sets; alertd reads them as its own account under the
shipped RBAC (deploy/kubernetes/rbac.yaml).
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from alertd.config.settings import parse_config
from alertd.enrich.fleet_size import sample_fleet
from alertd.enrich.jobs import JobImpactReader
from alertd.enrich.kube import KubeContext
from alertd.enrich.settings import KubeSettings
from tests.support.fixtures import require
from testkit.kube_apiserver import KubeAPIServer, bind_shipped_enrichment_role
from testkit.kubeflow_crd import pytorchjob_crd
from testkit.notify_harness import Harness, hook, wait_for, xid_alert

pytestmark = pytest.mark.services
ROOT = Path(__file__).resolve().parents[2]
NS = "research"
NODES = [f"gpu-a-{i}" for i in range(1, 9)]
HIT = "gpu-a-3"
STARTED = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=3)
JOBS = {"checkpoint_interval": "1h", "restart_time": "10m"}
LOST = 64 * (0.5 + 10 / 60)  # gang GPUs x (half a checkpoint interval + the restart), GPU-hours


def ok(answer: tuple[int, Any], *also: int) -> Any:
    status, body = answer
    assert status in (200, 201, *also), body
    return body


def gpu_pod(name: str, node: str, owner: dict[str, Any] | None, gpus: int = 8) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"training.kubeflow.org/job-name": "llama-64"}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "pytorch", "image": "ghcr.io/example/llama:1",
                                                       "resources": {"limits": limits}}]}}


def replica(n: int) -> dict[str, Any]:
    return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "ghcr.io/example/llama:1", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}


def running(k: KubeAPIServer, pod: dict[str, Any]) -> None:
    created = ok(k.request("POST", f"/api/v1/namespaces/{NS}/pods", pod))
    created["status"] = {"phase": "Running", "startTime": STARTED.isoformat().replace("+00:00", "Z")}
    ok(k.request("PUT", f"/api/v1/namespaces/{NS}/pods/{created['metadata']['name']}/status", created))


@pytest.fixture(scope="module")
def cluster(kube_apiserver: KubeAPIServer) -> KubeAPIServer:
    k = kube_apiserver
    crd = require(pytorchjob_crd)
    ok(k.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd), 409)
    bind_shipped_enrichment_role(k)
    ok(k.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": NS, "labels": {"team": "ml-research"},
        "annotations": {"alertd.io/slack-channel": "#ml-research"}}}))
    for node in NODES + ["gpu-b-1"]:
        ok(k.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": node, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}), 409)
    deadline = time.monotonic() + 30
    while ok(k.request("GET", f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs"), 404) is None or \
            k.request("GET", f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs")[0] != 200:
        assert time.monotonic() < deadline, "the PyTorchJob CRD never became established"
        time.sleep(0.2)
    job = ok(k.request("POST", f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "llama-64", "annotations": {"alertd.io/owner": "alice"}},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(7)}}}))
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "llama-64",
             "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    running(k, gpu_pod("llama-64-master-0", NODES[0], owner))
    for i, node in enumerate(NODES[1:]):
        running(k, gpu_pod(f"llama-64-worker-{i}", node, owner))
    running(k, gpu_pod("notebook-7", "gpu-b-1", None, gpus=1))  # another workload: not of the gang
    running(k, gpu_pod("llama-64-tensorboard", NODES[0], owner, gpus=0))  # of the job, but holds no GPU
    return k


def kube_settings(k: KubeAPIServer, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": k.url, "certificate-authority": str(k.ca_file)}}],
        "users": [{"name": "alertd", "user": {"token": k.token("alertd")}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "alertd"}}]}))
    return {"kubeconfig": str(path), "timeout": "5s", "jobs": JOBS}


async def test_the_gang_owner_and_cost_of_the_job_on_a_node(cluster, tmp_path):
    kube = KubeContext(KubeSettings.from_doc(kube_settings(cluster, tmp_path)))
    try:
        jobs = await JobImpactReader(kube, kube.settings.jobs).jobs_on_node(HIT, datetime.now(timezone.utc))
    finally:
        await kube.close()
    assert [(j.kind, j.namespace, j.name) for j in jobs] == [("PyTorchJob", NS, "llama-64")]
    job = jobs[0]
    assert (job.gpus, len(job.gang), job.nodes, job.owner, job.team) == (64, 8, NODES, "alice", "ml-research")
    assert job.hit_pods == ["llama-64-worker-1"]
    assert job.gpu_hours_lost == round(LOST, 2)


ROUTING = """
routing:
  group_wait: 0s
  receivers:
    - name: oncall
      slack: "#gpu-oncall"
    - name: ml-research
      slack: "#ml-research"
  owners:
    namespaces: {research: ml-research}
  routes:
    - name: job-owners
      match: ['category=~"hardware|memory|nvlink"']
      owners: true
      continue: true
      receiver: oncall
    - name: page
      match: ['severity="critical"']
      receiver: oncall
  default_receiver: oncall
"""


async def test_xid79_names_the_job_in_slack_ui_and_api(cluster, tmp_path, slack):
    h = Harness(tmp_path, slack=slack, routing=ROUTING)
    h.cfg = parse_config({**h.cfg.raw, "enrich": {"write_delay": "20ms", "kube": kube_settings(cluster, tmp_path)}},
                         "test")
    await h.start()
    try:
        alert = xid_alert(HIT, gpu=2, code=79)
        alert["labels"].update(namespace=NS, pod="llama-64-worker-1", container="pytorch")
        await h.post(hook(alert, node=HIT))

        async def enriched() -> dict[str, Any] | None:
            rows = (await (await h.client.get("/api/v1/incidents")).json())["incidents"]
            if not rows:
                return None
            inc = await (await h.client.get(f"/api/v1/incidents/{rows[0]['id']}")).json()
            return inc if inc["annotations"].get("jobs") else None

        inc = await wait_for(enriched, timeout=20)
        [job] = inc["annotations"]["jobs"]
        assert (job["kind"], job["name"], job["gpus"], job["pods"], job["nodes"], job["owner"]) == \
            ("PyTorchJob", "llama-64", 64, 8, 8, "alice")
        assert job["gpuHoursLost"] == round(LOST, 2)
        page = await (await h.client.get(f"/ui/incidents/{inc['id']}")).text()
        assert "PyTorchJob research/llama-64: gang of 8 pods, 64 GPUs on 8 nodes · owner alice" in page
        assert f"≈ {LOST:.1f} GPU-hours lost" in page

        def slack_line(channel: str) -> bool:
            return any("Jobs hit:" in str(m.get("blocks")) and "64 GPUs on 8 nodes (owner alice, team ml-research)"
                       in str(m.get("blocks")) and f"{LOST:,.1f} GPU-hours lost" in str(m.get("blocks"))
                       for m in (slack.messages.get(channel) or {}).values())

        await wait_for(lambda: slack_line("#gpu-oncall"), timeout=20)
        await wait_for(lambda: slack_line("#ml-research"), timeout=20)
    finally:
        await h.stop()


async def test_the_fleet_sample_reads_allocatable_gpus_types_and_cordons(cluster, tmp_path):
    k = cluster
    for node in NODES:
        obj = ok(k.request("GET", f"/api/v1/nodes/{node}"))
        obj["status"] = {"capacity": {"nvidia.com/gpu": "8", "cpu": "192"},
                         "allocatable": {"nvidia.com/gpu": "7" if node == HIT else "8", "cpu": "190"}}
        ok(k.request("PUT", f"/api/v1/nodes/{node}/status", obj))
    obj = ok(k.request("GET", f"/api/v1/nodes/{HIT}"))
    obj["spec"]["unschedulable"] = True
    ok(k.request("PUT", f"/api/v1/nodes/{HIT}", obj))
    kube = KubeContext(KubeSettings.from_doc(kube_settings(k, tmp_path)))
    try:
        sampled = {s.node: s for s in await sample_fleet(kube)}
    finally:
        await kube.close()
    # the session's API server holds other modules' nodes too: judge this module's
    found = {n: s for n, s in sampled.items() if n in NODES or n == "gpu-b-1"}
    assert set(found) == set(NODES)  # gpu-b-1 reports no allocatable GPU (no device plugin): not a GPU node
    assert {s.node_type for s in found.values()} == {"NVIDIA-H100-80GB-HBM3"}
    assert (found[HIT].gpus, found[HIT].cordoned) == (7, True)
    assert sum(s.gpus for s in found.values()) == 63 and sum(s.cordoned for s in found.values()) == 1
