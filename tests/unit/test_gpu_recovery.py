"""What the GPU itself asks for: Xid 154's recovery action, decoded from rules/gpu-recovery.yml.

Line and value formats, as published:
- NVIDIA's Xid catalog (Ampere and newer), row 154 GPU_RECOVERY_ACTION_CHANGED: the string is similar to
  "Xid 154 GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", with the values
  "None", "Drain P2P", "Drain and Reset", "GPU Reset Required", "Node Reboot Required".
- The kernel line as drivers write it, NVRM prefix and PCI address as for every Xid (public GPU bug reports,
  and NVSentinel's syslog monitor, which parses the same format):
  "NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)".
- NVML nvmlDeviceGpuRecoveryAction_t (cuda-python's DeviceGpuRecoveryAction): 0 none, 1 GPU reset, 2 node
  reboot, 3 drain P2P, 4 drain P2P and reset; DCGM exports it as field 1523, DCGM_FI_DEV_GPU_RECOVERY_ACTION
  (formerly DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION), a number.
"""
from __future__ import annotations

import pytest

from alertd.engine.classify import classify_explained
from alertd.engine.normalize import NormalizeConfig
from alertd.enrich.log_evidence import evidence_from_lines, upgrade_signal
from alertd.enrich.logs import LogLine
from alertd.remediation.decide import policy_for, recovery_asked
from testkit.builders import T0, alert, at, engine, shipped_rules, xid

CATALOG_TEXT = "Xid 154 GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
KERNEL = "NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
DMESG = ("[Mon Apr  6 07:25:24 2026] NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x0 (None) "
         "to 0x2 (Node Reboot Required)")


@pytest.mark.parametrize(("text", "action", "key"), [
    (CATALOG_TEXT, "reboot_node", "node_reboot"),
    (KERNEL, "reset_gpu", "gpu_reset"),
    (DMESG, "reboot_node", "node_reboot"),
    ("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
     "drain_reset", "drain_and_reset"),
    ("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)",
     "drain_p2p", "drain_p2p"),
    ("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
     "ignore", "none"),
    # the words alone, without the number
    ("Xid 154 GPU recovery action changed from None to Node Reboot Required", "reboot_node", "node_reboot"),
])
def test_the_line_decodes_to_the_action_it_changes_to(text: str, action: str, key: str) -> None:
    found = shipped_rules().catalog.recovery.from_text(text)
    assert found is not None and (found.action, found.key) == (action, key)


def test_the_number_wins_over_words_and_unknown_values_decode_to_nothing() -> None:
    table = shipped_rules().catalog.recovery
    assert table.from_text("recovery action changed from 0x0 (None) to 0x2 (Something Else)").key == "node_reboot"
    assert table.from_text("recovery action changed from 0x0 (None) to 0x9 (Future Action)") is None
    assert table.from_text("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.") is None


@pytest.mark.parametrize(("value", "key"), [("2", "node_reboot"), ("2.0", "node_reboot"), ("0x1", "gpu_reset"),
                                            ("4", "drain_and_reset"), ("Node Reboot Required", "node_reboot"),
                                            ("0", "none")])
def test_the_dcgm_value_in_a_label_decodes(value: str, key: str) -> None:
    found = shipped_rules().catalog.recovery.read(value)
    assert found is not None and found.key == key


def test_an_xid_154_alert_with_the_dcgm_label_asks_for_a_node_reboot() -> None:
    """The label wins over the text: the value DCGM read now, not the change the text reported."""
    a = xid(154, gpu_recovery_action="2")
    a.annotations = {"description": KERNEL}
    c = classify_explained(a, shipped_rules(), NormalizeConfig())
    assert (c.signal.xid, c.signal.action, c.signal.severity, c.signal.detail) == (154, "reboot_node", "critical",
                                                                                   "node_reboot")
    assert c.signal.title == "Xid 154: GPU asks for recovery: Node Reboot Required"
    assert 'label gpu_recovery_action="2"' in c.signal.basis


