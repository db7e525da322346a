"""The Kubernetes test server keeps the API server's contract for what enrichment reads, driven with
kubernetes_asyncio loaded from a kubeconfig, as alertd reads a cluster."""
from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from testkit.kube_server import KubeTestServer

@pytest.fixture
async def kube(tmp_path):
    server = KubeTestServer()
    await server.start()
    server.sample_cluster()
    yield server
    await server.stop()


@pytest.fixture
async def kapi(kube, tmp_path):
    """A kubernetes_asyncio ApiClient configured from a kubeconfig file written by the server."""
    path = kube.write_kubeconfig(tmp_path / "kubeconfig")
    cfg = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=str(path), client_configuration=cfg)
    async with k8s.ApiClient(configuration=cfg) as api:
        yield api


async def test_kube_kubeconfig_is_loadable(kube, tmp_path):
    path = kube.write_kubeconfig(tmp_path / "kc")
    api = await k8s_config.new_client_from_config(config_file=str(path))
    async with api:
        version = await k8s.VersionApi(api).get_code()
        assert version.git_version.startswith("v1.")
        nodes = await k8s.CoreV1Api(api).list_node()
        assert [n.metadata.name for n in nodes.items] == ["gpu-node-1", "gpu-node-2", "gpu-node-3"]


async def test_kube_pods_on_a_node(kube, kapi):
    v1 = k8s.CoreV1Api(kapi)
    pods = await v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-1")
    assert isinstance(pods, k8s.V1PodList) and pods.metadata.resource_version
    assert {p.spec.node_name for p in pods.items} == {"gpu-node-1"}
    by_name = {p.metadata.name: p for p in pods.items}
    master = by_name["llama-finetune-master-0"]
    assert master.spec.containers[0].resources.limits["nvidia.com/gpu"] == "4"
    assert master.status.phase == "Running"
    assert master.metadata.owner_references[0].kind == "PyTorchJob"
    assert master.metadata.owner_references[0].controller is True
    running = await v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-1,status.phase!=Succeeded")
    assert len(running.items) == len(pods.items) - 1
    assert all(p.status.phase != "Succeeded" for p in running.items)
    assert kube.requests_to("/api/v1/pods")[0].query["fieldSelector"] == "spec.nodeName=gpu-node-1"


async def test_kube_mig_pod(kapi):
    pods = await k8s.CoreV1Api(kapi).list_namespaced_pod(
        "research", label_selector="ray.io/cluster=ray-serve,ray.io/node-type=worker")
    [worker] = pods.items
    assert worker.spec.containers[0].resources.limits == {"nvidia.com/mig-1g.10gb": "1", "memory": "32Gi"}
    assert worker.spec.node_name == "gpu-node-3"
    assert worker.metadata.owner_references[0].kind == "RayCluster"


@pytest.mark.parametrize("selector, expected", [
    ("training.kubeflow.org/job-name=llama-finetune", {"llama-finetune-master-0", "llama-finetune-worker-0"}),
    ("training.kubeflow.org/replica-type in (master)", {"llama-finetune-master-0"}),
    ("training.kubeflow.org/job-name,training.kubeflow.org/replica-type!=master", {"llama-finetune-worker-0"}),
    ("jobset.sigs.k8s.io/jobset-name", None),  # exists
    ("!jobset.sigs.k8s.io/jobset-name,!training.kubeflow.org/job-name", None),
    ("jobset.sigs.k8s.io/job-index notin (0)", None),
])
async def test_kube_label_selectors(kube, kapi, selector, expected):
    pods = await k8s.CoreV1Api(kapi).list_namespaced_pod("ml-training", label_selector=selector)
    names = {p.metadata.name for p in pods.items}
    if expected is not None:
        assert names == expected
    elif selector == "jobset.sigs.k8s.io/jobset-name":
        assert len(names) == 2 and all(n.startswith("pretrain-7b-trainer-") for n in names)
    elif selector.startswith("!"):
        assert names == {n for n in names if n.startswith("nccl-test-")} and len(names) == 1
    else:  # notin matches pods without the label too
        assert "pretrain-7b-trainer-1-0-" in " ".join(names) and "llama-finetune-master-0" in names
        assert not any(n.startswith("pretrain-7b-trainer-0-") for n in names)


