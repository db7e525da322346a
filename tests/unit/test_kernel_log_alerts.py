"""Kernel lines sent as log alerts (a Loki ruler: the host in `host`, the line in the description; Graylog: the
host in `source`, the line with its syslog prefix in `message`), read as kernel-log evidence reads them.

Lines as printed, from public reports: the lost-GPU record of NVIDIA/NVSentinel#155 (open kernel module
570.158.01); the one-line form older drivers print after their Xid 79 line, and the driver's "GPU at" line with
the GPU's UUID (a syslog of an Ubuntu host, the NVIDIA forum thread "GPU has fallen off the bus"); the Realtek
r8169 probe line whose chip version reads "XID 541" (dmesg of RTL8168h boards, kernel bugzilla threads).
"""
from __future__ import annotations

from typing import Callable

import pytest

from alertd.core.model import Alert
from alertd.engine.classify import classify_explained
from alertd.engine.normalize import NormalizeConfig, subject_of, xid_source
from alertd.engine.pipeline import Engine
from alertd.enrich.log_evidence import evidence_from_lines
from alertd.enrich.logs import LogLine
from alertd.gpu.nvrm import line_xids, text_xid
from testkit.builders import alert, at, shipped_rules

CFG = NormalizeConfig()
LOST = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.")
# The same record where the log pipeline joined the continuation lines into one message line.
LOST_ONE_LINE = ("kernel: NVRM: The NVIDIA GPU 0000:b3:00.0 NVRM: (PCI ID: 10de:26b5) installed in this system has "
                 "NVRM: fallen off the bus and is not responding to commands.")
LOST_PARTS = [  # one log alert per line
    "Feb 14 05:03:42 gpu-node-7 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0",
    "Feb 14 05:03:42 gpu-node-7 kernel: NVRM: (PCI ID: 10de:26b5) installed in this system has",
    "Feb 14 05:03:42 gpu-node-7 kernel: NVRM: fallen off the bus and is not responding to commands.",
]
OLD_FORM = "Jun  5 22:36:51 gpu-node-7 kernel: [ 4564.303887] NVRM: GPU at 0000:01:00.0 has fallen off the bus."
GPU_AT = "Jun  5 22:36:51 gpu-node-7 kernel: [ 4564.303882] NVRM: GPU at PCI:0000:01:00: GPU-435cb66f-d89f-a234-9414-70b032521666"
REALTEK = "[    3.012982] r8169 0000:05:00.0 eth0: RTL8168h/8111h, 9c:6b:00:22:95:f9, XID 541, IRQ 57"


def loki(line: str, host: str = "gpu-node-7") -> Alert:
    return alert("KernelGpuError", host=host, job="varlogs", annotations={"description": line})


def graylog(line: str, host: str = "gpu-node-7") -> Alert:
    return alert("KernelGpuError", source=host, annotations={"message": line})


@pytest.mark.parametrize("make", [loki, graylog])
@pytest.mark.parametrize("text", [LOST, LOST_ONE_LINE], ids=["three-lines", "joined"])
def test_a_lost_gpu_record_in_one_log_alert_is_xid_79_of_its_gpu(make: Callable[[str], Alert], text: str) -> None:
    a = make(text)
    decision = classify_explained(a, shipped_rules(), CFG)
    assert (decision.signal.kind, decision.signal.xid) == ("xid", 79), decision
    assert xid_source(a, CFG)[0] == 79
    s = subject_of(a.labels, CFG, a.annotations)
    assert s.node == "gpu-node-7" and s.gpu is not None and s.gpu.pci_bus_id == "0000:b3:00"


def test_a_lost_gpu_record_split_into_log_alerts_is_one_xid_79_incident() -> None:
    eng = Engine(shipped_rules())
    eng.ingest([alert("KernelGpuError", host="gpu-node-7", starts=0, annotations={"description": line},
                      line_no=str(i)) for i, line in enumerate(LOST_PARTS)], at(0))
    xids = [i for i in eng.state.incidents.values() if i.xids]
    assert [(i.xids, i.node) for i in xids] == [([79], "gpu-node-7")]


def test_the_older_one_line_form_is_xid_79_in_log_alerts_and_kernel_log_evidence() -> None:
    a = loki(OLD_FORM)
    decision = classify_explained(a, shipped_rules(), CFG)
    assert (decision.signal.kind, decision.signal.xid) == ("xid", 79)
    assert subject_of(a.labels, CFG, a.annotations).gpu.pci_bus_id == "0000:01:00"  # type: ignore[union-attr]
    [read] = line_xids([("gpu-node-7", OLD_FORM)])
    assert read is not None and (read.xid, read.pci) == (79, "0000:01:00")


def test_every_input_path_reads_the_same_record_the_same_way() -> None:
    """One parser: a log alert's text and a kernel-log search answer give the same Xid and GPU."""
    for text in (LOST, LOST_ONE_LINE, OLD_FORM):
        [from_log] = line_xids([("gpu-node-7", text)])
        assert text_xid(text) == from_log and from_log is not None


def test_a_network_cards_chip_version_is_no_xid() -> None:
    for a in (loki(REALTEK), graylog("kernel: " + REALTEK)):
        decision = classify_explained(a, shipped_rules(), CFG)
        assert decision.signal.kind != "xid" and decision.signal.xid is None, decision
    # the NVIDIA forms still read, with or without the PCI: prefix, MIG, pid/name variants
    for line, code in [("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", 79),
                       ("NVRM: Xid (0000:3b:00): 13, 0001 00000000 0000c1c0 00000000 00000000", 13),
                       ("NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-CI:01): 43, pid=1234, name=python, Ch 00000008", 43),
                       ("NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, "
                        "errorString CTX SWITCH TIMEOUT, Info 0x58005", 109)]:
        assert classify_explained(loki(line), shipped_rules(), CFG).signal.xid == code


def test_a_network_cards_line_in_a_storm_of_kernel_alerts_titles_no_xid() -> None:
    eng = Engine(shipped_rules())
    eng.ingest([loki(REALTEK, host=f"gpu-node-{n}") for n in range(6)], at(0))
    assert not any("Xid" in i.title for i in eng.state.incidents.values())


def test_a_gpu_at_line_gives_the_log_alerts_gpu_its_uuid() -> None:
    a = loki(GPU_AT + "\n" + OLD_FORM)
    s = subject_of(a.labels, CFG, a.annotations)
    assert s.gpu is not None and (s.gpu.uuid, s.gpu.pci_bus_id) == (
        "GPU-435cb66f-d89f-a234-9414-70b032521666", "0000:01:00")
    eng = Engine(shipped_rules())
    eng.ingest([a], at(0))
    [incident] = eng.state.incidents.values()
    assert "GPU-435cb66f-d89f-a234-9414-70b032521666" in {g.get("uuid") for g in incident.gpus}


def test_kernel_log_evidence_reads_the_old_form_with_the_gpu_at_lines_uuid() -> None:
    lines = [LogLine(at(0), "gpu-node-7", GPU_AT), LogLine(at(0), "gpu-node-7", OLD_FORM)]
    entries = evidence_from_lines(lines, "gpu-node-7")
    assert [(e.xid, e.pci, e.gpu_uuid) for e in entries] == [
        (None, None, None), (79, "0000:01:00", "GPU-435cb66f-d89f-a234-9414-70b032521666")]
