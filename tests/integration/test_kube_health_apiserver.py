"""Kubernetes' own GPU health signals through the REAL kube-apiserver and the REAL node-problem-detector.

alertd runs in-process (built as the CLI builds it) with sources.kube_health on, reading the API server
through a kubeconfig. NPD (scripts/build-npd.sh) runs in standalone mode with the shipped GPU kernel
monitor reading a log file the test appends NVRM lines to, so the condition and Event alertd reads are
written by the real producer. Admission failures are written as the kubelet writes them (no kubelet runs
here): a Failed pod with reason UnexpectedAdmissionError and a Warning Event from source kubelet/<node>,
message as the device manager words it (pkg/kubelet/cm/devicemanager: "Allocate failed due to requested
number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected").
Node names are this module's own: the API server is shared with the other kube modules.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient, TestServer

from alertd.app.assemble import build_service
from alertd.app.service import Service
from alertd.config.settings import parse_config
from alertd.enrich.enricher import Enricher
from alertd.store.sqlite import SqliteStore
from testkit.kube_apiserver import KubeAPIServer, bind_shipped_enrichment_role
from tests.support.fixtures import require
from testkit.npd import start_npd
from testkit.served import served
from testkit.stores import make_store  # noqa: F401  (a fixture: SQLite and PostgreSQL)
from testkit.webhooks import FIRING_END, fingerprint

pytestmark = pytest.mark.services
ROOT = Path(__file__).resolve().parents[2]
HOOK = "/api/v1/alerts/alertmanager"
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2817, name=python3, GPU has fallen off the bus."
ADMISSION = ("Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
             "Requested: 1, Available: 0, which is unexpected")


def ok(answer: tuple[int, Any]) -> Any:
    status, body = answer
    assert status in (200, 201), body
    return body


def now_iso(delta: float = 0.0) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_node(k: KubeAPIServer, name: str) -> None:
    """A Ready GPU node, its status as a kubelet reports it."""
    node = ok(k.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}))
    node["status"] = {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                      "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                      "message": "kubelet is posting ready status", "lastHeartbeatTime": now_iso(),
                                      "lastTransitionTime": now_iso(-3600)}]}
    ok(k.request("PUT", f"/api/v1/nodes/{name}/status", node))


def set_condition(k: KubeAPIServer, node: str, cond: dict[str, str]) -> None:
    """A node condition patched as an agent does (a strategic merge of status.conditions by type)."""
    ok(k.request("PATCH", f"/api/v1/nodes/{node}/status", {"status": {"conditions": [cond]}},
                 content_type="application/strategic-merge-patch+json"))


def config(k: KubeAPIServer, tmp_path: Path, **more: Any) -> Any:
    """alertd as the user ``alertd`` bound to the shipped read-only role (deploy/kubernetes/rbac.yaml): the
    watches need nothing more than enrichment does."""
    bind_shipped_enrichment_role(k)
    kubeconfig = k.kubeconfig(tmp_path / f"alertd-{uuid.uuid4().hex[:6]}.kubeconfig", "alertd")
    return parse_config({"rules": {"paths": [str(ROOT / "rules")]},
                         "enrich": {"kube": {"kubeconfig": str(kubeconfig), "timeout": "5s"}},
                         "normalize": {"kubernetes": {"enabled": False}},
                         "sources": {"kube_health": {"enabled": True, "cluster": "prod", "unready_after": "2s"}},
                         **more}, "test")


async def wait_for(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout:g}s (last: {last})")


def node_incidents(svc: Service, node: str) -> list[Any]:
    assert svc.engine is not None
    return [i for i in svc.engine.state.incidents.values() if any(m.subject.node == node for m in i.members.values())]


def webhook_xid(node: str, xid: str) -> dict[str, Any]:
    labels = {"alertname": "DCGMXidErrors", "severity": "critical", "cluster": "prod", "node": node,
              "Hostname": node, "xid": xid, "gpu": "3", "UUID": "GPU-5f3e9c1a-0b7d-4c52-9e61-2a8f4d7b3c10",
              "pci_bus_id": "00000000:3B:00.0", "modelName": "NVIDIA H100 80GB HBM3", "job": "nvidia-dcgm-exporter",
              "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-7xk2p", "container": "nvidia-dcgm-exporter"}
    alert = {"status": "firing", "labels": labels, "annotations": {"summary": f"GPU 3 reported Xid {xid}"},
             "startsAt": now_iso(), "endsAt": FIRING_END, "generatorURL": "http://prometheus-0:9090/graph?g0.expr=x",
             "fingerprint": fingerprint(labels)}
    return {"receiver": "alertd", "status": "firing", "alerts": [alert], "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://alertmanager:9093", "version": "4",
            "groupKey": "{}:{alertname}", "truncatedAlerts": 0}


async def test_npd_xid_79_opens_one_incident_and_the_alertmanager_xid_joins_it(kube_apiserver, tmp_path) -> None:
    k, node = kube_apiserver, "npd-gpu-1"
    make_node(k, node)
    npd = require(start_npd, k, node, tmp_path)  # skipped when not built (fails under CI)
    svc = build_service(config(k, tmp_path), SqliteStore(tmp_path / "alertd.sqlite3"))
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    try:
        npd.kernel("NVRM: GPU at PCI:0000:3b:00: GPU-5f3e9c1a-0b7d-4c52-9e61-2a8f4d7b3c10")
        npd.kernel(XID79)

        async def condition() -> dict[str, Any] | None:  # NPD patches the node on its next sync (about 1 s)
            status = ok(k.request("GET", f"/api/v1/nodes/{node}"))["status"]
            cond = next(c for c in status["conditions"] if c["type"] == "GPUXidError")
            return cond if cond["status"] == "True" else None
        cond = await wait_for(condition, 60, "NPD's condition")
        assert cond["reason"] == "GPUXidCritical" and cond["message"] == XID79, cond
        incidents = await wait_for(lambda: _async([i for i in node_incidents(svc, node) if any(
            m.alertname == "KubeNodeGPUXid" for m in i.members.values())]), 30, "the condition's alert in an incident")
        assert len(node_incidents(svc, node)) == 1  # NPD's Events (the condition's and the rule's) joined it
        events = ok(k.request("GET", f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{node}"))
        assert any(e["source"]["component"] == "kernel-monitor" and "NVRM: Xid" in e["message"]
                   for e in events["items"]), events["items"]
        (inc,) = incidents
        members = {m.alertname: m for m in inc.members.values()}
        xid = members["KubeNodeGPUXid"]
        assert xid.signal.kind == "xid" and "79" in xid.signal.title, xid.signal
        assert xid.subject.gpu is not None and xid.subject.gpu.pci_bus_id == "0000:3b:00", xid.subject
        assert "Xid 79" in inc.title and node in inc.title, inc.title

        resp = await client.post(HOOK, json=webhook_xid(node, "79"))
        assert resp.status == 200, await resp.text()
        await wait_for(lambda: _async(any(m.alertname == "DCGMXidErrors" for i in node_incidents(svc, node)
                                          for m in i.members.values())), 15, "the webhook's Xid in an incident")
        (joined,) = node_incidents(svc, node)
        assert joined.id == inc.id and {"KubeNodeGPUXid", "DCGMXidErrors"} <= {m.alertname for m in joined.members.values()}
    finally:
        await client.close()
        npd.stop()


async def _async(value: Any) -> Any:
    return value


def make_job(k: KubeAPIServer, ns: str, name: str) -> dict[str, Any]:
    """A Job (suspended: no job controller runs here; its pods are created as the controller would)."""
    return ok(k.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"suspend": True, "parallelism": 3, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.08-py3",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}))


def rejected_pod(k: KubeAPIServer, ns: str, node: str, name: str, job: dict[str, Any]) -> None:
    """A GPU pod of a Job the kubelet refused: the pod Failed with the kubelet's reason, and its Event."""
    jm = job["metadata"]
    pod = ok(k.request("POST", f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"batch.kubernetes.io/job-name": jm["name"], "job-name": jm["name"]},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": jm["name"], "uid": jm["uid"],
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{
            "name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.08-py3",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}))
    pod["status"] = {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": f"Pod was rejected: {ADMISSION}"}
    ok(k.request("PUT", f"/api/v1/namespaces/{ns}/pods/{name}/status", pod))
    ok(k.request("POST", f"/api/v1/namespaces/{ns}/events", {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": ns},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": name, "uid": pod["metadata"]["uid"],
                           "apiVersion": "v1", "resourceVersion": pod["metadata"]["resourceVersion"]},
        "reason": "UnexpectedAdmissionError", "message": ADMISSION, "type": "Warning", "count": 1,
        "source": {"component": "kubelet", "host": node}, "firstTimestamp": now_iso(), "lastTimestamp": now_iso(),
        "reportingComponent": "kubelet", "reportingInstance": node}))


