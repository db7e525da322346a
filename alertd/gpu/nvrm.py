"""NVIDIA kernel driver (NVRM) log lines: Xid reports and PCI address -> GPU UUID lines.

Formats seen in the field (any prefix before ``NVRM:`` is ignored: kernel
timestamps ``[12345.678901]``, syslog ``Jan  2 03:04:05 host kernel:``,
journald, RFC 5424 headers)::

    NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU ...
    NVRM: Xid (0000:3b:00): 13, 0001 00000000 0000c1c0 ...              (old drivers: no PCI: prefix)
    NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-CI:01): 43, pid=1234, name=python, Ch 00000008   (MIG)
    NVRM: GPU at PCI:0000:3b:00: GPU-8f6e1b4c-6d1a-2b7e-3f4d-0123456789ab

Newer drivers also report a GPU lost from the PCIe bus with no Xid line at all,
in one kernel record of three lines (a log pipeline may keep it whole or split
it into three messages)::

    NVRM: The NVIDIA GPU 0000:b3:00.0
    NVRM: (PCI ID: 10de:26b5) installed in this system has
    NVRM: fallen off the bus and is not responding to commands.

That is the fault Xid 79 names, and it is read as Xid 79, as is the one-line form
older drivers print (after their Xid 79 line, or alone)::

    NVRM: GPU at 0000:01:00.0 has fallen off the bus.

:func:`message_xid` reads what one message says by itself, for kernel-log
evidence (:func:`line_xids`, which also joins split reports) and log alerts
(:func:`text_xid`) alike.

PCI addresses are normalised with :func:`alertd.gpu.pci.normalize_pci`, so
they compare equal to dcgm-exporter's ``pci_bus_id`` labels.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Mapping

from alertd.gpu.pci import PCI_ADDRESS, normalize_pci

_XID = re.compile(
    r"NVRM:\s+Xid\s+\(\s*(?:PCI:)?(?P<pci>" + PCI_ADDRESS + r")"
    r"(?:\s+GPU-I:\s*(?P<gi>\d+))?(?:\s+GPU-CI:\s*(?P<ci>\d+))?\s*\)"
    r"\s*:\s*(?P<xid>\d+)\s*(?:,\s*(?P<rest>.*))?$"
)
# "pid=1234, name=python, rest" / "pid='<unknown>', name=<unknown>, rest"; name may be empty.
_PID_NAME = re.compile(
    r"^pid\s*=\s*(?P<pid>'?<unknown>'?|'?-?\d+'?)\s*,\s*name\s*=\s*(?P<name>[^,]*?)\s*(?:,\s*(?P<text>.*))?$"
)
_GPU_AT = re.compile(
    r"NVRM:\s+GPU\s+at\s+(?:PCI:)?(?P<pci>" + PCI_ADDRESS + r")\s*:\s*(?P<uuid>GPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})"
)


_FALLEN_AT = re.compile(r"NVRM:\s+GPU\s+at\s+(?:PCI:)?(?P<pci>" + PCI_ADDRESS + r")\s+has\s+fallen\s+off\s+the\s+bus")
_LOST_GPU = re.compile(r"NVRM:\s+The NVIDIA GPU\s+(?:PCI:)?(?P<pci>" + PCI_ADDRESS + r")(?![0-9a-fA-F:.])")
FALLEN_OFF = "fallen off the bus"
XID_FALLEN_OFF = 79  # what the driver's Xid line says for the same fault


@dataclass(frozen=True, slots=True)
class XidLine:
    """One parsed ``NVRM: Xid`` report."""

    xid: int
    pci: str  # normalised 0000:3b:00
    pid: int | None = None
    process: str = ""
    text: str = ""
    gpu_instance: int | None = None  # MIG GPU instance (GPU-I)
    compute_instance: int | None = None  # MIG compute instance (GPU-CI)


def _unknown(value: str) -> bool:
    return value.strip("'\" ") in ("<unknown>", "")


def parse_xid(line: str) -> XidLine | None:
    """Parse the Xid report in ``line`` (one log line, any prefix); None when there is none."""
    if "Xid" not in line:
        return None
    m = _XID.search(line.rstrip())
    if m is None:
        return None
    pid: int | None = None
    process = ""
    text = (m.group("rest") or "").strip()
    pm = _PID_NAME.match(text)
    if pm is not None:
        raw_pid = pm.group("pid").strip("'")
        pid = None if _unknown(raw_pid) else int(raw_pid)
        name = pm.group("name")
        process = "" if _unknown(name) else name.strip("'\"")
        text = (pm.group("text") or "").strip()
    return XidLine(
        xid=int(m.group("xid")),
        pci=normalize_pci(m.group("pci")),
        pid=pid,
        process=process,
        text=text,
        gpu_instance=int(m.group("gi")) if m.group("gi") is not None else None,
        compute_instance=int(m.group("ci")) if m.group("ci") is not None else None,
    )


def parse_gpu_at(line: str) -> tuple[str, str] | None:
    """``NVRM: GPU at PCI:0000:3b:00: GPU-<uuid>`` -> (normalised PCI address, UUID)."""
    if "GPU at" not in line:
        return None
    m = _GPU_AT.search(line)
    if m is None:
        return None
    return normalize_pci(m.group("pci")), m.group("uuid")


def lost_gpu_address(line: str) -> str | None:
    """``NVRM: The NVIDIA GPU 0000:b3:00.0`` (the first line of a lost-GPU report) -> its PCI address."""
    if "The NVIDIA GPU" not in line:
        return None
    m = _LOST_GPU.search(line)
    return normalize_pci(m.group("pci")) if m is not None else None


def fallen_at(line: str) -> XidLine | None:
    """``NVRM: GPU at 0000:01:00.0 has fallen off the bus.`` (older drivers) -> Xid 79 of that GPU."""
    if FALLEN_OFF not in line:
        return None
    m = _FALLEN_AT.search(line)
    return _lost_gpu(normalize_pci(m.group("pci"))) if m is not None else None


def message_xid(parts: list[str]) -> XidLine | None:
    """The Xid one message reports by itself (its lines, :func:`split_lines`): an ``NVRM: Xid`` line first,
    then the one-line lost-GPU form of older drivers, then a lost-GPU report kept whole in it."""
    for read in (parse_xid, fallen_at):
        found = next((xid for part in parts if (xid := read(part)) is not None), None)
        if found is not None:
            return found
    pci = next((address for part in parts if (address := lost_gpu_address(part)) is not None), None)
    return _lost_gpu(pci) if pci is not None and any(FALLEN_OFF in part for part in parts) else None


# A device driver's kernel line: the driver, the device's PCI address, the interface for a network card, then
# the message (dev_printk, netdev_printk): "r8169 0000:02:00.0 eth0: RTL8168h/8111h, 00:e0:4c:68:00:01, XID 541,
# IRQ 127" (the Realtek chip's version, which the driver prints as "XID").
_DEVICE_LINE = re.compile(r"(?:^|[\s\]])(?P<driver>[A-Za-z][\w-]*)\s+(?:PCI:)?" + PCI_ADDRESS + r"(?::|\s+[\w.-]+:)\s")


def other_driver(line: str) -> str:
    """The driver of another vendor's device whose kernel line this is ("r8169"), "" for NVIDIA's lines and
    lines naming no device: an "XID" such a line prints is no NVIDIA Xid."""
    if "NVRM" in line:
        return ""
    m = _DEVICE_LINE.search(line)
    driver = m.group("driver") if m is not None else ""
    return "" if driver.lower().startswith("nvidia") else driver


_LONE_FALLEN_OFF = re.compile(r"NVRM:\s+fallen\s+off\s+the\s+bus")


@lru_cache(maxsize=4096)  # a log alert's text repeats at every delivery, and subject and Xid code both read it
def text_xid(text: str) -> XidLine | None:
    """The Xid a log alert's text reports (one message: a line, or several). A lost-GPU report a log
    pipeline split into one alert per line names its fault only in its last part: that part alone is
    Xid 79 of a GPU it does not name (the address is in another alert)."""
    parts = split_lines(text)
    found = message_xid(parts)
    if found is None and any(_LONE_FALLEN_OFF.search(part) for part in parts):
        return _lost_gpu("")
    return found


def _lost_gpu(pci: str) -> XidLine:
    """A lost-GPU report without an Xid line, as the Xid 79 the same fault is reported as."""
    return XidLine(XID_FALLEN_OFF, pci, text=FALLEN_OFF)


LOST_GPU_SPAN = 3  # messages within which the parts of split lost-GPU reports follow each other (same host)
LOST_GPU_MIDDLE = "installed in this system has"  # the report's middle line: names neither GPU nor fault


@dataclass
class _SplitRun:
    """One host's split lost-GPU report parts that follow each other within LOST_GPU_SPAN messages. Several
    GPUs lost at once (a baseboard or PCIe switch failure) give several reports with one kernel timestamp,
    which a search may return interleaved, in any order, and with a line cut off by its size limit."""

    last: int  # the message number of the latest part: a part further than LOST_GPU_SPAN starts a new run
    addresses: list[tuple[int, str]] = field(default_factory=list)  # (message number, PCI address), in order
    fallen: list[int] = field(default_factory=list)  # message numbers of the "fallen off" parts, in order

    def resolve(self, out: list[XidLine | None]) -> None:
        """Every GPU the run names is lost once the run holds a "fallen off" part: the first line of the
        report names a GPU only in that report, so a GPU whose "fallen off" line a search left out is lost
        too. Each is read on the later of its two lines, pairing in order (the order reports interleave
        in); a GPU left without one, on its own line. "Fallen off" parts with no GPU named name none."""
        if not self.fallen:
            return
        for i, (number, pci) in enumerate(self.addresses):
            out[max(number, self.fallen[i]) if i < len(self.fallen) else number] = _lost_gpu(pci)


def line_xids(messages: Iterable[tuple[str, str]]) -> list[XidLine | None]:
    """The Xid each (host, message) of a log answer reports, in order: its own ``NVRM: Xid`` line, or a
    lost-GPU report without one, whole in the message or split into messages of one host."""
    runs: dict[str, _SplitRun] = {}
    out: list[XidLine | None] = []
    for number, (host, message) in enumerate(messages):
        parts = split_lines(message)
        out.append(message_xid(parts) or _lost_gpu_part(parts, host, number, runs, out))
    for run in runs.values():
        run.resolve(out)
    return out


def _lost_gpu_part(parts: list[str], host: str, number: int, runs: dict[str, _SplitRun],
                   out: list[XidLine | None]) -> XidLine | None:
    """A part of a split lost-GPU report, kept in its host's run (None until the run ends)."""
    fallen = any(FALLEN_OFF in part for part in parts)
    pci = next((found for part in parts if (found := lost_gpu_address(part)) is not None), None)
    if pci is None and not fallen and not any(LOST_GPU_MIDDLE in part for part in parts):
        return None
    run = runs.get(host)
    if run is None or number - run.last >= LOST_GPU_SPAN:
        if run is not None:
            run.resolve(out)
        run = runs[host] = _SplitRun(number)
    run.last = number
    if pci is not None:
        run.addresses.append((number, pci))
    elif fallen:
        run.fallen.append(number)
    return None


def split_lines(message: str) -> list[str]:
    """A stored message may hold several kernel lines (multi-line full_message); keep the non-empty ones."""
    return [part for part in message.splitlines() if part.strip()] or [message]


def pci_to_uuid(messages: Iterable[str], gpus: Iterable[Mapping[str, str]] = ()) -> dict[str, str]:
    """Map normalised PCI address -> GPU UUID from ``GPU at`` lines and the alert's GPU labels.

    The kernel log wins over alert labels when both name an address (it is what the
    driver saw); alert labels fill in the rest.
    """
    out: dict[str, str] = {}
    for gpu in gpus:
        pci = normalize_pci(gpu.get("pci_bus_id", ""))
        if pci and gpu.get("uuid"):
            out[pci] = gpu["uuid"]
    for message in messages:
        for line in split_lines(message):
            found = parse_gpu_at(line)
            if found:
                out[found[0]] = found[1]
    return out


__all__ = ["XidLine", "fallen_at", "line_xids", "lost_gpu_address", "message_xid", "other_driver", "parse_gpu_at",
           "parse_xid", "pci_to_uuid", "split_lines", "text_xid"]
