"""NVRM kernel line parsing: every Xid line format the driver has written, and GPU-at lines."""
from __future__ import annotations

import pytest

from alertd.enrich.nvrm import XidLine, parse_gpu_at, parse_xid, pci_to_uuid, split_lines

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
