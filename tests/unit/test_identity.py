"""Which node an alert is about, with the labels real sites send: stock dcgm-exporter on Kubernetes
(Hostname and pod = the exporter pod, instance = its pod IP, exported_* = the workload), a hostNetwork
exporter, kube-state-metrics, node-exporter on bare metal, and log alerts (Loki, Graylog) carrying the
kernel's NVRM line."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from alertd.engine.pipeline import Engine
from alertd.core.model import Alert
from alertd.engine.identity import Pointer, is_exporter_pod, pointers
from alertd.engine.normalize import NormalizeConfig, subject_of, xid_source
from testkit.builders import alert, at, shipped_rules

# One series of DCGM_FI_DEV_XID_ERRORS as the GPU Operator's ServiceMonitor scrapes it (no node relabel):
# the target's pod/namespace/container are the exporter's, the exporter's own pod mapping became exported_*.
STOCK = {
    "DCGM_FI_DRIVER_VERSION": "550.54.15", "Hostname": "nvidia-dcgm-exporter-x7k2p", "UUID":
    "GPU-5f3e9c1a-0b7d-4c52-9e61-2a8f4d7b3c10", "container": "nvidia-dcgm-exporter", "device": "nvidia3",
    "endpoint": "gpu-metrics", "gpu": "3", "instance": "10.244.3.17:9400", "job": "nvidia-dcgm-exporter",
    "modelName": "NVIDIA H100 80GB HBM3", "namespace": "gpu-operator", "pci_bus_id": "00000000:3B:00.0",
    "pod": "nvidia-dcgm-exporter-x7k2p", "service": "nvidia-dcgm-exporter", "exported_container": "pytorch",
    "exported_namespace": "ml-training", "exported_pod": "trainer-worker-0", "cluster": "prod",
}
KSM = {"node": "gpu-node-17", "instance": "10.244.1.5:8080", "job": "kube-state-metrics", "namespace": "monitoring",
       "pod": "kube-state-metrics-7d9c5b8f6-q2w8z", "container": "kube-state-metrics", "service": "kube-state-metrics"}
NVRM_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
NVRM_13 = "NVRM: Xid (PCI:0000:86:00): 13, pid=20313, name=python3, Graphics Exception: ESR 0x405840=0x0"


@dataclass
class Index:
    """The engine's view of the service's Kubernetes index: answers only."""

    pods: dict[tuple[str, str], str] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)
    generation: int = 0

    def node_of_pod(self, cluster: str, namespace: str, pod: str) -> str:
        return self.pods.get((namespace, pod), "")

    def node_of_address(self, cluster: str, address: str) -> str:
        return self.addresses.get(address, "")

    def is_node(self, cluster: str, name: str) -> bool | None:
        return None  # no node list: only names are judged


CFG = NormalizeConfig()


def test_stock_dcgm_labels_without_an_answer_leave_the_node_unknown_never_the_pod_name() -> None:
    s = subject_of(STOCK, CFG)
    assert s.node == "" and s.node_source == ""
    assert s.origin == "exporter pod gpu-operator/nvidia-dcgm-exporter-x7k2p"
    assert (s.namespace, s.pod, s.container) == ("ml-training", "trainer-worker-0", "pytorch")  # the workload
    assert s.gpu is not None and s.gpu.pci_bus_id == "0000:3b:00" and s.gpu.index == "3"


def test_stock_dcgm_labels_resolved_by_the_exporter_pods_node() -> None:
    index = Index(pods={("gpu-operator", "nvidia-dcgm-exporter-x7k2p"): "gpu-node-17"})
    s = subject_of(STOCK, CFG, lookup=index)
    assert (s.node, s.node_source, s.origin) == ("gpu-node-17", "kubernetes pod gpu-operator/nvidia-dcgm-exporter-x7k2p", "")


def test_stock_dcgm_labels_resolved_by_the_instance_address() -> None:
    s = subject_of(STOCK, CFG, lookup=Index(addresses={"10.244.3.17": "gpu-node-17"}))
    assert s.node == "gpu-node-17" and s.node_source.startswith("instance 10.244.3.17:9400")


@pytest.mark.parametrize("key, source", [("nvidia-dcgm-exporter-x7k2p", "map Hostname=nvidia-dcgm-exporter-x7k2p"),
                                         ("10.244.3.17", "map instance=10.244.3.17:9400"),
                                         ("10.244.3.17:9400", "map instance=10.244.3.17:9400")])
def test_a_configured_map_wins_over_kubernetes(key: str, source: str) -> None:
    cfg = NormalizeConfig(node_map={key: "gpu-node-9"})
    s = subject_of(STOCK, cfg, lookup=Index(pods={("gpu-operator", "nvidia-dcgm-exporter-x7k2p"): "gpu-node-17"}))
    assert (s.node, s.node_source) == ("gpu-node-9", source)


def test_without_the_pod_label_the_hostname_is_looked_up_in_every_namespace() -> None:
    labels = {k: v for k, v in STOCK.items() if k not in ("pod", "namespace", "instance")}
    assert pointers(labels, CFG.node_labels, CFG.exporter_pod_pattern) == [
        Pointer("pod", "", "nvidia-dcgm-exporter-x7k2p")]
    s = subject_of(labels, CFG, lookup=Index(pods={("", "nvidia-dcgm-exporter-x7k2p"): "gpu-node-2"}))
    assert (s.node, s.node_source) == ("gpu-node-2", "kubernetes pod nvidia-dcgm-exporter-x7k2p")


def test_what_the_index_is_asked_for() -> None:
    assert pointers(STOCK, CFG.node_labels, CFG.exporter_pod_pattern) == [
        Pointer("pod", "gpu-operator", "nvidia-dcgm-exporter-x7k2p"), Pointer("address", "", "10.244.3.17")]
    assert pointers({**STOCK, "node": "gpu-node-17"}, CFG.node_labels, CFG.exporter_pod_pattern) == []
    assert pointers(KSM, CFG.node_labels, CFG.exporter_pod_pattern) == []
    assert pointers({"instance": "10.0.0.5:9100"}, CFG.node_labels, CFG.exporter_pod_pattern) == [
        Pointer("address", "", "10.0.0.5")]


def test_host_network_exporter_and_kube_state_metrics_name_their_node() -> None:
    host_net = {**STOCK, "Hostname": "gpu-node-4", "instance": "10.0.0.4:9400", "pod": "nvidia-dcgm-exporter-abcde"}
    s = subject_of(host_net, CFG)
    assert (s.node, s.node_source) == ("gpu-node-4", "label Hostname")
    s = subject_of(KSM, CFG)
    assert (s.node, s.node_source) == ("gpu-node-17", "label node")


def test_bare_metal_instance_stays_the_node_when_no_exporter_pod_is_in_sight() -> None:
    s = subject_of({"instance": "10.0.0.5:9100", "job": "node"}, CFG)
    assert (s.node, s.node_source) == ("10.0.0.5", "label instance (port stripped)")
    s = subject_of({"instance": "gpu-node-6:9100"}, CFG, lookup=Index(addresses={"gpu-node-6": "gpu-node-6"}))
    assert s.node == "gpu-node-6"


@pytest.mark.parametrize("name, expected", [
    ("dcgm-exporter-x7k2p", True), ("nvidia-dcgm-exporter-x7k2p", True), ("kps-dcgm-exporter-4mzrt", True),
    ("gpu-node-17", False), ("dcgm-exporter", False), ("dcgm-exporter-x7k2p-extra", False),
])
def test_exporter_pod_names(name: str, expected: bool) -> None:
    assert is_exporter_pod(name, CFG.exporter_pod_pattern) is expected


@pytest.mark.parametrize("labels, annotations, source", [
    ({"host": "gpu-node-3"}, {"description": NVRM_79}, "log host (label host)"),  # Loki ruler, line in the text
    ({"source": "gpu-node-3"}, {"message": "kernel: [1234.5] " + NVRM_79}, "log host (label source)"),  # Graylog
    ({"hostname": "gpu-node-3", "line": NVRM_79}, {"summary": "Xid in the kernel log"}, "label hostname"),
    ({"instance": "gpu-node-3"}, {"summary": NVRM_79}, "label instance"),
])
def test_log_alerts_name_the_node_and_the_gpu(labels: dict, annotations: dict, source: str) -> None:
    a = alert("GPUXidLog", annotations=annotations, **labels)
    s = subject_of(a.labels, CFG, a.annotations)
    assert (s.node, s.node_source) == ("gpu-node-3", source)
    assert s.gpu is not None and s.gpu.pci_bus_id == "0000:3b:00"
    assert xid_source(a, CFG)[0] == 79


def test_log_xids_of_two_nodes_are_two_incidents_titled_with_node_and_gpu() -> None:
    eng = Engine(shipped_rules())
    a = alert("GPUXidLog", host="gpu-node-a", annotations={"description": NVRM_79})
    b = alert("GPUXidLog", host="gpu-node-b", annotations={"description": NVRM_13})
    eng.ingest([a, b], at(0))
    incidents = sorted(eng.state.incidents.values(), key=lambda i: i.title)
    assert len(incidents) == 2, [i.key for i in incidents]
    assert incidents[0].title == "Xid 13: Graphics engine exception on gpu-node-b GPU 0000:86:00"
    assert incidents[1].title == "Xid 79: GPU has fallen off the bus on gpu-node-a GPU 0000:3b:00"


def test_node_less_alerts_of_two_exporter_pods_never_share_an_incident() -> None:
    eng = Engine(shipped_rules())
    one = Alert(fingerprint="f1", status="firing", labels={**STOCK, "alertname": "GPUXidError", "xid": "79"},
                annotations={}, starts_at=at(0), ends_at=None, received_at=at(0))
    other_labels = {**STOCK, "alertname": "GPUXidError", "xid": "79", "pod": "nvidia-dcgm-exporter-b9v4n",
                    "Hostname": "nvidia-dcgm-exporter-b9v4n", "instance": "10.244.5.2:9400", "UUID": "GPU-other"}
    two = Alert(fingerprint="f2", status="firing", labels=other_labels, annotations={}, starts_at=at(0), ends_at=None,
                received_at=at(0))
    eng.ingest([one, two], at(0))
    keys = sorted(i.key for i in eng.state.incidents.values())
    assert keys == ["origin|cluster=prod|origin=exporter pod gpu-operator/nvidia-dcgm-exporter-b9v4n",
                    "origin|cluster=prod|origin=exporter pod gpu-operator/nvidia-dcgm-exporter-x7k2p"], keys


def test_an_answer_arriving_later_is_used_for_the_alert_sent_again() -> None:
    """The engine remembers subjects by fingerprint; the index's generation makes it work one out again."""
    index = Index()
    eng = Engine(shipped_rules(), nodes=index)
    a = Alert(fingerprint="f1", status="firing", labels={**STOCK, "alertname": "GPUXidError", "xid": "79"},
              annotations={}, starts_at=at(0), ends_at=None, received_at=at(0))
    assert eng.prepare(a).subject.node == ""
    index.pods[("gpu-operator", "nvidia-dcgm-exporter-x7k2p")] = "gpu-node-17"
    assert eng.prepare(a).subject.node == ""  # same generation: the remembered subject
    index.generation += 1
    assert eng.prepare(a).subject.node == "gpu-node-17"


def test_a_log_alert_with_the_line_in_a_label_is_an_xid_with_its_code() -> None:
    a = alert("KernelLogAlert", hostname="gpu-node-3", line="Dec  2 03:04:05 gpu-node-3 kernel: " + NVRM_79,
              annotations={"summary": "kernel log alert"})
    eng = Engine(shipped_rules())
    prepared = eng.prepare(a)
    assert prepared.signal.kind == "xid" and prepared.signal.xid == 79, prepared.signal
    assert prepared.subject.gpu is not None and prepared.subject.gpu.pci_bus_id == "0000:3b:00"
