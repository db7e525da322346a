"""GPU cluster objects on the real test API server (testkit/kube_apiserver.py): GPU nodes, a
PyTorchJob gang (CRD, its Job, pods across nodes), a PDB-guarded inference pod, and alertd's account bound
to the shipped RBAC (deploy/kubernetes/rbac.yaml). No kubelet: pods are made Running by a status write."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from testkit.kube_apiserver import KubeAPIServer

ROOT = Path(__file__).resolve().parents[1]
USER = "remediator"  # the static-token user that stands for alertd's ServiceAccount
PYTORCHJOB_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "pytorchjobs.kubeflow.org"},
    "spec": {"group": "kubeflow.org", "scope": "Namespaced",
             "names": {"plural": "pytorchjobs", "singular": "pytorchjob", "kind": "PyTorchJob"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def policy(*, dry_run: bool = False, share: float = 0.2, per_hour: int = 5, timeout: str = "3s",
           slack_users: tuple[str, ...] = ()) -> str:
    """rules/remediation.yml for the tests and the bench: Xid 79 drains the node's GPU pods."""
    return f"""
remediation:
  dry_run: {str(dry_run).lower()}
  breaker: {{max_share: {share}, max_per_hour: {per_hour}}}
  approvers: {{slack_users: [{', '.join(slack_users)}]}}
  drain: {{timeout: {timeout}, grace_period: 0}}
  policies:
    - {{name: gpu-off-the-bus, xids: [79], action: drain-gpu}}
"""


def ok(answer: tuple[int, Any], *also: int) -> Any:
    status, body = answer
    assert status in (200, 201, *also), body
    return body


def apply_shipped_rbac(k: KubeAPIServer) -> None:
    """The shipped ClusterRoles' rules as they are, bound to the test user instead of the ServiceAccount.

    Named with the user as a suffix, so other tests of the session can create the shipped names themselves."""
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "rbac.yaml").read_text()) if d]
    roles = [d for d in docs if d["kind"] == "ClusterRole"]
    assert {r["metadata"]["name"] for r in roles} == {"alertd-enrichment", "alertd-remediation"}
    for role in roles:
        role["metadata"]["name"] += f"-{USER}"
    out = k.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(roles))
    assert out.returncode == 0, out.stderr
    for role in roles:
        name = role["metadata"]["name"]
        ok(k.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]}), 409)


def add_node(k: KubeAPIServer, name: str, gpus: int = 8) -> None:
    node = ok(k.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}))
    node["status"] = {"capacity": {"nvidia.com/gpu": str(gpus), "cpu": "96"},
                      "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "96"},
                      "conditions": [{"type": "Ready", "status": "True"}]}
    ok(k.request("PUT", f"/api/v1/nodes/{name}/status", node))


def namespace(k: KubeAPIServer, name: str) -> None:
    ok(k.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
       409)


def add_pod(k: KubeAPIServer, ns: str, name: str, node: str, *, gpus: int = 0, labels: dict[str, str] | None = None,
            owner: dict[str, Any] | None = None) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
    pod = ok(k.request("POST", f"/api/v1/namespaces/{ns}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
             "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                                         "resources": resources}]}}))
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return ok(k.request("PUT", f"/api/v1/namespaces/{ns}/pods/{name}/status", pod))  # as the kubelet would


def pytorch_gang(k: KubeAPIServer, ns: str, job: str, nodes: list[str], per_node: int = 2, gpus: int = 4) -> None:
    """A PyTorchJob -> Job -> pods chain, ``per_node`` pods on each node, labelled as the training operator does."""
    ok(k.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", PYTORCHJOB_CRD), 409)
    for _ in range(40):  # the CRD is served a moment after it is created
        status, _ = k.request("GET", f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs")
        if status == 200:
            break
        time.sleep(0.25)
    top = ok(k.request("POST", f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": job, "labels": {"team": "llm"}},
        "spec": {"pytorchReplicaSpecs": {}}}))
    batch = ok(k.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{job}-worker", "ownerReferences": [{
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job, "uid": top["metadata"]["uid"],
            "controller": True}]},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3"}]}}}}))
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": batch["metadata"]["name"], "uid": batch["metadata"]["uid"]}
    i = 0
    for node in nodes:
        for _ in range(per_node):
            add_pod(k, ns, f"{job}-worker-{i}", node, gpus=gpus, owner=owner,
                    labels={"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-index": str(i)})
            i += 1


def node(k: KubeAPIServer, name: str) -> dict[str, Any]:
    return ok(k.request("GET", f"/api/v1/nodes/{name}"))


def pods_on(k: KubeAPIServer, name: str) -> list[str]:
    items = ok(k.request("GET", f"/api/v1/pods?fieldSelector=spec.nodeName={name}"))["items"]
    return sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in items)
