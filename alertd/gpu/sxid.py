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
from typing import Annotated

from msgspec import Meta

from alertd.core.model import Signal, as_severity
from alertd.core.sections import Section, declared_default
from alertd.core.vocabulary import SXID_ACTIONS, Category, GpuAction, SignalKind
from alertd.gpu.pci import PCI_ADDRESS, normalize_pci
from alertd.schemas.declared import RUNBOOK_PATTERN, SEVERITY_WORDS, RuleFile, in_order, word

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


A = GpuAction
# The actions an SXid may ask for, in the order its errors list them
ACTIONS = in_order((A.IGNORE, A.WATCH, A.RESET_GPU, A.REBOOT_NODE, A.CONTACT_SUPPORT), SXID_ACTIONS)


class Handling(Section, frozen=True):
    """What a fatal, or a non-fatal, SXid asks of people."""

    severity: Annotated[str, word(SEVERITY_WORDS, "The incident's severity.")]
    action: Annotated[str, word(ACTIONS, "The incident's action.")]
    drain: Annotated[bool, Meta(description="Whether the node must be emptied of work first.")]
    meaning: Annotated[str, Meta(min_length=10, max_length=600, description=(
        "What it does to running work, for the on-call engineer."))]
    investigate: Annotated[str, Meta(min_length=3, max_length=600, description="What to check if it recurs.")]


class SxidEntry(Section, frozen=True, kw_only=True):
    """One SXid code alertd names."""

    code: Annotated[int, Meta(ge=1, le=99999, description="The SXid number as the NVSwitch driver logs it.")]
    name: Annotated[str, Meta(min_length=3, max_length=80, description="Short name used in incident titles.")]
    fatal: Annotated[bool, Meta(description=(
        "Whether NVIDIA reports the code as fatal; the line's own Fatal / Non-fatal word wins."))]
    meaning: Annotated[str, Meta(max_length=600, description="What the error is, in one or two sentences.")] = ""
    source: Annotated[str, Meta(min_length=10, description=(
        "Where the code, its words and its fatality are published."))]


class SxidsSection(Section, frozen=True, kw_only=True):
    """How SXid lines become incidents."""

    fatal: Annotated[Handling, Meta(description="A fatal SXid (the line says Fatal, or the catalog does).")]
    non_fatal: Annotated[Handling, Meta(description=(
        "A non-fatal SXid, and one whose line and catalog name no fatality."))]
    runbook: Annotated[str, Meta(pattern=RUNBOOK_PATTERN, description=(
        "Runbook page name under runbooks/, without .md. Default sxid."))] = "sxid"
    source: Annotated[str, Meta(min_length=10, description=(
        "Provenance of the handling: the NVIDIA documents it follows."))]
    codes: Annotated[tuple[SxidEntry, ...], Meta(description=(
        "SXid codes alertd names. A code missing here is titled by its line's own text."))] = ()


class SxidCatalogFile(Section, frozen=True):
    """NVSwitch SXid errors as data (rules/sxid-catalog.yml): what a fatal and a non-fatal SXid ask of people,
    and the codes alertd names. Files loaded later replace codes with the same number and the handling."""

    sxids: SxidsSection


SXID_CATALOG = RuleFile("sxid-catalog", "alertd SXid catalog", SxidCatalogFile, {Handling: "handling", SxidEntry: "code"})


@dataclass(frozen=True, slots=True)
class SxidCatalog:
    entries: Mapping[int, SxidEntry]
    fatal: Handling
    non_fatal: Handling
    runbook: str = declared_default(SxidsSection, "runbook", str)
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


def parse_sxid_catalog(section: SxidsSection) -> SxidCatalog:
    """A decoded ``sxids`` section -> the catalog."""
    return SxidCatalog(entries={e.code: e for e in section.codes}, fatal=section.fatal, non_fatal=section.non_fatal,
                       runbook=section.runbook, source=section.source)


def merge_sxids(a: SxidCatalog | None, b: SxidCatalog) -> SxidCatalog:
    """A later file's codes replace the same codes of an earlier one; its handling wins."""
    if a is None:
        return b
    return SxidCatalog(entries={**a.entries, **b.entries}, fatal=b.fatal, non_fatal=b.non_fatal, runbook=b.runbook,
                       source=b.source or a.source)


DEFAULT_SXIDS = SxidCatalog(
    entries={},
    fatal=Handling(severity="critical", action=GpuAction.REBOOT_NODE.value, drain=True, meaning="A fatal NVSwitch error.",
                   investigate="See the Fabric Manager User Guide."),
    non_fatal=Handling(severity="warning", action=GpuAction.WATCH.value, drain=False,
                       meaning="A non-fatal NVSwitch error.", investigate="Watch for repeats."),
)

__all__ = ["DEFAULT_SXIDS", "Handling", "SXID_CATALOG", "SxidCatalog", "SxidsSection", "SxidEntry", "SxidLine", "find_sxid", "merge_sxids",
           "parse_sxid", "parse_sxid_catalog"]