async def test_gpu_pods_rejected_on_a_ready_node_are_one_incident_within_30s(kube_apiserver, tmp_path) -> None:
    k, node, ns = kube_apiserver, "adm-gpu-1", "train-adm"
    make_node(k, node)
    ok(k.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    jobs = [make_job(k, ns, f"llama-ft-{j}") for j in range(2)]
    cfg = config(k, tmp_path)
    svc = build_service(cfg, SqliteStore(tmp_path / "alertd.sqlite3"), enricher=Enricher.from_settings(cfg.enrich))
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    try:
        await wait_for(lambda: _async(all(s.up for s in svc.kube_health.source.statuses())), 20, "watches up")
        started = time.monotonic()
        for i in range(6):
            rejected_pod(k, ns, node, f"llama-ft-{i % 2}-worker-{i}", jobs[i % 2])
        (inc,) = await wait_for(lambda: _async(node_incidents(svc, node)), 30, "the admission incident")
        assert time.monotonic() - started < 30
        assert inc.title.startswith("GPU unusable: 6 GPU pods rejected on a Ready node") and node in inc.title, inc.title
        (member,) = inc.members.values()
        assert member.signal.kind == "metrics_missing" and member.signal.detail == "gpu_unusable"
        assert f"{ns}/llama-ft-0" in member.signal.meaning and f"{ns}/llama-ft-1" in member.signal.meaning
        # enrichment reads the node's GPU pods, the rejected ones too: their Jobs are the incident's blast radius
        impact = await wait_for(lambda: _async(inc.annotations.get("jobs")), 30, "the jobs annotation")
        assert {(j["kind"], j["name"]) for j in impact} == {("Job", "llama-ft-0"), ("Job", "llama-ft-1")}, impact
    finally:
        await client.close()


def nvsentinel_condition(since: str) -> dict[str, str]:
    """A fatal health event as NVSentinel's platform connector writes it on the node: the check as the type."""
    return {"type": "SysLogsXIDError", "status": "True", "reason": "SysLogsXIDErrorIsNotHealthy",
            "message": f"ErrorCode:79 PCI:0000:17:00 GPU_UUID:GPU-a1b2c3d4 kernel: {XID79} Recommended Action=RESTART_BM;",
            "lastHeartbeatTime": since, "lastTransitionTime": since}


def aks_nvlink_condition(since: str) -> dict[str, str]:
    return {"type": "NVLinkStatusInactive", "status": "True", "reason": "NVLinkStatusInactive",
            "message": "NVLink status is inactive for GPU 4", "lastHeartbeatTime": since, "lastTransitionTime": since}


def recorded(svc: Service) -> list[dict[str, Any]]:
    """Every alert the kube-health source stores, as stored (the API server is shared: filter by node)."""
    assert svc.kube_health is not None
    source, seen = svc.kube_health.source, []
    receive = source.receive

    async def recording(body: bytes, alerts: int, received_at: Any = None) -> int:
        seen.extend(json.loads(body)["alerts"])
        return await receive(body, alerts, received_at)
    source.receive = recording
    return seen


def delivery_keys(alerts: list[dict[str, Any]], node: str) -> list[str]:
    return [f"{a['startsAt']}|{a['status']}|{a['fingerprint']}" for a in alerts if a["labels"].get("node") == node]


async def test_a_watch_cut_by_an_apiserver_restart_recovers_with_nothing_lost_or_doubled(kube_apiserver, tmp_path):
    k, node = kube_apiserver, "cut-gpu-1"
    make_node(k, node)
    svc = build_service(config(k, tmp_path), SqliteStore(tmp_path / "alertd.sqlite3"))
    stored = recorded(svc)
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    try:
        assert svc.kube_health is not None
        nodes, events = svc.kube_health.source.statuses()
        await wait_for(lambda: _async(nodes.up and events.up), 20, "watches up")
        set_condition(k, node, nvsentinel_condition(now_iso()))
        (inc,) = await wait_for(lambda: _async(node_incidents(svc, node)), 20, "the Xid incident")
        before = (nodes.relists, nodes.restarts, nodes.events)
        k.restart_apiserver()
        set_condition(k, node, aks_nvlink_condition(now_iso()))  # written as soon as the server is back
        await wait_for(lambda: _async(len(inc.members) == 2), 60, "the NVLink condition after the restart")
        assert (nodes.relists, nodes.restarts) != before[:2], "the watch never noticed the restart"
        resp = await client.get("/metrics")
        assert 'alertd_source_watch_up{watch="kube-health nodes"} 1.0' in await resp.text()
        await asyncio.sleep(2)  # anything a relist or a resumed watch sent twice has reached the engine by now
        assert {m.alertname for m in inc.members.values()} == {"KubeNodeGPUXid", "KubeNodeNVLinkInactive"}
        assert len(node_incidents(svc, node)) == 1
        # each condition's alert under one delivery key, however often a relist stored it again
        assert len(set(delivery_keys(stored, node))) == 2, delivery_keys(stored, node)
    finally:
        await client.close()


async def test_two_replicas_watch_once_and_give_one_incident_across_a_failover(kube_apiserver, make_store, tmp_path):
    """On each backend: SQLite shared by two processes' stores, and PostgreSQL as docs/ha.md runs replicas."""
    k, node = kube_apiserver, f"ha-gpu-{uuid.uuid4().hex[:6]}"
    make_node(k, node)
    cfg = config(k, tmp_path, ha={"lease_ttl": "1s", "renew_interval": "200ms"})
    first = build_service(cfg, make_store(), role="replica")
    second = build_service(cfg, make_store(), role="replica")
    await first.start()
    await second.start()
    stopped: Service | None = None
    try:
        leader, follower = (first, second) if first.leading else (second, first)
        assert leader.leading and not follower.leading
        assert leader.kube_health is not None and follower.kube_health is not None
        await wait_for(lambda: _async(all(s.up for s in leader.kube_health.source.statuses())), 20, "watches up")
        assert not any(s.up for s in follower.kube_health.source.statuses())  # one reader in the fleet
        set_condition(k, node, nvsentinel_condition(now_iso()))
        (inc,) = await wait_for(lambda: _async(node_incidents(leader, node)), 20, "the incident")
        await leader.stop()
        stopped = leader
        await wait_for(lambda: _async(follower.leading), 10, "the failover")
        await wait_for(lambda: _async(all(s.up for s in follower.kube_health.source.statuses())), 20, "new watches")
        set_condition(k, node, aks_nvlink_condition(now_iso()))
        await wait_for(lambda: _async(any(len(i.members) == 2 for i in node_incidents(follower, node))), 20,
                       "the new leader's alert in the same incident")
        (same,) = node_incidents(follower, node)
        assert same.id == inc.id
        # the new leader listed the node again: the Xid condition's alert was stored twice, taken once
        assert follower.metrics.duplicates._value.get() >= 1
        assert {m.alertname for m in same.members.values()} == {"KubeNodeGPUXid", "KubeNodeNVLinkInactive"}
    finally:
        for svc in (first, second):
            if svc is not stopped:
                await svc.stop()
