"""Realistic Alertmanager webhook v4 payloads from GPU clusters, for tests and benchmarks.

The label sets are what dcgm-exporter and our Prometheus rules produce: ``gpu,
UUID, pci_bus_id, device, modelName, Hostname`` (the exporter pod's name, not
the node's), ``node``, ``cluster``, ``DCGM_FI_DRIVER_VERSION``, ``alertname``,
``severity`` and, for Xid alerts, ``xid``. One webhook is what Alertmanager
sends for a group of one node: eight alerts, one per GPU.

Fingerprints are derived from the label set like Alertmanager's (a stable hash
of the labels), so the same GPU and alert always has the same fingerprint.
``startsAt`` then decides whether a delivery is new (a new occurrence) or a
redelivery of one already stored: alertd's idempotency key is
``fingerprint|startsAt|status``.

Plain Python with no test-framework dependency: the benchmark uses it too.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

GPUS_PER_NODE = 8
FIRING_END = "0001-01-01T00:00:00Z"
MODELS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H200", "NVIDIA B200")
DRIVERS = ("550.54.15", "535.161.08", "570.124.06")
# PCI bus numbers of the eight GPUs on an HGX baseboard.
PCI_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")

# (alertname, severity, extra labels): the GPU alerts of deploy/prometheus rules.
# Xid codes are ones DCGM can report (79, 119, 120 only reach us via kernel logs).
GPU_ALERTS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("GPUXidError", "critical", {"xid": "48"}),
    ("GPUXidError", "critical", {"xid": "94"}),
    ("GPUXidError", "critical", {"xid": "74"}),
    ("GPUXidError", "critical", {"xid": "63"}),
    ("GPUTemperatureHigh", "warning", {}),
    ("GPUClockEventThrottling", "warning", {"clock_event_reasons": "72"}),
    ("GPUEccDoubleBitErrors", "error", {}),
    ("GPURowRemapPending", "warning", {}),
    ("GPUNVLinkErrors", "error", {}),
)


def iso(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def fingerprint(labels: dict[str, str]) -> str:
    """A stable 16-hex-digit fingerprint of a label set (Alertmanager sends one like it)."""
    raw = "\xff".join(f"{k}\xfe{v}" for k, v in sorted(labels.items()))
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


def gpu_uuid(cluster: str, node: str, gpu: int) -> str:
    h = hashlib.md5(f"{cluster}/{node}/{gpu}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def dcgm_labels(cluster: str, node: str, gpu: int, *, node_index: int = 0) -> dict[str, str]:
    """The labels dcgm-exporter attaches to one GPU's series."""
    pod_suffix = hashlib.md5(node.encode()).hexdigest()[:5]
    return {
        "cluster": cluster,
        "node": node,
        "Hostname": f"dcgm-exporter-{pod_suffix}",
        "gpu": str(gpu),
        "UUID": gpu_uuid(cluster, node, gpu),
        "pci_bus_id": f"00000000:{PCI_BUSES[gpu % len(PCI_BUSES)]}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": MODELS[node_index % len(MODELS)],
        "DCGM_FI_DRIVER_VERSION": DRIVERS[node_index % len(DRIVERS)],
        "instance": f"10.{(node_index >> 16) & 255}.{(node_index >> 8) & 255}.{node_index & 255}:9400",
        "job": "dcgm-exporter",
        "namespace": "gpu-operator",
        "container": "nvidia-dcgm-exporter",
    }


def gpu_alert(cluster: str, node: str, gpu: int, kind: int = 0, *, starts_at: datetime,
              status: str = "firing", node_index: int = 0, extra: dict[str, str] | None = None) -> dict[str, Any]:
    """One alert as Alertmanager sends it; ``kind`` picks an entry of GPU_ALERTS."""
    alertname, severity, more = GPU_ALERTS[kind % len(GPU_ALERTS)]
    labels = {"alertname": alertname, "severity": severity, **dcgm_labels(cluster, node, gpu, node_index=node_index),
              **more, **(extra or {})}
    ends = FIRING_END if status == "firing" else iso(starts_at + timedelta(minutes=5))
    expr = f"{alertname}%7Bnode%3D%22{node}%22%7D"
    return {
        "status": status,
        "labels": labels,
        "annotations": {
            "summary": f"{alertname} on {node} GPU {gpu}",
            "description": f"{alertname} fired for GPU {gpu} ({labels['UUID']}) on {node}.",
        },
        "startsAt": iso(starts_at),
        "endsAt": ends,
        "generatorURL": f"http://prometheus.{cluster}.example:9090/graph?g0.expr={expr}&g0.tab=1",
        "fingerprint": fingerprint(labels),
    }


def webhook(alerts: list[dict[str, Any]], *, cluster: str, node: str, receiver: str = "alertd",
            status: str | None = None) -> dict[str, Any]:
    """A webhook v4 notification for one node's alert group."""
    names = sorted({a["labels"]["alertname"] for a in alerts})
    common = {"cluster": cluster, "node": node}
    if len(names) == 1:
        common["alertname"] = names[0]
    return {
        "receiver": receiver,
        "status": status or ("firing" if any(a["status"] == "firing" for a in alerts) else "resolved"),
        "alerts": alerts,
        "groupLabels": {"cluster": cluster, "node": node},
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": f"http://alertmanager.{cluster}.example:9093",
        "version": "4",
        "groupKey": f'{{}}/{{severity=~"warning|error|critical"}}:{{cluster="{cluster}", node="{node}"}}',
        "truncatedAlerts": 0,
    }


