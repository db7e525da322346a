"""Node conditions, Events and admission failures -> alerts -> the engine, without an API server.

Objects are shaped as their producers write them: node-problem-detector's condition (type from the shipped
deploy/node-problem-detector/kernel-monitor-gpu.json, message the kernel line it matched), the EKS node
monitoring agent's AcceleratedHardwareReady (a Ready-style condition, False with an Xid reason), NPD's
Event (source.component kernel-monitor, involvedObject the Node) and the kubelet's UnexpectedAdmissionError
Event (involvedObject the Pod, source.host the node). The alerts go through the receive path's own decoder
and the engine, and the delivery keys show what the engine would drop."""
from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from typing import Any

from alertd.engine.pipeline import Engine
from alertd.receive.payload import delivery_key, encode_webhook, read_stored
from alertd.sources.admission import AdmissionTracker
from alertd.sources.kube_health import KubeHealthSource, job_name
from alertd.sources.settings import KubeHealthSettings
from testkit.builders import shipped_rules

NOW = datetime(2026, 12, 6, 4, 40, tzinfo=timezone.utc)
RULES = shipped_rules()
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2817, name=python3, GPU has fallen off the bus."


def ts(seconds: float = 0) -> str:
    return (NOW + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, *conditions: dict[str, str], ready: str = "True") -> dict[str, Any]:
    conds = [{"type": "Ready", "status": ready, "reason": "KubeletReady", "lastTransitionTime": ts(-3600)}, *conditions]
    return {"metadata": {"name": name, "resourceVersion": "1"}, "status": {"conditions": conds}}


def npd_condition(status: str, since: float = 0) -> dict[str, str]:
    if status == "True":
        return {"type": "GPUXidError", "status": "True", "reason": "GPUXidCritical", "message": XID79,
                "lastHeartbeatTime": ts(since), "lastTransitionTime": ts(since)}
    return {"type": "GPUXidError", "status": "False", "reason": "NoGPUXidError",
            "message": "no critical NVRM Xid in the kernel log", "lastTransitionTime": ts(since)}


