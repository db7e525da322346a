"""The Xid catalog: data in rules/xid-catalog.yml, loaded and validated here."""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict, cast

from alertd.core.model import Signal, as_severity
from alertd.gpu.recovery import XID_RECOVERY, RecoveryTable, recovery_signal
from alertd.schemas import validate_document
from alertd.core.vocabulary import Category, GpuAction, SignalKind


class XidEntryDoc(TypedDict):
    """One ``xids`` entry: xid-catalog.schema.json requires every key."""

    code: int
    name: str
    meaning: str
    severity: str
    category: str
    action: str
    investigate: str
    drain: bool
    runbook: str
    fold_into_previous: bool
    source: str


class XidCatalogDoc(TypedDict, total=False):
    xids: list[XidEntryDoc]


@dataclass(frozen=True, slots=True)
class XidEntry:
    code: int
    name: str
    meaning: str
    severity: str
    category: str
    action: str
    investigate: str = ""
    drain: bool = False
    runbook: str = ""
    fold_into_previous: bool = False
    source: str = ""

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
            runbook="xid-driver",
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
        valid = cast(XidCatalogDoc, doc)  # valid now
        return cls([XidEntry(**entry) for entry in valid.get("xids") or []])

    @classmethod
    def load(cls, path: Path) -> "XidCatalog":
        from alertd.core.yamlio import load_yaml

        return cls.from_document(load_yaml(path), str(path))