def node_webhook(cluster: str, node: str, *, starts_at: datetime, kind: int = 0, gpus: int = GPUS_PER_NODE,
                 node_index: int = 0, status: str = "firing", extra: dict[str, str] | None = None) -> dict[str, Any]:
    """Eight alerts of one kind, one per GPU of ``node`` (what a node-wide fault looks like)."""
    alerts = [gpu_alert(cluster, node, g, kind, starts_at=starts_at + timedelta(milliseconds=g), status=status,
                        node_index=node_index, extra=extra) for g in range(gpus)]
    return webhook(alerts, cluster=cluster, node=node)


def fingerprints(doc: dict[str, Any]) -> list[str]:
    return [a["fingerprint"] for a in doc["alerts"]]


def dedup_keys(doc: dict[str, Any]) -> list[str]:
    """alertd's idempotency keys (startsAt seconds to 3 places|status|fingerprint) for a webhook's alerts."""
    out = []
    for a in doc["alerts"]:
        ts = datetime.fromisoformat(a["startsAt"].replace("Z", "+00:00")).timestamp()
        out.append(f"{ts:.3f}|{a['status']}|{a['fingerprint']}")
    return out


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass
class UniqueWebhooks:
    """Webhooks whose alerts were never sent before: each one is new work for the store.

    Node names carry ``run`` so separate runs against one data dir never collide;
    every call moves to the next node of ``nodes`` (wrapping) and, once all nodes
    were used, to a later ``startsAt``, so the idempotency key is always new.
    With ``distinct_nodes`` every webhook is a node never seen before
    (fingerprints never repeat).
    """

    run: str = "r0"
    clusters: tuple[str, ...] = ("prod-a", "prod-b", "prod-c", "prod-d")
    nodes: int = 2000
    distinct_nodes: bool = False
    # When set, clusters are named "<run>-c<n>" with this many nodes each (the clusters tuple is ignored):
    # below the storm threshold (5 nodes), every node keeps its own incident.
    nodes_per_cluster: int = 0
    kinds: int = len(GPU_ALERTS)
    start: datetime = field(
        default_factory=lambda: datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1))
    seed: int = 1
    count: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def next(self) -> dict[str, Any]:
        i = self.count
        self.count += 1
        node_no = i if self.distinct_nodes else i % self.nodes
        cycle = 0 if self.distinct_nodes else i // self.nodes
        if self.nodes_per_cluster:
            cluster = f"{self.run}-c{node_no // self.nodes_per_cluster}"
            kind = node_no % self.kinds
        else:
            cluster = self.clusters[node_no % len(self.clusters)]
            kind = (node_no // len(self.clusters)) % self.kinds
        node = f"{self.run}-gpu-node-{node_no:06d}"
        starts = self.start + timedelta(seconds=cycle * 60 + self._rng.random())
        return node_webhook(cluster, node, starts_at=starts, kind=kind, node_index=node_no)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            yield self.next()


def bad_labels_webhook() -> dict[str, Any]:
    """A structurally complete webhook whose first alert has a non-string label value."""
    doc = node_webhook("prod-a", "bad-node", starts_at=datetime(2026, 1, 1, tzinfo=timezone.utc))
    doc["alerts"][0]["labels"]["gpu"] = 3
    return doc


def pod_alert(cluster: str, node: str, namespace: str, pod: str, *, starts_at: datetime,
              alertname: str = "KubePodCrashLooping", status: str = "firing") -> dict[str, Any]:
    """A non-GPU alert from kube-state-metrics rules (signal kind ``other``)."""
    labels = {"alertname": alertname, "severity": "warning", "cluster": cluster, "node": node,
              "namespace": namespace, "pod": pod, "container": "trainer", "job": "kube-state-metrics",
              "instance": "10.0.0.9:8080", "reason": "CrashLoopBackOff"}
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"Pod {namespace}/{pod} is crash looping",
                        "description": f"Pod {namespace}/{pod} (container trainer) restarted repeatedly on {node}."},
        "startsAt": iso(starts_at),
        "endsAt": FIRING_END if status == "firing" else iso(starts_at + timedelta(minutes=5)),
        "generatorURL": f"http://prometheus.{cluster}.example:9090/graph"
                        "?g0.expr=kube_pod_container_status_waiting_reason",
        "fingerprint": fingerprint(labels),
    }


def big_webhook(n_alerts: int, *, run: str = "big", starts_at: datetime | None = None) -> dict[str, Any]:
    """One notification carrying ``n_alerts`` distinct alerts: a whole job's pods crash looping,
    eight per node, grouped by alertname (so one webhook holds them all).

    Non-GPU alerts on purpose: this exercises the receiver and the store with a
    huge batch; GPU signals on that many nodes would be folded into one fleet
    incident, which is a different (engine) workload.
    """
    starts_at = starts_at or datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=30)
    alerts = []
    for i in range(n_alerts):
        node_no, slot = divmod(i, GPUS_PER_NODE)
        alerts.append(pod_alert(f"{run}-cluster", f"{run}-node-{node_no:05d}", "ml-training",
                                f"{run}-worker-{node_no:05d}-{slot}", starts_at=starts_at))
    doc = webhook(alerts, cluster=f"{run}-cluster", node="")
    doc["groupLabels"] = doc["commonLabels"] = {"alertname": "KubePodCrashLooping"}
    return doc
