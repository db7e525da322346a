"""NVSwitch faults: SXid lines, rules/sxid-catalog.yml, and the incident of their own they give.

Line formats, as published:
- NVIDIA's Xid documentation, 1.2 "What Is an SXid Message": the NVSwitch driver reports NVSwitch errors in
  the kernel log through a mechanism like Xids, documented in the Fabric Manager User Guide:
  "nvidia-nvswitchN: SXid (PCI:<address>): <code>, <Fatal|Non-fatal>, <error>".
- Kernel logs of HGX systems (published in the MENTHOS root-cause data set on Hugging Face):
  "nvidia-nvswitch4: SXid (PCI:0000:c6:00.0): 19084, Non-fatal, Link 29 AN1 Heartbeat Timeout Error (First)",
  "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up",
  "nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine instance 00 Sub-engine instance 00"
  (a detail line with no fatality word).
"""
from __future__ import annotations

import pytest

from alertd.core.findings import EvidenceLine
from alertd.engine.classify import classify_explained
from alertd.engine.normalize import NormalizeConfig
from alertd.enrich.log_evidence import evidence_from_lines, upgrade_signal
from alertd.enrich.logs import LogLine
from alertd.gpu.nvrm import parse_xid
from alertd.gpu.sxid import parse_sxid
from testkit.builders import T0, alert, at, engine, shipped_rules, xid

NON_FATAL = "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"
HEARTBEAT = "nvidia-nvswitch4: SXid (PCI:0000:c6:00.0): 19084, Non-fatal, Link 29 AN1 Heartbeat Timeout Error (First)"
FATAL = "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up"
DETAIL = "nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine instance 00 Sub-engine instance 00"


@pytest.mark.parametrize(("line", "switch", "pci", "code", "fatal", "text"), [
    (NON_FATAL, "nvswitch0", "0000:05:00", 12028, False, "Link 32 egress non-posted PRIV error (First)"),
    (HEARTBEAT, "nvswitch4", "0000:c6:00", 19084, False, "Link 29 AN1 Heartbeat Timeout Error (First)"),
    ("Mar 02 10:11:12 hgx-17 kernel: [ 8812.334455] " + FATAL, "nvswitch0", "0000:c2:00", 20034, True,
     "Link 28 LTSSM Fault Up"),
    (DETAIL, "nvswitch2", "0000:c4:00", 10002, None, "Severity 5 Engine instance 00 Sub-engine instance 00"),
])
def test_published_sxid_lines_parse(line: str, switch: str, pci: str, code: int, fatal: bool | None,
                                    text: str) -> None:
    found = parse_sxid(line)
    assert found is not None
    assert (found.switch, found.pci, found.code, found.fatal, found.text) == (switch, pci, code, fatal, text)


def test_an_sxid_line_is_no_gpu_xid_and_an_xid_line_no_sxid() -> None:
    assert parse_xid(FATAL) is None
    assert parse_sxid("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.") \
        is None
    c = classify_explained(alert("KernelLogNVSwitch", node="gpu-node-4", annotations={"description": FATAL}),
                           shipped_rules(), NormalizeConfig())
    assert c.signal.kind == "sxid" and c.signal.xid is None and c.signal.sxid == 20034


@pytest.mark.parametrize(("line", "severity", "action", "title"), [
    (FATAL, "critical", "reboot_node", "SXid 20034 on nvswitch0: LTSSM fault up (fatal)"),
    (NON_FATAL, "warning", "watch", "SXid 12028 on nvswitch0: egress non-posted PRIV error (non-fatal)"),
    # a code the catalog does not list: titled by its line
    (DETAIL, "warning", "watch",
     "SXid 10002 on nvswitch2: Severity 5 Engine instance 00 Sub-engine instance 00 (non-fatal)"),
    # the line's own word wins over the catalog's (20034 is listed fatal)
    (FATAL.replace("Fatal", "Non-fatal"), "warning", "watch", "SXid 20034 on nvswitch0: LTSSM fault up (non-fatal)"),
])
def test_the_catalog_titles_the_switch_and_the_code_fatal_or_not(line: str, severity: str, action: str,
                                                                  title: str) -> None:
    found = parse_sxid(line)
    assert found is not None
    sig = shipped_rules().sxids.signal(found)
    assert (sig.kind, sig.severity, sig.action, sig.title, sig.runbook) == ("sxid", severity, action, title, "sxid")


