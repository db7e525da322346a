"""Classification of real-world alert shapes: labels, annotations and the generatorURL as
Prometheus writes them (``/graph?g0.expr=<QueryEscape(expr)>&g0.tab=1``), each with the
signal, node, GPU and Xid alertd must make of it, and the stage that decides.

The shapes follow rule sets sites publish: dcgm-exporter examples, kube-prometheus-stack,
hand-written site rules (Xid only in the value and the summary), Hostname/instance-only
identity, plus the shipped names. Written for these tests, not copied.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote_plus

import pytest

from alertd.engine.classify import classify_explained
from alertd.core.model import Alert
from alertd.engine.normalize import NormalizeConfig, normalize
from alertd.receive.payload import fingerprint_of
from testkit.builders import at, shipped_rules

PROM = "http://prometheus-k8s-0:9090"
UUID = "GPU-5b3c1f2e-8d1a-4c7e-9f0b-2a6d4e8c1b3f"


def url(expr: str) -> str:
    return f"{PROM}/graph?g0.expr={quote_plus(expr)}&g0.tab=1"


def dcgm(node: str = "gpu-node-07", gpu: str = "3", *, hostname: str = "dcgm-exporter-x7k2p",
         with_node: bool = True, **extra: str) -> dict[str, str]:
    labels = {"gpu": gpu, "UUID": UUID, "pci_bus_id": "00000000:5D:00.0", "device": f"nvidia{gpu}",
              "modelName": "NVIDIA H100 80GB HBM3", "Hostname": hostname, "DCGM_FI_DRIVER_VERSION": "550.90.07",
              "instance": "10.4.7.21:9400", "job": "nvidia-dcgm-exporter", "namespace": "gpu-operator",
              "pod": "nvidia-dcgm-exporter-x7k2p", "container": "nvidia-dcgm-exporter"}
    if with_node:
        labels["node"] = node
    labels.update(extra)
    return labels


@dataclass
class Shape:
    id: str
    alertname: str
    labels: dict[str, str]
    expr: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    kind: str = "other"
    detail: str = ""
    node: str = ""
    gpu: str = ""
    xid: int | None = None
    stage: str = ""


XID_EXPR = "DCGM_FI_DEV_XID_ERRORS > 0"
SHAPES = [
    # ---- the shipped names (rules/signals.yml) keep working
    Shape("shipped-xid", "GPUXidError", dcgm(xid="79", severity="warning"),
          "count_values without () (\"xid\", DCGM_FI_DEV_XID_ERRORS > 0 and changes(DCGM_FI_DEV_XID_ERRORS[5m]) > 0)",
          kind="xid", node="gpu-node-07", gpu="3", xid=79, stage="signals"),
    Shape("shipped-exporter-down", "DCGMExporterDown", {"job": "dcgm-exporter", "node": "gpu-node-07",
          "instance": "10.4.7.21:9400", "severity": "warning"},
          'up{job="dcgm-exporter"} == 0 unless on (cluster, node) (max by (cluster, node) (up{job=~"node-exporter|kubelet"}) == 0)',
          kind="metrics_missing", detail="exporter_down", node="gpu-node-07", stage="signals"),
    Shape("shipped-cordon", "KubeNodeCordoned", {"node": "gpu-node-07", "severity": "info"},
          "max by (cluster, node) (kube_node_spec_unschedulable) == 1", kind="node_cordoned", node="gpu-node-07",
          stage="signals"),
    # ---- NVIDIA dcgm-exporter example style: names and exprs on DCGM fields
    Shape("nv-xid-label", "GpuXidError", dcgm(err_code="48", severity="critical"), "DCGM_FI_DEV_XID_ERRORS != 0",
          kind="xid", node="gpu-node-07", gpu="3", xid=48, stage="expression"),
    Shape("nv-xid-value-only", "GPUXidErrorsDetected", dcgm(severity="critical"), XID_EXPR,
          {"summary": "GPU 3 on gpu-node-07 reported XID 79", "description": "Value: 79"},
          kind="xid", node="gpu-node-07", gpu="3", xid=79, stage="expression"),
    Shape("nv-xid-count-metric", "XidErrorsSeen", dcgm(xid="94", window_size_in_ms="300000"),
          "max without (window_size_in_ms) (DCGM_EXP_XID_ERRORS_COUNT{xid!=\"0\"}) > 0",
          kind="xid", node="gpu-node-07", gpu="3", xid=94, stage="expression"),
    Shape("nv-temp", "GPUHighTemp", dcgm(severity="warning"), "DCGM_FI_DEV_GPU_TEMP > 85",
          kind="thermal", node="gpu-node-07", gpu="3", stage="expression"),
    Shape("nv-mem-temp", "HBMHot", dcgm(), "avg_over_time(DCGM_FI_DEV_MEMORY_TEMP[5m]) >= 95",
          kind="thermal", node="gpu-node-07", gpu="3", stage="expression"),
    Shape("nv-throttle-old", "ClocksThrottled", dcgm(), "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS > 8",
          kind="thermal", node="gpu-node-07", gpu="3", stage="expression"),
    Shape("nv-ecc-dbe", "UncorrectableMemoryErrors", dcgm(severity="critical"),
          "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", kind="ecc", node="gpu-node-07", gpu="3",
          stage="expression"),
    Shape("nv-ecc-agg", "EccAggregate", dcgm(), "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL > 0", kind="ecc",
          node="gpu-node-07", gpu="3", stage="expression"),
    Shape("nv-remap-fail", "RowRemapFailed", dcgm(), "DCGM_FI_DEV_ROW_REMAP_FAILURE == 1", kind="row_remap",
          node="gpu-node-07", gpu="3", stage="expression"),
    Shape("nv-uncorrectable-rows", "UncorrectableRows", dcgm(), "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS > 0",
          kind="row_remap", node="gpu-node-07", gpu="3", stage="expression"),
    Shape("nv-nvlink", "NVLinkTrouble", dcgm(), "rate(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[5m]) > 1",
          kind="nvlink", node="gpu-node-07", gpu="3", stage="expression"),
    Shape("nv-name-regex", "ThrottleAny", dcgm(),
          '{__name__=~"DCGM_FI_DEV_CLOCKS_EVENT_REASONS|DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"} >= 32',
          kind="thermal", node="gpu-node-07", gpu="3", stage="expression"),
    Shape("nv-absent", "DCGMMetricsAbsent", {"severity": "warning"}, "absent(DCGM_FI_DEV_GPU_UTIL)",
          kind="metrics_missing", detail="exporter_down", stage="expression"),
    Shape("nv-absent-node", "GPUTelemetryGone", {"node": "gpu-node-02"},
          'absent_over_time(DCGM_FI_DEV_GPU_TEMP{node="gpu-node-02"}[5m])',
          kind="metrics_missing", detail="exporter_down", node="gpu-node-02", stage="expression"),
    Shape("nv-count-drop", "GPUsMissing", {"node": "gpu-node-07", "severity": "critical"},
          "count by (node) (DCGM_FI_DEV_GPU_TEMP) < 8", kind="metrics_missing", detail="gpu_missing",
          node="gpu-node-07", stage="expression"),
    Shape("nv-count-vs-capacity", "GPUCountBelowCapacity", {"node": "gpu-node-07"},
          'count by (node) (DCGM_FI_DEV_GPU_UTIL) < on (node) kube_node_status_capacity{resource="nvidia_com_gpu"}',
          kind="metrics_missing", detail="gpu_missing", node="gpu-node-07", stage="expression"),
    Shape("nv-allocatable-drop", "GPUAllocatableDropped", {"node": "gpu-node-07"},
          'kube_node_status_allocatable{resource="nvidia_com_gpu"} < kube_node_status_capacity{resource="nvidia_com_gpu"}',
          kind="metrics_missing", detail="gpu_missing", node="gpu-node-07", stage="expression"),
    Shape("site-recorded-count", "GPUsLostOnNode", {"node": "gpu-node-07", "cluster": "prod"},
          "node:dcgm_gpus:count < on (cluster, node) max_over_time(node:dcgm_gpus:count[1h])",
          kind="metrics_missing", detail="gpu_missing", node="gpu-node-07", stage="expression"),
    Shape("nv-up-regex", "GPUExporterUnreachable", {"job": "gpu-operator/nvidia-dcgm-exporter",
          "instance": "10.4.7.21:9400", "node": "gpu-node-07"}, 'up{job=~".*dcgm.*"} == 0',
          kind="metrics_missing", detail="exporter_down", node="gpu-node-07", stage="expression"),
    # ---- kube-prometheus-stack style
    Shape("kps-not-ready", "KubeNodeNotReady", {"node": "gpu-node-11", "condition": "Ready", "status": "true",
          "job": "kube-state-metrics", "severity": "warning", "namespace": "monitoring"},
          'kube_node_status_condition{job="kube-state-metrics",condition="Ready",status="true"} == 0',
          kind="node_not_ready", node="gpu-node-11", stage="signals"),
    Shape("kps-unreachable", "KubeNodeUnreachable", {"node": "gpu-node-11", "key": "node.kubernetes.io/unreachable",
          "effect": "NoSchedule", "job": "kube-state-metrics", "severity": "warning"},
          '(kube_node_spec_taint{job="kube-state-metrics",key="node.kubernetes.io/unreachable",effect="NoSchedule"} '
          'unless ignoring(key,value) kube_node_spec_taint{job="kube-state-metrics",key=~"ToBeDeletedByClusterAutoscaler"}) == 1',
          kind="node_not_ready", node="gpu-node-11", stage="alertname"),
    Shape("kps-target-down-dcgm", "TargetDown", {"job": "nvidia-dcgm-exporter", "namespace": "gpu-operator",
          "service": "nvidia-dcgm-exporter", "severity": "warning"},
          '100 * (count(up == 0) BY (cluster, job, namespace, service) / count(up) BY (cluster, job, namespace, service)) > 10',
          kind="metrics_missing", detail="exporter_down", stage="alertname"),
    Shape("kps-target-down-other", "TargetDown", {"job": "node-exporter", "namespace": "monitoring",
          "severity": "warning"}, "100 * (count(up == 0) BY (job) / count(up) BY (job)) > 10", kind="other"),
    Shape("kps-readiness-expr", "NodeReadyLost", {"node": "gpu-node-04"},
          'kube_node_status_condition{condition="Ready",status=~"false|unknown"} == 1',
          kind="node_not_ready", node="gpu-node-04", stage="expression"),
    Shape("kps-unschedulable-taint", "NodeTaintedUnschedulable", {"node": "gpu-node-04"},
          'kube_node_spec_taint{key="node.kubernetes.io/unschedulable",effect="NoSchedule"} == 1',
          kind="node_cordoned", node="gpu-node-04", stage="expression"),
    Shape("kps-unschedulable-spec", "NodeDrained", {"node": "gpu-node-04", "severity": "info"},
          "kube_node_spec_unschedulable != 0", kind="node_cordoned", node="gpu-node-04", stage="expression"),
    Shape("kps-crashloop", "KubePodCrashLooping", {"namespace": "ml", "pod": "trainer-0", "container": "pytorch",
          "node": "gpu-node-04"}, 'max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff"}[5m]) >= 1',
          kind="other", node="gpu-node-04"),
    # ---- hand-written site rules: Xid only in the value and the summary / description / message
    Shape("site-xid-summary", "GPUHardwareFault", dcgm(severity="page"), "DCGM_FI_DEV_XID_ERRORS > 0",
          {"summary": "Xid 79 on gpu-node-07 gpu 3"}, kind="xid", node="gpu-node-07", gpu="3", xid=79,
          stage="expression"),
    Shape("site-xid-colon", "gpu_problem", dcgm(), "", {"summary": "XID: 63 detected"}, kind="xid",
          node="gpu-node-07", gpu="3", xid=63, stage="annotation"),
    Shape("site-xid-equals", "GpuErr", dcgm(), "", {"description": "driver reported xid=13 for pid 4411"},
          kind="xid", node="gpu-node-07", gpu="3", xid=13, stage="annotation"),
    Shape("site-xid-error-word", "NodeGpuError", dcgm(), "", {"message": "Xid error 119 (GSP timeout)"},
          kind="xid", node="gpu-node-07", gpu="3", xid=119, stage="annotation"),
    Shape("site-xid-float-value", "GPUFault", dcgm(), "DCGM_FI_DEV_XID_ERRORS > 0",
          {"summary": "GPU fault", "description": "Last XID errors value is 74.0"}, kind="xid",
          node="gpu-node-07", gpu="3", xid=74, stage="expression"),
    Shape("site-xid-kernel-line", "KernelXid", {"node": "gpu-node-07"}, "",
          {"summary": "NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
          kind="xid", node="gpu-node-07", xid=79, stage="annotation"),
    Shape("site-xid-no-code", "GPUXidSeen", dcgm(severity="critical"), "changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0",
          {"summary": "GPU {{ $labels.gpu }} reported an Xid"}, kind="xid", node="gpu-node-07", gpu="3", xid=None,
          stage="expression"),
    Shape("site-xid-label-only", "SiteXidAlert", dcgm(xid="95"), "", kind="xid", node="gpu-node-07", gpu="3",
          xid=95, stage="label"),
    Shape("site-field-label", "GpuFieldAlert", dcgm(metric="DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"), "",
          kind="ecc", node="gpu-node-07", gpu="3", stage="label"),
    Shape("site-field-label-xid", "GpuFieldAlert", dcgm(field_name="DCGM_FI_DEV_XID_ERRORS"), "",
          {"summary": "value 43"}, kind="xid", node="gpu-node-07", gpu="3", xid=None, stage="label"),
    Shape("site-exporter-container", "DcgmPodRestarting", {"container": "nvidia-dcgm-exporter",
          "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p", "node": "gpu-node-07"},
          "increase(kube_pod_container_status_restarts_total[15m]) > 3", kind="metrics_missing",
          detail="exporter_down", node="gpu-node-07", stage="label"),
    Shape("site-unparseable-expr", "WeirdGpuRule", dcgm(), "DCGM_FI_DEV_GPU_TEMP{ > 1", kind="other",
          node="gpu-node-07", gpu="3"),
    # ---- Hostname / instance as the only node identity
    Shape("host-only-xid", "GPUXidError", dcgm(with_node=False, hostname="gpu-node-21", xid="48"),
          XID_EXPR, kind="xid", node="gpu-node-21", gpu="3", xid=48, stage="signals"),
    Shape("host-lowercase", "GpuTooHot", {"hostname": "gpu-node-22", "gpu": "1", "UUID": UUID},
          "DCGM_FI_DEV_GPU_TEMP >= 90", kind="thermal", node="gpu-node-22", gpu="1", stage="expression"),
    Shape("instance-only-up", "DcgmScrapeFailing", {"job": "dcgm", "instance": "gpu-node-23:9400"},
          'up{job="dcgm"} == 0', kind="metrics_missing", detail="exporter_down", node="gpu-node-23",
          stage="expression"),
    Shape("instance-ipv6", "DcgmScrapeFailing6", {"job": "dcgm", "instance": "[fd00::17]:9400"},
          'up{job="dcgm"} < 1', kind="metrics_missing", detail="exporter_down", node="fd00::17",
          stage="expression"),
    Shape("instance-only-xid-text", "XidOnHost", {"instance": "gpu-node-24:9400", "gpu": "6"},
          "DCGM_FI_DEV_XID_ERRORS > 0", {"summary": "gpu-node-24 GPU 6 XID 48"}, kind="xid", node="gpu-node-24",
          gpu="6", xid=48, stage="expression"),
    # ---- names well known in the ecosystem, no usable expression
    Shape("known-name-xid-text", "GPUXIDError", dcgm(), "", {"summary": "Xid 31"}, kind="xid",
          node="gpu-node-07", gpu="3", xid=31, stage="alertname"),
    Shape("known-name-ecc", "GPUDoubleBitEccErrors", dcgm(), "", kind="ecc", node="gpu-node-07", gpu="3",
          stage="alertname"),
    # ---- things that must stay `other`
    Shape("other-cpu", "NodeHighCPU", {"instance": "gpu-node-07:9100", "job": "node-exporter"},
          'avg by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[5m])) > 0.9', kind="other",
          node="gpu-node-07"),
    Shape("other-xid-word-without-code", "DocsMention", {"node": "n9"}, "vector(1)",
          {"summary": "Read the Xid catalogue"}, kind="other", node="n9"),
]


def _alert(shape: Shape) -> Alert:
    labels = {"alertname": shape.alertname, **shape.labels}
    return Alert(fingerprint=fingerprint_of(labels), status="firing", labels=labels,
                 annotations=shape.annotations, starts_at=at(0), ends_at=None,
                 generator_url=url(shape.expr) if shape.expr else "")


def test_the_table_is_big_enough():
    assert len(SHAPES) >= 40
    assert len({s.id for s in SHAPES}) == len(SHAPES)


@pytest.mark.parametrize("shape", SHAPES, ids=[s.id for s in SHAPES])
def test_shape(shape: Shape):
    ncfg = NormalizeConfig()
    a = normalize(_alert(shape), ncfg)
    d = classify_explained(a, shipped_rules(), ncfg)
    got = (d.signal.kind, d.signal.detail if shape.detail else "", a.subject.node,
           a.subject.gpu.index if a.subject.gpu else "", d.signal.xid)
    assert got == (shape.kind, shape.detail, shape.node, shape.gpu, shape.xid), d
    if shape.stage:
        assert d.stage == shape.stage, d
    if shape.kind == "xid" and shape.xid is None:
        assert d.signal.title == "Xid (code unknown)" and d.signal.category == "hardware"
        assert d.signal.severity == shape.labels.get("severity", "warning")
    if shape.kind != "other":
        assert d.signal.basis.startswith(d.stage), d.signal.basis