async def test_kube_read_node(kapi):
    v1 = k8s.CoreV1Api(kapi)
    cordoned = await v1.read_node("gpu-node-2")
    assert isinstance(cordoned, k8s.V1Node)
    assert cordoned.spec.unschedulable is True
    assert [t.key for t in cordoned.spec.taints] == ["node.kubernetes.io/unschedulable"]
    assert cordoned.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert cordoned.metadata.labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert cordoned.status.capacity["nvidia.com/gpu"] == "8"
    cordon_by = [m for m in cordoned.metadata.managed_fields if "f:unschedulable" in m.fields_v1.get("f:spec", {})]
    assert [m.manager for m in cordon_by] == ["kubectl-cordon"] and cordon_by[0].time is not None
    healthy = await v1.read_node("gpu-node-1")
    assert healthy.spec.unschedulable is None and healthy.spec.taints is None  # omitted, as the real API does
    down = await v1.read_node("gpu-node-3")
    ready = next(c for c in down.status.conditions if c.type == "Ready")
    assert ready.status == "Unknown" and ready.reason == "NodeStatusUnknown"
    assert {t.key for t in down.spec.taints} == {"node.kubernetes.io/unreachable"}
    assert down.status.capacity["nvidia.com/mig-1g.10gb"] == "56"
    gpu_nodes = await v1.list_node(label_selector="nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
    assert [n.metadata.name for n in gpu_nodes.items] == ["gpu-node-1", "gpu-node-2"]
    unschedulable = await v1.list_node(field_selector="spec.unschedulable=true")
    assert [n.metadata.name for n in unschedulable.items] == ["gpu-node-2"]


async def test_kube_node_events(kapi):
    v1 = k8s.CoreV1Api(kapi)
    events = await v1.list_namespaced_event(
        "default", field_selector="involvedObject.name=gpu-node-2,involvedObject.kind=Node")
    [cordon] = events.items
    assert cordon.reason == "NodeNotSchedulable" and cordon.type == "Normal"
    assert cordon.source.component == "kubelet" and cordon.source.host == "gpu-node-2"
    assert cordon.involved_object.kind == "Node" and cordon.count == 1
    assert cordon.first_timestamp is not None and cordon.last_timestamp >= cordon.first_timestamp
    not_ready = await v1.list_event_for_all_namespaces(field_selector="reason=NodeNotReady")
    kinds = sorted((e.involved_object.kind, e.source.component) for e in not_ready.items)
    assert kinds == [("Node", "node-controller"), ("Pod", "node-controller"), ("Pod", "node-controller")]
    warnings = await v1.list_namespaced_event("research", field_selector="type=Warning,involvedObject.kind=Pod")
    assert len(warnings.items) == 2 and all(e.involved_object.namespace == "research" for e in warnings.items)


async def test_kube_owner_chains(kube, kapi):
    v1, batch, custom = k8s.CoreV1Api(kapi), k8s.BatchV1Api(kapi), k8s.CustomObjectsApi(kapi)
    # PyTorchJob owns its pods directly
    ptj = await custom.get_namespaced_custom_object("kubeflow.org", "v1", "ml-training", "pytorchjobs",
                                                    "llama-finetune")
    assert ptj["kind"] == "PyTorchJob" and ptj["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    master = await v1.read_namespaced_pod("llama-finetune-master-0", "ml-training")
    assert master.metadata.owner_references[0].uid == ptj["metadata"]["uid"]
    # Pod -> Job -> JobSet
    [pod] = (await v1.list_namespaced_pod("ml-training", label_selector="job-name=pretrain-7b-trainer-0")).items
    ref = pod.metadata.owner_references[0]
    assert (ref.api_version, ref.kind, ref.name) == ("batch/v1", "Job", "pretrain-7b-trainer-0")
    job = await batch.read_namespaced_job(ref.name, "ml-training")
    assert isinstance(job, k8s.V1Job) and job.metadata.uid == ref.uid
    job_owner = job.metadata.owner_references[0]
    assert (job_owner.api_version, job_owner.kind, job_owner.name) == ("jobset.x-k8s.io/v1alpha2", "JobSet",
                                                                       "pretrain-7b")
    jobset = await custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "ml-training", "jobsets",
                                                       "pretrain-7b")
    assert jobset["metadata"]["uid"] == job_owner.uid
    # RayCluster
    ray = await custom.get_namespaced_custom_object("ray.io", "v1", "research", "rayclusters", "ray-serve")
    ray_pods = await v1.list_namespaced_pod("research", label_selector="ray.io/cluster=ray-serve")
    assert {p.metadata.owner_references[0].uid for p in ray_pods.items} == {ray["metadata"]["uid"]}
    # DaemonSet-owned pods carry no GPUs
    ds = await k8s.AppsV1Api(kapi).read_namespaced_daemon_set("nvidia-dcgm-exporter", "gpu-operator")
    assert ds.status.desired_number_scheduled == 3


async def test_kube_namespace(kapi):
    ns = await k8s.CoreV1Api(kapi).read_namespace("ml-training")
    assert ns.metadata.labels["team"] == "ml-platform" and ns.metadata.labels["owner"] == "alice"
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == "ml-training"
    assert ns.metadata.annotations and ns.status.phase == "Active"


async def test_kube_not_found_is_a_status(kube, kapi):
    with pytest.raises(ApiException) as err:
        await k8s.CoreV1Api(kapi).read_namespaced_pod("nope", "ml-training")
    assert err.value.status == 404
    body = json.loads(err.value.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["reason"] == "NotFound" and body["code"] == 404 and body["message"] == 'pods "nope" not found'
    with pytest.raises(ApiException) as err:
        await k8s.CustomObjectsApi(kapi).get_namespaced_custom_object("kubeflow.org", "v2beta1", "ml-training",
                                                                      "mpijobs", "nope")
    body = json.loads(err.value.body)
    assert body["message"] == 'mpijobs.kubeflow.org "nope" not found'
    assert body["details"] == {"name": "nope", "group": "kubeflow.org", "kind": "mpijobs"}
    with pytest.raises(ApiException) as err:  # a CRD that is not installed
        await k8s.CustomObjectsApi(kapi).get_namespaced_custom_object("example.com", "v1", "ml-training",
                                                                      "widgets", "w")
    assert err.value.status == 404 and err.value.body.startswith("404 page not found")


async def test_kube_rejects_bad_token_and_unsupported_selectors(kube, kapi, tmp_path):
    cfg = k8s.Configuration()
    cfg.host = kube.url
    cfg.api_key = {"BearerToken": "Bearer wrong"}
    async with k8s.ApiClient(configuration=cfg) as bad:
        with pytest.raises(ApiException) as err:
            await k8s.CoreV1Api(bad).list_node()
    assert err.value.status == 401 and json.loads(err.value.body)["reason"] == "Unauthorized"
    with pytest.raises(ApiException) as err:
        await k8s.CoreV1Api(kapi).list_pod_for_all_namespaces(field_selector="spec.nodename=gpu-node-1")
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"] == "field label not supported: spec.nodename"
    with pytest.raises(ApiException) as err:
        await k8s.CoreV1Api(kapi).list_pod_for_all_namespaces(label_selector="a in b")
    assert err.value.status == 400


async def test_kube_raw_list_shape_and_request_log(kube, session):
    headers = {"Authorization": f"Bearer {kube.token}"}
    async with session.get(kube.url + "/api/v1/namespaces/ml-training/pods", headers=headers) as resp:
        body = await resp.json()
    assert resp.status == 200
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1" and body["metadata"]["resourceVersion"]
    assert body["items"] and all("kind" not in i and "apiVersion" not in i for i in body["items"])
    names = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]]
    assert names == sorted(names)
    async with session.get(kube.url + "/apis/kubeflow.org/v1/pytorchjobs", headers=headers) as resp:
        body = await resp.json()
    assert body["kind"] == "PyTorchJobList" and body["items"][0]["kind"] == "PyTorchJob"  # CRs keep theirs
    async with session.get(kube.url + "/api/v1/nodes") as resp:
        assert resp.status == 401 and (await resp.json())["kind"] == "Status"
    assert kube.count("/api/v1/namespaces/ml-training/pods") == 1
    assert kube.requests[-1] == ("GET", "/api/v1/nodes", {})


