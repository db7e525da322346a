"""NVSwitch faults: SXid ("Switch Xid") kernel-log lines, and their catalog as data (rules/sxid-catalog.yml).

NVIDIA's Xid documentation (section "What Is an SXid Message") says the NVSwitch driver reports NVSwitch
errors in the kernel log "through a similar mechanism to Xids"; the Fabric Manager User Guide documents
them. The line names the switch device, its PCI address, the SXid code, whether it is fatal, and the
error::

    nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)
    nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 20034, Fatal, Link 27 LTSSM Fault Up
    nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine instance 00 Sub-engine instance 00

The last form (no Fatal / Non-fatal word) is a detail line the driver writes after an error; it names no
fatality, so the catalog (or, for a code it does not list, "non-fatal") decides. Any prefix before the
device name is ignored (kernel timestamps, syslog or journald headers). Pure: no I/O.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict, cast

from alertd.core.json_types import JSONObject
from alertd.core.model import Signal, as_severity
from alertd.core.vocabulary import Category, GpuAction, SignalKind
from alertd.gpu.pci import PCI_ADDRESS, normalize_pci

_SXID = re.compile(
    r"(?:nvidia-)?(?P<switch>nvswitch\d+)\s*:\s*SXid\s*\(\s*(?:PCI:)?(?P<pci>" + PCI_ADDRESS + r")\s*\)"
    r"\s*:\s*(?P<code>\d+)\s*(?:,\s*(?P<rest>.*))?$")
_FATALITY = re.compile(r"^(?P<word>Non-fatal|Nonfatal|Fatal)\s*(?:,\s*|$)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SxidLine:
    """One parsed SXid report."""

    switch: str  # nvswitch0: the device the driver names (nvidia-nvswitch0)
    pci: str  # normalised 0000:05:00
    code: int
    fatal: bool | None  # None: the line says neither Fatal nor Non-fatal
    text: str = ""  # the error, after the fatality word

    @property
    def key(self) -> str:
        """What one switch of a node is known by in incident keys: its device name and PCI address."""
        return f"{self.switch}@{self.pci}" if self.pci else self.switch


def parse_sxid(line: str) -> SxidLine | None:
    """The SXid report in ``line`` (one log line, any prefix); None when there is none."""
    if "SXid" not in line:
        return None
    m = _SXID.search(line.rstrip())
    if m is None:
        return None
    rest = (m.group("rest") or "").strip()
    fatal: bool | None = None
    word = _FATALITY.match(rest)
    if word is not None:
        fatal = word.group("word").lower() == "fatal"
        rest = rest[word.end():].strip()
    return SxidLine(switch=m.group("switch"), pci=normalize_pci(m.group("pci")), code=int(m.group("code")),
                    fatal=fatal, text=rest)


def find_sxid(texts: Iterable[str]) -> SxidLine | None:
    """The first SXid report in any line of ``texts`` (a log alert's annotations and labels)."""
    for text in texts:
        for line in text.splitlines():
            found = parse_sxid(line)
            if found is not None:
                return found
    return None


@dataclass(frozen=True, slots=True)
class Handling:
    """What a fatal, or a non-fatal, SXid asks of people."""

    severity: str
    action: str
    drain: bool
    meaning: str
    investigate: str


@dataclass(frozen=True, slots=True)
class SxidEntry:
    code: int
    name: str
    fatal: bool  # as NVIDIA documents the code; the line's own word wins
    meaning: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class SxidCatalog:
    entries: Mapping[int, SxidEntry]
    fatal: Handling
    non_fatal: Handling
    runbook: str = "sxid"
    source: str = ""

    def signal(self, line: SxidLine, basis: str = "", detail: str = "") -> Signal:
        """The incident signal for one SXid report: titled by switch and code, fatal or not."""
        entry = self.entries.get(line.code)
        fatal = line.fatal if line.fatal is not None else (entry.fatal if entry is not None else False)
        how = self.fatal if fatal else self.non_fatal
        name = entry.name if entry is not None else (line.text or "unknown SXid")
        meaning = " ".join(part for part in (entry.meaning if entry else "", how.meaning) if part)
        return Signal(
            kind=SignalKind.SXID.value, severity=as_severity(how.severity), category=Category.NVLINK.value,
            sxid=line.code, switch=line.key,
            title=f"SXid {line.code} on {line.switch}: {name} ({'fatal' if fatal else 'non-fatal'})",
            meaning=meaning, action=how.action, investigate=how.investigate, drain=how.drain, runbook=self.runbook,
            detail=detail or ("fatal" if fatal else "non_fatal"), basis=basis)


class HandlingDoc(TypedDict):
    """``fatal`` / ``non_fatal``: sxid-catalog.schema.json requires every key, the fields of Handling."""

    severity: str
    action: str
    drain: bool
    meaning: str
    investigate: str


class _SxidCodeRequired(TypedDict):
    code: int
    name: str
    fatal: bool
    source: str


class SxidCodeDoc(_SxidCodeRequired, total=False):
    """One ``codes`` entry (``meaning`` may be left out)."""

    meaning: str


class _SxidsRequired(TypedDict):
    fatal: HandlingDoc
    non_fatal: HandlingDoc
    source: str


class SxidsDoc(_SxidsRequired, total=False):
    """The ``sxids`` section (sxid-catalog.schema.json)."""

    runbook: str
    codes: list[SxidCodeDoc]


def parse_sxid_catalog(doc: JSONObject) -> SxidCatalog:
    """A schema-valid ``sxids`` section -> the catalog."""
    valid = cast(SxidsDoc, doc)  # the caller validated it against the section's schema
    entries = {e["code"]: SxidEntry(code=e["code"], name=e["name"], fatal=e["fatal"], meaning=e.get("meaning", ""),
                                    source=e["source"]) for e in valid.get("codes") or ()}
    return SxidCatalog(entries=entries, fatal=Handling(**valid["fatal"]), non_fatal=Handling(**valid["non_fatal"]),
                       runbook=valid.get("runbook", "sxid"), source=valid["source"])


def merge_sxids(a: SxidCatalog | None, b: SxidCatalog) -> SxidCatalog:
    """A later file's codes replace the same codes of an earlier one; its handling wins."""
    if a is None:
        return b
    return SxidCatalog(entries={**a.entries, **b.entries}, fatal=b.fatal, non_fatal=b.non_fatal, runbook=b.runbook,
                       source=b.source or a.source)


DEFAULT_SXIDS = SxidCatalog(
    entries={},
    fatal=Handling("critical", GpuAction.REBOOT_NODE.value, True, "A fatal NVSwitch error.", "See the Fabric Manager User Guide."),
    non_fatal=Handling("warning", GpuAction.WATCH.value, False, "A non-fatal NVSwitch error.", "Watch for repeats."),
)

__all__ = ["DEFAULT_SXIDS", "Handling", "HandlingDoc", "SxidCodeDoc", "SxidsDoc", "SxidCatalog", "SxidEntry", "SxidLine", "find_sxid", "merge_sxids",
           "parse_sxid", "parse_sxid_catalog"]
