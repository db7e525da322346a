"""NVRM kernel line parsing: every Xid line format the driver has written, and GPU-at lines."""
from __future__ import annotations

import pytest

from alertd.gpu.nvrm import XidLine, parse_gpu_at, parse_xid, pci_to_uuid, split_lines

UUID = "GPU-8f6e1b4c-6d1a-2b7e-3f4d-0123456789ab"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (  # current drivers, unknown process (the GPU is gone, so is the context)
            "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            XidLine(79, "0000:3b:00", None, "", "GPU has fallen off the bus."),
        ),
        (  # no pid/name
            "NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU in "
            "the framebuffer at partition 1, subpartition 0.",
            XidLine(48, "0000:3b:00", None, "", "An uncorrectable double bit error (DBE) has been detected on GPU "
                                                "in the framebuffer at partition 1, subpartition 0."),
        ),
        (  # old drivers: no PCI: prefix
            "NVRM: Xid (0000:3b:00): 13, 0001 00000000 0000c1c0 00000001 00000000 00000000",
            XidLine(13, "0000:3b:00", None, "", "0001 00000000 0000c1c0 00000001 00000000 00000000"),
        ),
        (  # MIG: GPU instance and compute instance after the address
            "NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-CI:01): 43, pid=1234, name=python, Ch 00000008",
            XidLine(43, "0000:3b:00", 1234, "python", "Ch 00000008", 2, 1),
        ),
        (  # kernel timestamp prefix, known process
            "[12345.678901] NVRM: Xid (PCI:0000:86:00): 31, pid=2211, name=pt_main_thread, Ch 00000010, "
            "intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_3456d000.",
            XidLine(31, "0000:86:00", 2211, "pt_main_thread", "Ch 00000010, intr 10000000. MMU Fault: ENGINE "
                                                              "GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_3456d000."),
        ),
        (  # classic syslog prefix
            "Jan  2 03:04:05 gpu-node-2 kernel: [ 8123.456] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
            "name=<unknown>, GPU has fallen off the bus.",
            XidLine(79, "0000:3b:00", None, "", "GPU has fallen off the bus."),
        ),
        (  # RFC 5424 / journald style prefix
            "<4>1 2026-01-02T03:04:05.678Z gpu-node-2 kernel - - - NVRM: Xid (PCI:0000:b7:00): 94, pid=77, "
            "name=python3.10, Contained ECC error.",
            XidLine(94, "0000:b7:00", 77, "python3.10", "Contained ECC error."),
        ),
        (  # empty process name
            "NVRM: Xid (PCI:0000:3b:00): 109, pid=1234, name=, Ch 00000002, errorString CTX SWITCH TIMEOUT",
            XidLine(109, "0000:3b:00", 1234, "", "Ch 00000002, errorString CTX SWITCH TIMEOUT"),
        ),
        (  # code only (Xid 119 GSP timeouts sometimes end right there)
            "NVRM: Xid (PCI:0000:3b:00): 119",
            XidLine(119, "0000:3b:00", None, "", ""),
        ),
        (  # 8-digit domain and function, upper case: normalised like dcgm's pci_bus_id
            "NVRM: Xid (PCI:00000000:3B:00.0): 62, Internal micro-controller halt",
            XidLine(62, "0000:3b:00", None, "", "Internal micro-controller halt"),
        ),
        (  # MIG with only the GPU instance
            "NVRM: Xid (PCI:0000:3b:00 GPU-I:07): 43, pid=99, name=train, Ch 00000001",
            XidLine(43, "0000:3b:00", 99, "train", "Ch 00000001", 7, None),
        ),
    ],
)
def test_xid_line_formats(line: str, expected: XidLine) -> None:
    assert parse_xid(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
        "NVRM: GPU at PCI:0000:3b:00: " + UUID,
        "python[1234]: Xid errors are bad, said the docs",
        "nvidia-persistenced: device 0000:3b:00.0 - persistence mode enabled.",
        "kernel: pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error received",
        "NVRM: Xid (PCI:0000:3b:00): not-a-number",
        "",
    ],
)
def test_not_an_xid(line: str) -> None:
    assert parse_xid(line) is None