class Api:
    def __init__(self, pods: dict[tuple[str, str], dict[str, Any]] | None = None):
        self.pods = pods or {}

    async def read(self, api_name: str, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.pods[(args[1], args[0])]

    async def stream(self, api_name: str, method: str, **kwargs: Any) -> Any:
        raise AssertionError("not watched here")


def source(api: Api | None = None, clock: datetime = NOW) -> tuple[KubeHealthSource, list[dict[str, Any]]]:
    stored: list[dict[str, Any]] = []

    async def receive(body: bytes, alerts: int, received_at: datetime | None = None) -> int:
        doc = json.loads(body)
        assert len(doc["alerts"]) == alerts
        stored.extend(doc["alerts"])
        return len(stored)

    return KubeHealthSource(KubeHealthSettings(enabled=True, cluster="prod"), lambda: RULES.kube_health, api or Api(),
                            receive, clock=lambda: clock), stored


def keys(alerts: list[dict[str, Any]]) -> list[str]:
    return [delivery_key(a) for a in read_stored(encode_webhook(alerts, "kube-health"), NOW).alerts]


async def test_an_npd_condition_fires_once_resolves_once_and_a_relist_or_new_leader_repeats_its_key() -> None:
    src, stored = source()
    await src.node_seen(node("gpu-7", npd_condition("False", -600)))
    assert stored == []  # healthy: nothing to say
    await src.node_seen(node("gpu-7", npd_condition("True")))
    await src.node_seen(node("gpu-7", npd_condition("True")))  # NPD's heartbeat: the same condition again
    (fired,) = stored
    assert fired["labels"] == {"alertname": "KubeNodeGPUXid", "source": "kubernetes", "node": "gpu-7",
                               "producer": "node-problem-detector", "condition": "GPUXidError", "cluster": "prod"}
    assert fired["annotations"]["description"] == XID79 and fired["startsAt"] == ts()
    leader, again = source()  # a new leader (or a replica after failover) lists the same node
    await leader.node_seen(node("gpu-7", npd_condition("True")))
    assert keys(again) == keys(stored)  # the engine drops the copy
    await src.node_seen(node("gpu-7", npd_condition("False", 300)))
    assert [a["status"] for a in stored] == ["firing", "resolved"] and stored[1]["fingerprint"] == fired["fingerprint"]


async def test_the_condition_gives_xid_and_pci_as_a_log_alert_does_and_joins_the_webhooks_incident() -> None:
    src, stored = source()
    await src.node_seen(node("gpu-7", npd_condition("True")))
    engine = Engine(RULES)
    webhook = {"alertname": "DCGMXidErrors", "node": "gpu-7", "cluster": "prod", "xid": "79", "gpu": "3",
               "pci_bus_id": "00000000:3B:00.0", "severity": "critical"}
    alerts = read_stored(encode_webhook(stored, "kube-health"), NOW).alerts
    alerts += read_stored(encode_webhook([{"status": "firing", "labels": webhook, "annotations": {},
                                           "startsAt": ts(20)}], "am"), NOW).alerts
    engine.ingest(alerts, NOW + timedelta(seconds=30))
    (inc,) = engine.state.incidents.values()
    kube = next(m for m in inc.members.values() if m.alertname == "KubeNodeGPUXid")
    assert kube.signal.kind == "xid" and "79" in kube.signal.title
    # the kernel line names the bus, not the function (PCI:0000:3b:00), as for log alerts
    assert kube.subject.gpu is not None and kube.subject.gpu.pci_bus_id == "0000:3b:00"
    assert len(inc.members) == 2 and "Xid 79" in inc.title


async def test_eks_accelerated_hardware_ready_false_with_an_xid_reason_names_the_code() -> None:
    src, stored = source()
    await src.node_seen(node("ip-10-0-12-7.ec2.internal", {
        "type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error",
        "message": "GPU 0000:3b:00.0 reported Xid 79", "lastTransitionTime": ts()}))
    (fired,) = stored
    assert fired["labels"]["xid"] == "79" and fired["labels"]["producer"] == "eks-node-monitoring-agent"
    (a,) = read_stored(encode_webhook(stored, "kube-health"), NOW).alerts
    assert Engine(RULES).prepare(a).signal.kind == "xid"


async def test_a_node_deleted_while_bad_resolves_and_other_conditions_are_ignored() -> None:
    src, stored = source()
    await src.node_seen(node("gpu-8", npd_condition("True"), {"type": "MemoryPressure", "status": "True",
                                                            "lastTransitionTime": ts()}))
    assert [a["labels"]["condition"] for a in stored] == ["GPUXidError"]
    await src.node_gone("gpu-8")
    assert [a["status"] for a in stored] == ["firing", "resolved"]


def npd_event(node_name: str, message: str, seconds: float = 0) -> dict[str, Any]:
    return {"metadata": {"name": f"{node_name}.187e3c", "namespace": "default"}, "type": "Warning",
            "involvedObject": {"kind": "Node", "name": node_name, "uid": node_name}, "reason": "GPUXidCritical",
            "message": message, "source": {"component": "kernel-monitor", "host": node_name},
            "firstTimestamp": ts(seconds), "lastTimestamp": ts(seconds), "count": 1}


async def test_an_npd_event_fires_and_resolves_and_old_or_unrelated_events_are_skipped() -> None:
    src, stored = source()
    await src.event_seen(npd_event("gpu-7", XID79))
    assert [a["status"] for a in stored] == ["firing", "resolved"]
    assert stored[0]["labels"]["alertname"] == "KubeNodeGPUXidEvent"
    await src.event_seen(npd_event("gpu-7", XID79, -7200))  # a first list's hour-old Event
    await src.event_seen(npd_event("gpu-7", "task python3:2817 blocked for more than 120 seconds."))
    assert len(stored) == 2


def admission_event(pod: str, node_name: str, seconds: float) -> dict[str, Any]:
    return {"metadata": {"name": f"{pod}.18a2", "namespace": "train"}, "type": "Warning",
            "involvedObject": {"kind": "Pod", "namespace": "train", "name": pod}, "reason": "UnexpectedAdmissionError",
            "message": "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
                       "Requested: 1, Available: 0, which is unexpected",
            "source": {"component": "kubelet", "host": node_name}, "firstTimestamp": ts(seconds),
            "lastTimestamp": ts(seconds), "count": 1}


async def test_pods_rejected_for_a_gpu_on_a_ready_node_give_one_alert_naming_count_and_jobs() -> None:
    pods = {("train", f"bert-{i}"): {"metadata": {"labels": {"batch.kubernetes.io/job-name": f"bert-{i % 2}"}}}
            for i in range(4)}
    src, stored = source(Api(pods))
    await src.node_seen(node("gpu-9"))
    for i in range(4):
        await src.event_seen(admission_event(f"bert-{i}", "gpu-9", i))
    assert src.admission is not None
    assert src.admission.due(NOW + timedelta(seconds=3), src.ready) == []  # threshold reached at +2s, settling
    (fired,) = src.admission.due(NOW + timedelta(seconds=8), src.ready)
    assert fired["annotations"]["summary"] == "GPU unusable: 4 GPU pods rejected on a Ready node"
    assert fired["annotations"]["jobs"] == "train/bert-0, train/bert-1"
    assert datetime.fromisoformat(fired["startsAt"]) == NOW  # the first rejection
    (a,) = read_stored(encode_webhook([fired], "kube-health"), NOW).alerts
    engine = Engine(RULES)
    engine.ingest([a], NOW + timedelta(seconds=8))
    (inc,) = engine.state.incidents.values()
    assert inc.title == "GPU unusable: 4 GPU pods rejected on a Ready node on gpu-9", inc.title
    (resolved,) = src.admission.due(NOW + timedelta(minutes=11), src.ready)
    assert resolved["status"] == "resolved" and resolved["fingerprint"] == fired["fingerprint"]


def test_rejections_on_a_not_ready_node_or_below_the_threshold_raise_nothing() -> None:
    rule = RULES.kube_health.admission
    assert rule is not None
    tracker = AdmissionTracker(rule)
    for i in range(5):
        tracker.rejected("down-1", f"ns/p{i}", "ns/j", NOW, "m")
    tracker.rejected("busy-1", "ns/p0", "ns/j", NOW, "m")
    tracker.rejected("busy-1", "ns/p0", "ns/j", NOW, "m")  # the same pod again: one pod
    assert tracker.due(NOW + timedelta(seconds=30), {"down-1": False, "busy-1": True}) == []
    assert tracker.due(NOW + timedelta(hours=1), {}) == [] and tracker.bursts == {}  # forgotten: bounded


def test_memory_per_node_is_bounded_by_max_pods() -> None:
    rule = RULES.kube_health.admission
    assert rule is not None
    tracker = AdmissionTracker(rule)
    for i in range(rule.max_pods * 3):
        tracker.rejected("gpu-1", f"ns/p{i}", "ns/j", NOW, "m")
    assert len(tracker.bursts["gpu-1"].pods) == rule.max_pods


def test_a_pods_job_from_its_labels_or_controller() -> None:
    assert job_name({"metadata": {"labels": {"job-name": "a"}}}) == "a"
    assert job_name({"metadata": {"ownerReferences": [{"kind": "Job", "name": "b", "controller": True}]}}) == "b"
    assert job_name({}) == ""


async def test_xid_condition_admission_failures_and_cordon_are_one_incident_titled_by_the_xid_in_any_order() -> None:
    """dcgm-exporter's Xid 79 (webhook), NPD's condition for the same kernel line, the GPU pods failing admission
    and kube-state-metrics' cordon alert, in every order of arrival: one incident, titled by the Xid."""
    pods = {("train", f"bert-{i}"): {"metadata": {"labels": {"job-name": "bert"}}} for i in range(3)}
    src, stored = source(Api(pods))
    await src.node_seen(node("gpu-7", npd_condition("True")))
    for i in range(3):
        await src.event_seen(admission_event(f"bert-{i}", "gpu-7", i))
    assert src.admission is not None
    stored.extend(src.admission.due(NOW + timedelta(seconds=10), src.ready))
    condition, admission = stored
    xid = {"status": "firing", "startsAt": ts(5), "annotations": {}, "labels": {
        "alertname": "DCGMXidErrors", "node": "gpu-7", "cluster": "prod", "xid": "79", "gpu": "3", "severity": "critical"}}
    cordon = {"status": "firing", "startsAt": ts(60), "annotations": {}, "labels": {
        "alertname": "KubeNodeCordoned", "node": "gpu-7", "cluster": "prod", "severity": "info"}}
    wires = [condition, admission, xid, cordon]
    for order in ([0, 1, 2, 3], [1, 3, 0, 2], [3, 1, 2, 0], [2, 3, 1, 0]):
        engine = Engine(RULES)
        for step, i in enumerate(order):
            engine.ingest(read_stored(encode_webhook([wires[i]], "r"), NOW).alerts, NOW + timedelta(seconds=step))
        (inc,) = engine.state.incidents.values()
        assert len(inc.members) == 4 and "Xid 79" in inc.title and "gpu-7" in inc.title, (order, inc.title)


class ListingApi(Api):
    """Lists one node with a bad condition (Events: none); its watches stay open with nothing to say."""

    async def read(self, api_name: str, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        items = [node("gpu-7", npd_condition("True"))] if method == "list_node" else []
        return {"items": items, "metadata": {"resourceVersion": "10"}}

    async def stream(self, api_name: str, method: str, **kwargs: Any) -> Any:
        await asyncio.Event().wait()


async def test_each_leadership_period_raises_the_bad_conditions_again() -> None:
    """A run cancelled (leadership lost) may have left an alert unstored: the next run starts from nothing."""
    src, stored = source(ListingApi())
    for expected in (1, 2):
        task = asyncio.create_task(src.run())
        for _ in range(100):
            if len(stored) == expected:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert len(stored) == expected
    assert keys(stored[:1]) == keys(stored[1:])  # the same alert: the engine drops the second


def test_the_admission_window_and_settle_read_as_durations_and_a_bad_one_is_told_at_its_place(tmp_path) -> None:
    import pytest
    import yaml

    from alertd.core.errors import InvalidDocument
    from alertd.rules.ruleset import load_rules

    admission = {"reason": "UnexpectedAdmissionError", "resource": "nvidia\\.com/gpu", "alertname": "KubeGPUPodsRejected",
                 "window": "15m"}
    (tmp_path / "sources.yml").write_text(yaml.safe_dump({"kube_health": {"admission": admission}}))
    rule = load_rules([tmp_path]).kube_health.admission
    assert rule is not None and (rule.window, rule.settle) == (timedelta(minutes=15), timedelta(seconds=5))
    (tmp_path / "sources.yml").write_text(yaml.safe_dump({"kube_health": {"admission": {**admission, "settle": "1m1m"}}}))
    with pytest.raises(InvalidDocument) as raised:
        load_rules([tmp_path])
    (problem,) = raised.value.problems
    assert problem.line and problem.path == "kube_health.admission.settle" and "'1m1m'" in problem.message