def test_without_a_label_the_annotation_line_decides_and_without_either_the_catalog_entry() -> None:
    rules, ncfg = shipped_rules(), NormalizeConfig()
    a = xid(154)
    a.annotations = {"description": KERNEL}
    assert classify_explained(a, rules, ncfg).signal.action == "reset_gpu"
    plain = classify_explained(xid(154), rules, ncfg).signal
    assert (plain.action, plain.severity, plain.detail) == ("watch", "info", "")


def test_none_pages_nobody_and_proposes_nothing() -> None:
    e = engine()
    inc = e.ingest([xid(154, gpu_recovery_action="0")], at(0))[0].incident
    assert inc.severity == "info" and inc.primary is not None and inc.primary.action == "ignore"
    assert policy_for(inc, shipped_rules().remediation) is None


@pytest.mark.parametrize(("value", "policy", "action"), [("2", "gpu-asks-reboot", "drain"),
                                                         ("1", "gpu-asks-reset", "drain-gpu"),
                                                         ("4", "gpu-asks-reset", "drain-gpu")])
def test_what_the_gpu_asks_for_chooses_the_remediation_proposal(value: str, policy: str, action: str) -> None:
    e = engine()
    inc = e.ingest([xid(154, gpu_recovery_action=value)], at(0))[0].incident
    chosen = policy_for(inc, shipped_rules().remediation)
    assert chosen is not None and (chosen.name, chosen.action) == (policy, action)


def test_an_xid_79_with_its_xid_154_keeps_the_xid_policy() -> None:
    e = engine()
    changes = e.ingest([xid(79, gpu="2"), xid(154, gpu="2", gpu_recovery_action="2")], at(0))
    inc = changes[-1].incident
    assert recovery_asked(inc) == {"node_reboot"}
    chosen = policy_for(inc, shipped_rules().remediation)
    assert chosen is not None and chosen.name == "gpu-off-the-bus"


def test_an_xid_154_line_in_the_kernel_log_upgrades_the_incident_to_a_reboot() -> None:
    """The exporter is down, so DCGM says nothing; the kernel log has the GPU's own request."""
    e = engine()
    inc = e.ingest([alert("DCGMExporterDown", node="gpu-node-7")], at(0))[0].incident
    evidence = evidence_from_lines([LogLine(T0, "gpu-node-7", DMESG)], "gpu-node-7")
    assert evidence[0].xid == 154 and evidence[0].pci == "0000:97:00"
    signal = upgrade_signal(evidence, inc, shipped_rules().catalog, inc.gpus)
    assert signal is not None and (signal.xid, signal.action, signal.detail) == (154, "reboot_node", "node_reboot")


def test_a_kernel_log_xid_154_back_to_none_upgrades_nothing() -> None:
    e = engine()
    inc = e.ingest([alert("DCGMExporterDown", node="gpu-node-7")], at(0))[0].incident
    line = "NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
    evidence = evidence_from_lines([LogLine(T0, "gpu-node-7", line)], "gpu-node-7")
    assert upgrade_signal(evidence, inc, shipped_rules().catalog, inc.gpus) is None


def test_the_kernel_line_asks_more_than_an_xid_154_alert_without_a_value() -> None:
    e = engine()
    inc = e.ingest([xid(154, node="gpu-node-7")], at(0))[0].incident
    assert inc.primary is not None and inc.primary.action == "watch"
    other_gpu = evidence_from_lines([LogLine(T0, "gpu-node-7", KERNEL)], "gpu-node-7")  # 0000:97:00, not its GPU
    assert upgrade_signal(other_gpu, inc, shipped_rules().catalog, inc.gpus) is None
    own = evidence_from_lines([LogLine(T0, "gpu-node-7", KERNEL.replace("0000:97:00", "0000:18:00"))], "gpu-node-7")
    signal = upgrade_signal(own, inc, shipped_rules().catalog, inc.gpus)
    assert signal is not None and signal.action == "reset_gpu"
