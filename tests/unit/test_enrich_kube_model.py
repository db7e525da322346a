"""Kubernetes context shaping: GPU counting, node state, cordon origin, events, teams, owners."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from alertd.enrich.kube import KubeContext
from alertd.core.kube_findings import Pod
from alertd.enrich.kube_owners import controller_ref, owners_of, split_api_version
from alertd.enrich.settings import KubeSettings

NOW = datetime(2026, 1, 2, 3, 10, tzinfo=timezone.utc)


def ctx(**kw) -> KubeContext:
    return KubeContext(KubeSettings(**kw), api_client=object(), now=lambda: NOW)


def pod(containers, init=()):
    return {"metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": list(containers), "initContainers": list(init)}}


def res(limits=None, requests=None):
    return {"resources": {k: v for k, v in (("limits", limits), ("requests", requests)) if v}}


def test_gpu_count_limits_requests_mig_and_init_containers() -> None:
    c = ctx()
    assert c.gpu_count(pod([res({"nvidia.com/gpu": "8", "cpu": "4"})])) == (8, {"nvidia.com/gpu": 8})
    assert c.gpu_count(pod([res(requests={"nvidia.com/gpu": 2}), res({"nvidia.com/gpu": "1"})])) == (3, {"nvidia.com/gpu": 3})
    assert c.gpu_count(pod([res({"nvidia.com/mig-1g.10gb": "2"}), res({"nvidia.com/mig-3g.40gb": "1"})])) == (
        3, {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-3g.40gb": 1})
    assert c.gpu_count(pod([res({"cpu": "1"})])) == (0, {})
    assert c.gpu_count(pod([res({"nvidia.com/gpu": "1"})], init=[res({"nvidia.com/gpu": "4"})])) == (4, {"nvidia.com/gpu": 4})
    assert ctx(gpu_resources=("amd.com/gpu",)).gpu_count(pod([res({"amd.com/gpu": "2"})]))[0] == 2


def test_describe_cordoned_not_ready_node() -> None:
    node = {
        "metadata": {
            "name": "gpu-node-2",
            "labels": {"node.kubernetes.io/instance-type": "p4d.24xlarge", "eks.amazonaws.com/nodegroup": "a100-pool",
                       "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "time": "2026-01-02T02:00:00Z",
                 "fieldsV1": {"f:status": {"f:conditions": {}}}},
                {"manager": "kubectl-cordon", "operation": "Update", "time": "2026-01-02T03:05:00Z",
                 "fieldsV1": {"f:spec": {"f:unschedulable": {}}}},
            ],
        },
        "spec": {"unschedulable": True, "taints": [
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-01-02T03:05:00Z"},
            {"key": "nvidia.com/gpu.health", "value": "xid79", "effect": "NoExecute"}]},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "PLEG is not healthy",
                 "lastTransitionTime": "2026-01-02T03:04:30Z"},
            ],
            "capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "7"},
        },
    }
    out = ctx().describe_node(node).to_json()
    assert out["name"] == "gpu-node-2" and out["cordoned"] is True and out["ready"] == "False"
    assert out["cordoned_by"] == "kubectl-cordon" and out["cordoned_at"] == "2026-01-02T03:05:00Z"
    assert out["pool"] == "a100-pool" and out["instance_type"] == "p4d.24xlarge"
    assert out["gpu_product"] == "NVIDIA-A100-SXM4-40GB" and out["gpus"] == {"capacity": "8", "allocatable": "7"}
    ready = next(c for c in out["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "PLEG is not healthy" and ready["since"] == "2026-01-02T03:04:30Z"
    assert "message" not in next(c for c in out["conditions"] if c["type"] == "MemoryPressure")
    assert {"key": "nvidia.com/gpu.health", "value": "xid79", "effect": "NoExecute"} in out["taints"]


def test_cordon_time_from_taint_without_managed_fields() -> None:
    node = {"metadata": {"name": "n"}, "spec": {"unschedulable": True, "taints": [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-01-02T03:05:00Z"}]}}
    out = ctx().describe_node(node).to_json()
    assert out["cordoned_at"] == "2026-01-02T03:05:00Z" and "cordoned_by" not in out


def test_events_recent_first_and_windowed() -> None:
    body = {"items": [
        {"reason": "NodeNotReady", "type": "Normal", "message": "Node gpu-node-2 status is now: NodeNotReady",
         "source": {"component": "node-controller"}, "lastTimestamp": "2026-01-02T03:04:40Z", "count": 1},
        {"reason": "NodeNotSchedulable", "type": "Normal", "message": "Node gpu-node-2 status is now: NodeNotSchedulable",
         "source": {"component": "kubelet", "host": "gpu-node-2"}, "lastTimestamp": "2026-01-02T03:05:00Z"},
        {"reason": "Rebooted", "type": "Warning", "message": "old", "lastTimestamp": "2026-01-01T00:00:00Z"},
        {"reason": "Xid", "type": "Warning", "message": "series", "eventTime": "2026-01-02T03:06:00.000000Z",
         "reportingController": "gpu-health", "series": {"count": 4}},
    ]}
    out = [e.to_json() for e in ctx(events_window=timedelta(hours=1)).describe_events(body, "gpu-node-2")]
    assert [e["reason"] for e in out] == ["Xid", "NodeNotSchedulable", "NodeNotReady"]
    assert out[0]["source"] == "gpu-health" and out[0]["count"] == 4 and out[0]["node"] == "gpu-node-2"
    assert out[2]["source"] == "node-controller"


def test_team_and_channel_precedence() -> None:
    c = ctx()
    job = {"metadata": {"labels": {"team": "ml-infra"}, "annotations": {}}}
    p = {"metadata": {"labels": {"team": "someone-else", "app.kubernetes.io/part-of": "llm"},
                      "annotations": {"alertd.io/slack-channel": "#pod-channel"}}}
    ns = {"metadata": {"labels": {"team": "ns-team"}, "annotations": {"alertd.io/slack-channel": "#ns-channel"}}}
    assert c.team_and_channel([job, p, ns]) == ("ml-infra", "#pod-channel")
    assert c.team_and_channel([{"metadata": {}}, ns]) == ("ns-team", "#ns-channel")
    assert ctx(team_labels=("owner",)).team_and_channel([job, p, ns]) == ("", "#pod-channel")


def test_owner_refs_and_owners_rollup() -> None:
    obj = {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Node", "name": "x"},
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "llama", "controller": True}]}}
    ref = controller_ref(obj)
    assert ref is not None and ref["kind"] == "PyTorchJob"
    assert controller_ref({"metadata": {}}) is None
    assert split_api_version("kubeflow.org/v1") == ("kubeflow.org", "v1")
    assert split_api_version("v1") == ("", "v1")
    pods = [
        {"namespace": "ml", "name": "llama-worker-0", "gpus": 8, "team": "ml-infra", "channel": "#ml",
         "owner_chain": [{"kind": "PyTorchJob", "name": "llama"}]},
        {"namespace": "ml", "name": "llama-worker-1", "gpus": 8, "team": "ml-infra",
         "owner_chain": [{"kind": "PyTorchJob", "name": "llama"}]},
        {"namespace": "batch", "name": "bare", "gpus": 1, "owner_chain": []},
    ]
    assert [o.to_json() for o in owners_of([Pod.from_json(p) for p in pods])] == [
        {"kind": "PyTorchJob", "name": "llama", "namespace": "ml", "team": "ml-infra", "channel": "#ml", "pods": 2, "gpus": 16},
        {"kind": "Pod", "name": "bare", "namespace": "batch", "team": "", "channel": "", "pods": 1, "gpus": 1},
    ]
