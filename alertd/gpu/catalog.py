"""The Xid catalog: data in rules/xid-catalog.yml, loaded and validated here."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar

from msgspec import Meta

from alertd.core.json_types import JSONValue, obj
from alertd.core.model import Signal, as_severity
from alertd.core.sections import Section
from alertd.gpu.recovery import XID_RECOVERY, RecoveryTable, recovery_signal
from alertd.schemas import validate_document
from alertd.schemas.declared import RUNBOOK_PATTERN, SEVERITY_WORDS, RuleFile, in_order, word
from alertd.core.vocabulary import (CATALOG_ACTIONS, DRAINED_ACTIONS, NOT_HARDWARE_ACTIONS, RULED_CATEGORIES, Category,
                                    GpuAction, SignalKind)

A = GpuAction
# The catalog's actions in the order its errors list them
ACTIONS = in_order((A.RESTART_APP, A.RESET_GPU, A.REBOOT_NODE, A.CONTACT_SUPPORT, A.IGNORE, A.WATCH), CATALOG_ACTIONS)


def _action_in(actions: frozenset[GpuAction]) -> list[JSONValue]:
    return list(in_order(ACTIONS, actions))


class XidEntry(Section, frozen=True):
    """One Xid code. Every field is required so an override is always a complete, reviewed entry."""

    SCHEMA: ClassVar[dict[str, object]] = {"allOf": [
        {"if": {"properties": {"fold_into_previous": {"const": True}}, "required": ["fold_into_previous"]},
         "then": {"properties": {"severity": {"const": "info"}, "drain": {"const": False}}},
         "description": "A fallout code never raises severity or drains on its own; the Xid it follows decides."},
        {"if": {"properties": {"action": {"enum": _action_in(DRAINED_ACTIONS)}}, "required": ["action"]},
         "then": {"properties": {"drain": {"const": True}}},
         "description": "Resetting a GPU or rebooting a node needs its work drained first."},
        {"if": {"properties": {"action": {"enum": _action_in(NOT_HARDWARE_ACTIONS)}}, "required": ["action"]},
         "then": {"properties": {"drain": {"const": False}}},
         "description": "Actions that leave the GPU in service do not drain it."},
    ]}

    code: Annotated[int, Meta(ge=1, le=65535, description=(
        "The Xid number as the driver logs it ('NVRM: Xid (PCI:0000:3b:00): 79, ...') and dcgm-exporter exports "
        "it."))]
    name: Annotated[str, Meta(min_length=3, max_length=80, pattern=r"\S", description=(
        "Short human name used in incident titles ('Xid 79: GPU has fallen off the bus')."))]
    meaning: Annotated[str, Meta(min_length=20, max_length=600, description=(
        "One to three sentences an on-call engineer understands: what happened and what it does to running "
        "work."))]
    severity: Annotated[str, word(SEVERITY_WORDS, (
        "critical: node or GPU out of service until someone acts (reboot_node); error: GPU must be reset or "
        "serviced before it is trusted (reset_gpu, most contact_support); warning: the job failed or something to "
        "watch (restart_app, watch); info: nothing to do (ignore)."))]
    category: Annotated[str, word(in_order(Category, RULED_CATEGORIES), (
        "Who most likely owns the problem: application (the job's fault, GPU healthy), driver (driver, firmware "
        "or GSP), memory (ECC, row remapping, containment), nvlink (NVLink, NVSwitch, C2C), hardware (board, PCIe, "
        "power), informational (no fault). Picks the xid-<category> runbook and drives correlation grouping."))]
    action: Annotated[str, word(ACTIONS, (
        "The immediate action, derived from NVIDIA's Immediate Action bucket: restart_app (restart the job), "
        "reset_gpu (drain the GPU and nvidia-smi -r), reboot_node (drain and reboot or power-cycle), "
        "contact_support (hands-on service or vendor case), ignore (nothing to do), watch (nothing now; "
        "recurrences need a look)."))]
    investigate: Annotated[str, Meta(min_length=3, max_length=600, description=(
        "The investigatory action, short: what to check if it recurs or is unexpected, derived from NVIDIA's "
        "Investigatory Action bucket."))]
    drain: Annotated[bool, Meta(description=(
        "Whether the GPU (or, for reboot_node, the node) must be drained of work before recovery. True for "
        "reset_gpu and reboot_node, and for faults that need hands-on service."))]
    runbook: Annotated[str, Meta(pattern=RUNBOOK_PATTERN, description=(
        "Runbook page name under runbooks/, without the .md suffix (e.g. xid-hardware)."))]
    fold_into_previous: Annotated[bool, Meta(description=(
        "True only for fallout codes (e.g. 45): the alert joins the incident of the Xid it follows on the same GPU "
        "instead of opening its own."))]
    source: Annotated[str, Meta(min_length=10, description=(
        "Provenance: the NVIDIA document the entry comes from, NVIDIA's mnemonic and resolution buckets, and any "
        "deliberate deviation with its reason."))]

    def signal(self, detail: str = "", basis: str = "") -> Signal:
        return Signal(
            kind=SignalKind.XID.value,
            severity=as_severity(self.severity),
            category=self.category,
            xid=self.code,
            title=f"Xid {self.code}: {self.name}",
            meaning=self.meaning,
            action=self.action,
            investigate=self.investigate,
            drain=self.drain,
            runbook=self.runbook,
            detail=detail,
            fold_into_previous=self.fold_into_previous,
            basis=basis,
        )


class XidCatalogFile(Section, frozen=True):
    """The NVIDIA Xid catalog as data (rules/xid-catalog.yml): what each Xid code means for an on-call engineer,
    how urgent it is and what to do first. Files loaded later replace entries with the same code."""

    xids: Annotated[tuple[XidEntry, ...], Meta(min_length=1, description=(
        "One entry per Xid code. Codes must be unique within a file (the loader reports duplicates; JSON Schema "
        "cannot express per-key uniqueness)."))]


XID_CATALOG = RuleFile("xid-catalog", "alertd Xid catalog", XidCatalogFile, {XidEntry: "entry"})


class XidCatalog:
    def __init__(self, entries: list[XidEntry], recovery: RecoveryTable | None = None):
        self.entries = {e.code: e for e in entries}
        self.recovery = recovery or RecoveryTable()

    def get(self, code: int) -> XidEntry | None:
        return self.entries.get(code)

    def unknown(self, code: int) -> XidEntry:
        """Codes missing from the catalog still page, conservatively."""
        return XidEntry(
            code=code,
            name="unknown Xid",
            meaning=f"Xid {code} is not in the catalog; look it up in NVIDIA's Xid documentation.",
            severity="error",
            category=Category.DRIVER.value,
            action=GpuAction.CONTACT_SUPPORT.value,
            investigate="",
            drain=False,
            runbook="xid-driver",
            fold_into_previous=False,
            source="",
        )

    def lookup(self, code: int) -> XidEntry:
        return self.get(code) or self.unknown(code)

    def signal_for(self, code: int, text: str = "", labels: Mapping[str, str] | None = None, *, basis: str = "",
                   detail: str = "") -> Signal:
        """The signal for an Xid, with what an Xid 154 asks for: from the labels (DCGM's value) when they carry
        it, else from the text (the driver's line); the catalog's own entry when neither says."""
        base = self.lookup(code).signal(detail=detail, basis=basis)
        if code != XID_RECOVERY:
            return base
        found = self.recovery.from_labels(labels) if labels else None
        if found is not None:
            return recovery_signal(base, found[0], found[1])
        action = self.recovery.from_text(text) if text else None
        return recovery_signal(base, action, f"the Xid {code} text") if action is not None else base

    @classmethod
    def from_document(cls, doc: object, source: str = "<catalog>") -> "XidCatalog":
        validate_document("xid-catalog", doc, source)
        return cls(list(XID_CATALOG.decode(obj(doc, source)).xids))

    @classmethod
    def load(cls, path: Path) -> "XidCatalog":
        from alertd.core.yamlio import load_yaml

        return cls.from_document(load_yaml(path), str(path))