def test_gpu_at_maps_address_to_uuid() -> None:
    assert parse_gpu_at("[    5.123] NVRM: GPU at PCI:0000:3b:00: " + UUID) == ("0000:3b:00", UUID)
    assert parse_gpu_at("NVRM: GPU at 0000:86:00: GPU-00000000-1111-2222-3333-444444444444") == (
        "0000:86:00", "GPU-00000000-1111-2222-3333-444444444444")
    assert parse_gpu_at("NVRM: GPU at PCI:0000:3b:00: GPU has fallen off the bus.") is None
    assert parse_gpu_at("NVRM: GPU Board Serial Number: 1234567890") is None


def test_pci_to_uuid_from_log_and_alert_labels() -> None:
    mapping = pci_to_uuid(
        ["NVRM: GPU at PCI:0000:3b:00: " + UUID, "unrelated"],
        [{"pci_bus_id": "00000000:86:00.0", "uuid": "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"},
         {"pci_bus_id": "00000000:3B:00.0", "uuid": "GPU-from-labels"}, {"index": "3"}],
    )
    # dcgm's 00000000:86:00.0 and the kernel's 0000:86:00 are the same GPU; the kernel log wins for 3b.
    assert mapping == {"0000:86:00": "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "0000:3b:00": UUID}


def test_multi_line_messages_are_split() -> None:
    msg = "first\nNVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n\n"
    parts = split_lines(msg)
    assert parts[0] == "first" and parse_xid(parts[1]).xid == 79 and len(parts) == 2


# ------------------------------------------------- a lost GPU reported without an Xid line

# Newer drivers print this record of three lines for a GPU gone from the bus, with no Xid line (dmesg shape
# as reported from a fleet: the continuation lines indented, without a timestamp of their own).
LOST_RECORD = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
               "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
               "               NVRM: fallen off the bus and is not responding to commands.")
LOST_SPLIT = [  # the same record where a log pipeline made one message per line (syslog prefix)
    "Feb 14 05:03:42 gpu-node-7 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0",
    "Feb 14 05:03:42 gpu-node-7 kernel: NVRM: (PCI ID: 10de:26b5) installed in this system has",
    "Feb 14 05:03:42 gpu-node-7 kernel: NVRM: fallen off the bus and is not responding to commands.",
]
AFTER = "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s)."
H100 = {"gpu": "4", "pci_bus_id": "00000000:B3:00.0", "uuid": "GPU-5d2b8f1c-3a47-4e0e-9c61-0d8a1f2b3c44"}


def _lines(*messages: str, host: str = "gpu-node-7") -> list:
    from datetime import datetime, timezone

    from alertd.enrich.logs import LogLine
    t = datetime(2026, 2, 14, 5, 3, 42, tzinfo=timezone.utc)
    return [LogLine(t, host, m) for m in messages]


def test_lost_gpu_first_line_names_its_address() -> None:
    from alertd.gpu.nvrm import lost_gpu_address
    assert lost_gpu_address(LOST_SPLIT[0]) == "0000:b3:00"
    assert lost_gpu_address("NVRM: The NVIDIA GPU PCI:0000:3B:00.0 installed") == "0000:3b:00"
    assert lost_gpu_address(AFTER) is None
    assert lost_gpu_address("NVRM: The NVIDIA GPU driver version 570.158.01") is None


def test_a_lost_gpu_record_kept_whole_reads_as_xid_79_of_its_gpu() -> None:
    from alertd.enrich.log_evidence import evidence_from_lines
    evidence = evidence_from_lines(_lines(LOST_RECORD, AFTER), "gpu-node-7", [H100])
    assert [(e.xid, e.pci, e.gpu_uuid) for e in evidence] == [
        (79, "0000:b3:00", H100["uuid"]), (None, None, None)]


