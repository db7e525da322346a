"""A realistic GPU cluster to load into the Kubernetes test server: Ready, cordoned and
NotReady nodes, and workloads (PyTorchJob, JobSet -> Job, RayCluster, DaemonSet) owning pods.
"""
from __future__ import annotations

import copy
import hashlib
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from testkit.kube_objects import pod_template_spec, rfc3339, suffix, uid_for, utc_now

if TYPE_CHECKING:
    from testkit.kube_server import KubeTestServer


def sample_cluster(kube: KubeTestServer) -> dict[str, Any]:
    """A realistic three-node GPU cluster; returns the names of what it made.

    * ``gpu-node-1``: H100 x8, Ready. ``gpu-node-2``: H100 x8, Ready but cordoned
      (kubelet ``NodeNotSchedulable`` event). ``gpu-node-3``: A100 with MIG
      (``nvidia.com/mig-1g.10gb``), NotReady: kubelet stopped posting status, node-controller
      ``NodeNotReady`` event on the node and Warning events on its pods.
    * namespace ``ml-training`` (team=ml-platform, owner=alice): PyTorchJob ``llama-finetune``
      owning pods ``llama-finetune-master-0`` (gpu-node-1) and ``llama-finetune-worker-0``
      (gpu-node-2) directly; JobSet ``pretrain-7b`` -> Jobs ``pretrain-7b-trainer-0``/``-1`` ->
      one pod each (gpu-node-1, gpu-node-2); a Succeeded ``nccl-test`` Job pod on gpu-node-1.
    * namespace ``research`` (team=research, owner=bob): RayCluster ``ray-serve`` owning a
      head pod and a MIG worker pod on gpu-node-3.
    * namespace ``gpu-operator``: DaemonSet ``nvidia-dcgm-exporter`` pods (no GPUs) on every node.
    """
    base = utc_now() - timedelta(hours=3)
    for ns, labels, ann in (
            ("default", {}, {}),
            ("kube-system", {}, {}),
            ("gpu-operator", {"team": "infra", "owner": "gpu-platform"}, {}),
            ("ml-training", {"team": "ml-platform", "owner": "alice"},
             {"alertd.dev/slack-channel": "#ml-platform-alerts", "owner-email": "alice@example.com"}),
            ("research", {"team": "research", "owner": "bob"},
             {"alertd.dev/slack-channel": "#research-alerts", "owner-email": "bob@example.com"})):
        kube.add_namespace(ns, labels, ann, created=base - timedelta(days=90))

    kube.add_node("gpu-node-1")
    kube.add_node("gpu-node-2")
    kube.add_node("gpu-node-3", gpu_product="NVIDIA-A100-SXM4-80GB", instance_type="p4de.24xlarge",
                  mig={"1g.10gb": 56})
    kube.cordon("gpu-node-2")
    kube.set_node_ready("gpu-node-3", "Unknown")

    # DaemonSet pods of the GPU operator on every node
    ds_uid = uid_for("apps/v1", "DaemonSet", "gpu-operator", "nvidia-dcgm-exporter")
    ds_labels = {"app": "nvidia-dcgm-exporter", "app.kubernetes.io/managed-by": "gpu-operator"}
    kube.add_object({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator", "uid": ds_uid,
                     "generation": 1, "labels": ds_labels, "creationTimestamp": rfc3339(base - timedelta(days=30))},
        "spec": {"selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                 "template": {"metadata": {"labels": ds_labels},
                              "spec": pod_template_spec("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.7-3.5.0-ubuntu22.04",
                                                         0, restart_policy="Always")},
                 "updateStrategy": {"type": "RollingUpdate"}},
        "status": {"currentNumberScheduled": 3, "desiredNumberScheduled": 3, "numberMisscheduled": 0,
                   "numberReady": 2, "numberAvailable": 2, "numberUnavailable": 1, "observedGeneration": 1,
                   "updatedNumberScheduled": 3},
    })
    dcgm_pods = []
    for node in ("gpu-node-1", "gpu-node-2", "gpu-node-3"):
        pod = f"nvidia-dcgm-exporter-{suffix(node)}"
        dcgm_pods.append(pod)
        kube.add_pod("gpu-operator", pod, node, gpus=0, owner=("apps/v1", "DaemonSet", "nvidia-dcgm-exporter"),
                     labels={**ds_labels, "controller-revision-hash": "6c9b7d8f5d", "pod-template-generation": "1"},
                     image="nvcr.io/nvidia/k8s/dcgm-exporter:3.3.7-3.5.0-ubuntu22.04",
                     container="nvidia-dcgm-exporter",
                     restart_policy="Always", created=base - timedelta(days=30))

    # PyTorchJob: pods owned directly by the PyTorchJob
    ptj, ns = "llama-finetune", "ml-training"
    replica_template = {"template": {"spec": pod_template_spec("nvcr.io/nvidia/pytorch:24.05-py3", 4,
                                                                restart_policy="OnFailure", container="pytorch")}}
    kube.add_object({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": ptj, "namespace": ns, "generation": 1, "labels": {"app": "llama"},
                     "creationTimestamp": rfc3339(base)},
        "spec": {"runPolicy": {"cleanPodPolicy": "None", "suspend": False},
                 "pytorchReplicaSpecs": {
                     "Master": {"replicas": 1, "restartPolicy": "OnFailure", **copy.deepcopy(replica_template)},
                     "Worker": {"replicas": 1, "restartPolicy": "OnFailure", **copy.deepcopy(replica_template)}}},
        "status": {
            "conditions": [
                {"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
                 "message": f"PyTorchJob {ptj} is created.", "lastUpdateTime": rfc3339(base),
                 "lastTransitionTime": rfc3339(base)},
                {"type": "Running", "status": "True", "reason": "PyTorchJobRunning",
                 "message": f"PyTorchJob {ns}/{ptj} is running.",
                 "lastUpdateTime": rfc3339(base + timedelta(minutes=2)),
                 "lastTransitionTime": rfc3339(base + timedelta(minutes=2))}],
            "replicaStatuses": {
                "Master": {"active": 1, "selector": f"training.kubeflow.org/job-name={ptj},"
                                                    "training.kubeflow.org/operator-name=pytorchjob-controller,"
                                                    "training.kubeflow.org/replica-type=master"},
                "Worker": {"active": 1, "selector": f"training.kubeflow.org/job-name={ptj},"
                                                    "training.kubeflow.org/operator-name=pytorchjob-controller,"
                                                    "training.kubeflow.org/replica-type=worker"}},
            "startTime": rfc3339(base)},
    })
    ptj_pods = []
    for rtype, node in (("master", "gpu-node-1"), ("worker", "gpu-node-2")):
        pod = f"{ptj}-{rtype}-0"
        ptj_pods.append(pod)
        labels = {"training.kubeflow.org/job-name": ptj,
                  "training.kubeflow.org/operator-name": "pytorchjob-controller",
                  "training.kubeflow.org/replica-type": rtype,
                  "training.kubeflow.org/replica-index": "0"}
        if rtype == "master":
            labels["training.kubeflow.org/job-role"] = "master"
        kube.add_pod(ns, pod, node, gpus=4, owner=("kubeflow.org/v1", "PyTorchJob", ptj), labels=labels,
                     container="pytorch", restart_policy="OnFailure", created=base + timedelta(seconds=5))

    # JobSet -> Job -> Pod
    js = "pretrain-7b"
    kube.add_object({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": js, "namespace": ns, "generation": 1, "labels": {"app": "pretrain"},
                     "creationTimestamp": rfc3339(base)},
        "spec": {
            "replicatedJobs": [{"name": "trainer", "replicas": 2, "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 0,
                "template": {"spec": pod_template_spec("nvcr.io/nvidia/nemo:24.05", 4,
                                                        restart_policy="Never", container="trainer")}}}}],
            "successPolicy": {"operator": "All"},
            "failurePolicy": {"maxRestarts": 3},
            "network": {"enableDNSHostnames": True, "subdomain": js, "publishNotReadyAddresses": True},
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "suspend": False},
        "status": {"restarts": 0, "terminalState": "",
                   "replicatedJobsStatus": [{"name": "trainer", "ready": 2, "active": 2, "succeeded": 0,
                                             "failed": 0, "suspended": 0}]},
    })
    jobs, js_pods = [], []
    for index, node in ((0, "gpu-node-1"), (1, "gpu-node-2")):
        job = f"{js}-trainer-{index}"
        jobs.append(job)
        js_labels = {"jobset.sigs.k8s.io/jobset-name": js, "jobset.sigs.k8s.io/replicatedjob-name": "trainer",
                     "jobset.sigs.k8s.io/replicatedjob-replicas": "2", "jobset.sigs.k8s.io/job-index": str(index),
                     "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{ns}/{job}".encode()).hexdigest()}
        kube.add_job(ns, job, owner=("jobset.x-k8s.io/v1alpha2", "JobSet", js), labels=js_labels, gpus=4,
                     image="nvcr.io/nvidia/nemo:24.05", created=base + timedelta(seconds=1))
        pod = f"{job}-0-{suffix(job)}"
        js_pods.append(pod)
        kube.add_pod(ns, pod, node, gpus=4, owner=("batch/v1", "Job", job),
                     labels=kube.job_pod_labels(ns, job, index=0),
                     annotations={"batch.kubernetes.io/job-completion-index": "0",
                                  "jobset.sigs.k8s.io/jobset-name": js},
                     image="nvcr.io/nvidia/nemo:24.05", container="trainer", created=base + timedelta(seconds=3))

    # a finished Job on gpu-node-1 (for status.phase!=Succeeded filtering)
    kube.add_job(ns, "nccl-test", gpus=0, active=0, succeeded=1, indexed=False, created=base - timedelta(hours=5))
    nccl_pod = f"nccl-test-{suffix('nccl-test')}"
    kube.add_pod(ns, nccl_pod, "gpu-node-1", gpus=0, owner=("batch/v1", "Job", "nccl-test"),
                 labels=kube.job_pod_labels(ns, "nccl-test"), phase="Succeeded", container="nccl",
                 created=base - timedelta(hours=5))

    # RayCluster owning its pods on the MIG node
    rc, rns = "ray-serve", "research"
    kube.add_object({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": rc, "namespace": rns, "generation": 1, "creationTimestamp": rfc3339(base)},
        "spec": {"rayVersion": "2.34.0",
                 "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                                   "template": {"spec": pod_template_spec("rayproject/ray:2.34.0", 0,
                                                                           restart_policy="Always",
                                                                           container="ray-head")}},
                 "workerGroupSpecs": [{"groupName": "gpu-group", "replicas": 1, "minReplicas": 1, "maxReplicas": 4,
                                       "rayStartParams": {},
                                       "template": {"spec": pod_template_spec(
                                           "rayproject/ray:2.34.0-gpu", 1, restart_policy="Always",
                                           container="ray-worker", mig="1g.10gb")}}]},
        "status": {"state": "ready", "availableWorkerReplicas": 1, "desiredWorkerReplicas": 1,
                   "readyWorkerReplicas": 1, "maxWorkerReplicas": 4, "minWorkerReplicas": 1,
                   "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379", "metrics": "8080"},
                   "head": {"podName": f"{rc}-head-{suffix(rc + 'head')}"}},
    })
    ray_common = {"ray.io/cluster": rc, "ray.io/is-ray-node": "yes",
                  "app.kubernetes.io/created-by": "kuberay-operator", "app.kubernetes.io/name": "kuberay"}
    ray_head = f"{rc}-head-{suffix(rc + 'head')}"
    ray_worker = f"{rc}-gpu-group-worker-{suffix(rc + 'worker')}"
    kube.add_pod(rns, ray_head, "gpu-node-3", gpus=0, owner=("ray.io/v1", "RayCluster", rc),
                 labels={**ray_common, "ray.io/node-type": "head", "ray.io/group": "headgroup",
                         "ray.io/identifier": f"{rc}-head"},
                 image="rayproject/ray:2.34.0", container="ray-head", restart_policy="Always",
                 created=base + timedelta(seconds=5))
    kube.add_pod(rns, ray_worker, "gpu-node-3", gpus=1, mig="1g.10gb", owner=("ray.io/v1", "RayCluster", rc),
                 labels={**ray_common, "ray.io/node-type": "worker", "ray.io/group": "gpu-group",
                         "ray.io/identifier": f"{rc}-worker"},
                 image="rayproject/ray:2.34.0-gpu", container="ray-worker", restart_policy="Always",
                 created=base + timedelta(seconds=5))
    for pod in (ray_head, ray_worker):
        kube.add_event(rns, "Pod", pod, "NodeNotReady", "Node is not ready", type="Warning",
                       component="node-controller")

    return {
        "nodes": ["gpu-node-1", "gpu-node-2", "gpu-node-3"],
        "cordoned": "gpu-node-2",
        "not_ready": "gpu-node-3",
        "namespaces": {"ml-training": {"team": "ml-platform", "owner": "alice"},
                       "research": {"team": "research", "owner": "bob"}},
        "pytorchjob": {"namespace": ns, "name": ptj, "pods": ptj_pods},
        "jobset": {"namespace": ns, "name": js, "jobs": jobs, "pods": js_pods},
        "raycluster": {"namespace": rns, "name": rc, "pods": [ray_head, ray_worker]},
        "daemonset": {"namespace": "gpu-operator", "name": "nvidia-dcgm-exporter", "pods": dcgm_pods},
        "completed_pod": {"namespace": ns, "name": nccl_pod},
    }