@pytest.mark.parametrize("where", ["annotation", "label"])
def test_a_log_alert_carrying_the_line_is_an_sxid(where: str) -> None:
    """A Loki or Graylog alert rule on the kernel log: the line in its description, or in a label."""
    if where == "annotation":
        a = alert("NVSwitchKernelError", node="gpu-node-4", annotations={"description": FATAL})
    else:
        a = alert("NVSwitchKernelError", node="gpu-node-4", line=FATAL)
    c = classify_explained(a, shipped_rules(), NormalizeConfig())
    assert c.stage == where and c.signal.kind == "sxid" and c.signal.switch == "nvswitch0@0000:c2:00"
    assert c.signal.severity == "critical"


def test_an_sxid_is_an_incident_of_its_own_per_node_and_switch() -> None:
    e = engine()
    e.ingest([xid(79, node="gpu-node-4", gpu="2")], at(0))
    e.ingest([alert("NVSwitchKernelError", node="gpu-node-4", device="nvswitch0", annotations={"description": FATAL}),
              alert("NVSwitchKernelError", node="gpu-node-4", device="nvswitch4",
                    annotations={"description": HEARTBEAT})], at(10))
    # the same switch again, another line: the same incident
    e.ingest([alert("NVSwitchKernelError", node="gpu-node-4", device="nvswitch0", link="30",
                    annotations={"description": FATAL.replace("Link 28", "Link 30")})], at(20))
    incidents = sorted(e.state.incidents.values(), key=lambda i: i.id)
    assert [(i.group, i.signals, i.xids) for i in incidents] == [
        ("node", ["xid"], [79]), ("nvswitch", ["sxid"], []), ("nvswitch", ["sxid"], [])]
    fatal, heartbeat = incidents[1], incidents[2]
    assert fatal.key == "nvswitch|cluster=prod|node=gpu-node-4|switch=nvswitch0@0000:c2:00"
    assert len(fatal.members) == 2 and fatal.severity == "critical"
    assert fatal.title.startswith("SXid 20034 on nvswitch0: LTSSM fault up (fatal)")
    assert heartbeat.severity == "warning" and "nvswitch4" in heartbeat.key


def test_sxid_lines_in_the_kernel_log_are_evidence_and_upgrade_an_incident_with_no_xid() -> None:
    e = engine()
    inc = e.ingest([alert("GPUNVLinkErrors", node="gpu-node-4", gpu="1", UUID="GPU-n4-1")], at(0))[0].incident
    lines = [LogLine(T0, "gpu-node-4", m) for m in (HEARTBEAT, FATAL, "kernel: EXT4-fs (md127p3): re-mounted r/w.")]
    evidence = evidence_from_lines(lines, "gpu-node-4")
    assert [(x.sxid, x.switch, x.fatal, x.xid) for x in evidence] == [
        (19084, "nvswitch4@0000:c6:00", False, None), (20034, "nvswitch0@0000:c2:00", True, None),
        (None, "", False, None)]
    assert EvidenceLine.from_json(evidence[1].to_json()) == evidence[1]  # stored and read back alike
    signal = upgrade_signal(evidence, inc, shipped_rules().catalog, inc.gpus, shipped_rules().sxids)
    assert signal is not None and (signal.kind, signal.sxid, signal.severity) == ("sxid", 20034, "critical")
    # without the SXid catalog (or for an incident with an Xid) the lines are evidence only
    assert upgrade_signal(evidence, inc, shipped_rules().catalog, inc.gpus) is None
    xid_inc = e.ingest([xid(79, node="gpu-node-5")], at(5))[0].incident
    assert upgrade_signal(evidence, xid_inc, shipped_rules().catalog, xid_inc.gpus, shipped_rules().sxids) is None