def test_a_lost_gpu_record_split_into_messages_reads_as_xid_79_on_its_last_line() -> None:
    from alertd.enrich.log_evidence import evidence_from_lines
    evidence = evidence_from_lines(_lines(*LOST_SPLIT, AFTER), "gpu-node-7", [H100])
    assert [(e.xid, e.pci) for e in evidence] == [(None, None), (None, None), (79, "0000:b3:00"), (None, None)]
    assert evidence[2].gpu_uuid == H100["uuid"]


def test_split_parts_returned_in_the_other_order_still_pair_up() -> None:
    """The split lines share their kernel timestamp: a search may return "fallen off" first."""
    from alertd.enrich.log_evidence import evidence_from_lines
    evidence = evidence_from_lines(_lines(LOST_SPLIT[2], LOST_SPLIT[1], LOST_SPLIT[0]), "gpu-node-7", [H100])
    assert [(e.xid, e.pci, e.gpu_uuid) for e in evidence] == [
        (None, None, None), (None, None, None), (79, "0000:b3:00", H100["uuid"])]


def _lost(pci: str) -> list[str]:
    return [line.replace("0000:b3:00.0", pci) for line in LOST_SPLIT]


@pytest.mark.parametrize("order", [
    pytest.param((0, 1, 2, 3, 4, 5), id="one-report-after-the-other"),
    pytest.param((0, 3, 1, 4, 2, 5), id="interleaved-line-by-line"),
    pytest.param((2, 5, 1, 4, 0, 3), id="interleaved-last-line-first"),
])
def test_two_gpus_lost_at_once_are_both_read_whatever_order_the_search_returns(order: tuple[int, ...]) -> None:
    """A baseboard or PCIe switch failure drops several GPUs at one kernel timestamp: their split reports
    tie on time, and a search may return their lines in any order."""
    from alertd.enrich.log_evidence import evidence_from_lines
    second = {"gpu": "5", "pci_bus_id": "00000000:DB:00.0", "uuid": "GPU-0a6c2e51-77d4-4c1b-8e2f-5b9a3c7d1e06"}
    lines = _lost("0000:b3:00.0") + _lost("0000:db:00.0")
    evidence = evidence_from_lines(_lines(*(lines[i] for i in order)), "gpu-node-7", [H100, second])
    found = sorted((e.pci, e.gpu_uuid) for e in evidence if e.xid == 79)
    assert found == [("0000:b3:00", H100["uuid"]), ("0000:db:00", second["uuid"])]
    assert [e.xid for e in evidence].count(None) == 4


@pytest.mark.parametrize("order", [
    pytest.param((0, 3, 1, 4, 2), id="interleaved-the-second-fallen-off-line-cut"),
    pytest.param((2, 1, 4, 0, 3), id="last-line-first-the-second-fallen-off-line-cut"),
    pytest.param((0, 3, 1, 4, 5), id="interleaved-the-first-fallen-off-line-cut"),
    pytest.param((0, 1, 2, 3, 4), id="one-after-the-other-the-last-line-cut"),
])
def test_a_gpu_whose_fallen_off_line_the_search_cut_is_still_read_as_lost(order: tuple[int, ...]) -> None:
    """A search's size limit can cut a line out of reports that tie on time. The first line names its GPU
    only in a lost-GPU report, so both GPUs are lost whichever "fallen off" line is missing."""
    from alertd.enrich.log_evidence import evidence_from_lines
    second = {"gpu": "5", "pci_bus_id": "00000000:DB:00.0", "uuid": "GPU-0a6c2e51-77d4-4c1b-8e2f-5b9a3c7d1e06"}
    lines = _lost("0000:b3:00.0") + _lost("0000:db:00.0")
    evidence = evidence_from_lines(_lines(*(lines[i] for i in order)), "gpu-node-7", [H100, second])
    found = sorted((e.pci, e.gpu_uuid) for e in evidence if e.xid == 79)
    assert found == [("0000:b3:00", H100["uuid"]), ("0000:db:00", second["uuid"])]


