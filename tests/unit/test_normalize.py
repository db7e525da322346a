from alertd.gpu.clocks import decode_clock_events
from alertd.gpu.pci import normalize_pci
from alertd.engine.normalize import NormalizeConfig, strip_port, subject_of


def test_pci_forms_from_dcgm_and_kernel_are_equal():
    assert normalize_pci("00000000:3B:00.0") == normalize_pci("0000:3b:00") == "0000:3b:00"
    assert normalize_pci("PCI:0000:3b:00") == "0000:3b:00"
    assert normalize_pci("3b:00.0") == "0000:3b:00"
    assert normalize_pci("00000001:C1:00.0") == "0001:c1:00"
    assert normalize_pci("not-a-pci") == ""
    assert normalize_pci(None) == ""


def test_node_precedence_prefers_node_over_exporter_hostname():
    cfg = NormalizeConfig()
    s = subject_of({"node": "gpu-node-3", "Hostname": "dcgm-exporter-x7k2p", "instance": "10.0.0.3:9400"}, cfg)
    assert s.node == "gpu-node-3"
    assert subject_of({"Hostname": "gpu-node-4"}, cfg).node == "gpu-node-4"
    assert subject_of({"hostname": "gpu-node-5"}, cfg).node == "gpu-node-5"
    assert subject_of({"instance": "gpu-node-6:9100"}, cfg).node == "gpu-node-6"
    custom = NormalizeConfig(node_labels=("Hostname", "node"))
    assert subject_of({"node": "a", "Hostname": "b"}, custom).node == "b"


def test_strip_port_handles_ipv6_and_bare_hosts():
    assert strip_port("[::1]:9400") == "::1"
    assert strip_port("10.1.2.3:9400") == "10.1.2.3"
    assert strip_port("gpu-node-1") == "gpu-node-1"


def test_gpu_pod_and_cluster_identity():
    cfg = NormalizeConfig(cluster_default="fallback")
    s = subject_of({"gpu": "3", "UUID": "GPU-abc", "pci_bus_id": "00000000:3B:00.0", "modelName": "H100",
                    "exported_pod": "trainer-0", "exported_namespace": "ml", "exported_container": "main"}, cfg)
    assert s.gpu is not None and s.gpu.uuid == "GPU-abc" and s.gpu.pci_bus_id == "0000:3b:00" and s.gpu.index == "3"
    assert (s.pod, s.namespace, s.container) == ("trainer-0", "ml", "main")
    assert s.cluster == "fallback"
    assert subject_of({"cluster": "prod"}, cfg).cluster == "prod"
    assert subject_of({"alertname": "x"}, cfg).gpu is None


def test_clock_event_bits_split_harmful_and_benign():
    harmful, benign = decode_clock_events("72")  # 0x40 hw thermal + 0x8 hw slowdown
    assert harmful == ["hw_slowdown", "hw_thermal_slowdown"] and benign == []
    harmful, benign = decode_clock_events(5)  # idle + sw power cap only
    assert harmful == [] and benign == ["gpu_idle", "sw_power_cap"]
    assert decode_clock_events("1.28e+02")[0] == ["hw_power_brake_slowdown"]
    assert decode_clock_events("garbage") == ([], [])