async def test_kube_pagination(kapi):
    v1 = k8s.CoreV1Api(kapi)
    first = await v1.list_pod_for_all_namespaces(limit=4)
    assert len(first.items) == 4 and first.metadata._continue and first.metadata.remaining_item_count > 0
    rest = await v1.list_pod_for_all_namespaces(limit=100, _continue=first.metadata._continue)
    everything = await v1.list_pod_for_all_namespaces()
    assert [p.metadata.name for p in first.items + rest.items] == [p.metadata.name for p in everything.items]


async def test_kube_fault_injection_and_discovery(kube, kapi):
    kube.fail_next(status=500, path="/api/v1/nodes")
    with pytest.raises(ApiException) as err:
        await k8s.CoreV1Api(kapi).read_node("gpu-node-1")
    assert err.value.status == 500
    assert (await k8s.CoreV1Api(kapi).read_node("gpu-node-1")).metadata.name == "gpu-node-1"
    groups = await k8s.ApisApi(kapi).get_api_versions()
    assert {"batch", "apps", "kubeflow.org", "ray.io", "jobset.x-k8s.io"} <= {g.name for g in groups.groups}
    resources = await k8s.CoreV1Api(kapi).get_api_resources()
    assert {"pods", "nodes", "events", "namespaces"} <= {r.name for r in resources.resources}