def test_three_gpus_and_one_fallen_off_line_are_three_gpus_lost() -> None:
    from alertd.gpu.nvrm import line_xids
    lines = _lost("0000:1b:00.0") + _lost("0000:3b:00.0") + _lost("0000:5b:00.0")
    messages = [("gpu-node-7", lines[i]) for i in (0, 3, 6, 1, 4, 7, 2)]  # only the first report's last line
    read = line_xids(messages)
    assert sorted(x.pci for x in read if x is not None) == ["0000:1b:00", "0000:3b:00", "0000:5b:00"]
    assert {x.xid for x in read if x is not None} == {79}


def test_first_lines_without_any_fallen_off_line_name_no_lost_gpu() -> None:
    """The same first line also starts other driver messages (a GPU the driver does not support): without a
    "fallen off" part near it, it says nothing about a lost GPU."""
    from alertd.gpu.nvrm import line_xids
    lines = _lost("0000:b3:00.0") + _lost("0000:db:00.0")
    assert line_xids([("gpu-node-7", lines[i]) for i in (0, 3, 1, 4)]) == [None] * 4
    unsupported = ["NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:1db4)",
                   "NVRM: installed in this system is not supported by the", "NVRM: NVIDIA 470.82.01 driver release."]
    assert line_xids([("gpu-node-7", m) for m in unsupported]) == [None] * 3


def test_fallen_off_text_far_from_its_first_line_or_on_another_host_names_no_gpu() -> None:
    from alertd.enrich.log_evidence import evidence_from_lines
    far = _lines(LOST_SPLIT[0], "kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE",
                 "kernel: EXT4-fs (md127p3): re-mounted r/w.", "kernel: bridge: filtering via arp/ip/ip6tables",
                 LOST_SPLIT[2])
    assert [e.xid for e in evidence_from_lines(far, "gpu-node-7")] == [None] * 5
    other = _lines(LOST_SPLIT[0]) + _lines(LOST_SPLIT[2], host="gpu-node-8")
    assert [e.xid for e in evidence_from_lines(other, "gpu-node-7")] == [None, None]


def test_a_lost_gpu_in_the_kernel_log_upgrades_a_missing_metrics_incident() -> None:
    """The exporter stops answering for the node; the kernel log has only the new-style report."""
    from alertd.enrich.log_evidence import evidence_from_lines, upgrade_signal
    from testkit.builders import alert, at, engine
    e = engine()
    inc = e.ingest([alert("DCGMExporterDown", node="gpu-node-7")], at(0))[0].incident
    evidence = evidence_from_lines(_lines(*LOST_SPLIT), "gpu-node-7")
    signal = upgrade_signal(evidence, inc, e.rules.catalog, inc.gpus)
    assert inc.signals == ["metrics_missing"]
    assert signal is not None and signal.xid == 79


@pytest.mark.parametrize(("line", "code", "pci", "pid", "process"), [
    # `dmesg --ctime` prefix, a process the driver could not name
    ("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
     "Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter", 13, "0000:cb:00", None, ""),
    ("[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, "
     "errorString CTX SWITCH TIMEOUT, Info 0x58005", 109, "0000:cb:00", 1797828, "pt_main_thread"),
    # a consequence naming its cause
    ("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
     45, "0000:dc:00", 1818990, "python3"),
    # NVLink fabric errors on a multi-domain (Grace) system: the PCI domain is not 0000
    ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 "
     "0x00000000 0x00000000)", 149, "0019:01:00", None, ""),
    ("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 "
     "0x00000000 0x00100000 0x00000004)", 145, "0018:01:00", None, ""),
    # old drivers: no pid/name, "Channel ID"
    ("[24128.828315] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000", 32, "0000:01:00", None, ""),
])
def test_xid_lines_as_fleets_reported_them(line: str, code: int, pci: str, pid: int | None, process: str) -> None:
    parsed = parse_xid(line)
    assert parsed is not None
    assert (parsed.xid, parsed.pci, parsed.pid, parsed.process) == (code, pci, pid, process)


def test_a_multi_domain_address_matches_dcgm_label_form() -> None:
    """dcgm-exporter writes the domain in 8 digits; the kernel in 4: both must name one GPU."""
    from alertd.gpu.pci import normalize_pci
    assert normalize_pci("00000019:01:00.0") == parse_xid("NVRM: Xid (PCI:0019:01:00): 149, NETIR").pci
