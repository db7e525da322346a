"""What the GPU itself asks for: the driver's recovery action (Xid 154), decoded from data.

The driver reports a change of a GPU's required recovery action as Xid 154 (NVIDIA's Xid catalog,
GPU_RECOVERY_ACTION_CHANGED), in the kernel log as::

    NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)

and NVML / DCGM expose the current action as a number (``nvmlDeviceGpuRecoveryAction_t``; DCGM field 1523,
``DCGM_FI_DEV_GPU_RECOVERY_ACTION``, formerly ``DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION``). The table of actions
(number, the driver's words, what alertd does) is data: the ``recovery_actions`` section of
rules/gpu-recovery.yml. This module only reads it: pure functions, no I/O.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict, cast

from alertd.core.json_types import JSONObject
from alertd.core.model import Signal, as_severity

XID_RECOVERY = 154  # GPU_RECOVERY_ACTION_CHANGED

# "changed from 0x0 (None) to 0x2 (Node Reboot Required)"; the "0xN (" part may be missing.
_CHANGE = re.compile(
    r"recovery\s+action\s+changed\s+from\s+(?P<old>.*?)\s+to\s+(?:(?P<num>0x[0-9a-fA-F]+|\d+)\s*)?"
    r"(?:\((?P<paren>[^()]*)\)|(?P<bare>[A-Za-z][A-Za-z0-9 ]*[A-Za-z0-9]))", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RecoveryAction:
    """One value of the driver's recovery action, and what it makes of an incident."""

    value: int  # nvmlDeviceGpuRecoveryAction_t
    key: str  # none, gpu_reset, node_reboot, drain_p2p, drain_and_reset: what remediation policies name
    name: str  # the driver's words in the Xid 154 line ("Node Reboot Required")
    action: str  # the incident's action: ignore, reset_gpu, reboot_node, drain_p2p, drain_reset
    severity: str
    drain: bool = False
    meaning: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class RecoveryTable:
    """The recovery actions by number and by the driver's words, and the labels that may carry the value."""

    actions: tuple[RecoveryAction, ...] = ()
    labels: tuple[str, ...] = ()  # alert labels carrying the DCGM value, first present wins

    def by_value(self, value: int) -> RecoveryAction | None:
        return next((a for a in self.actions if a.value == value), None)

    def by_name(self, name: str) -> RecoveryAction | None:
        wanted = _words(name)
        return next((a for a in self.actions if _words(a.name) == wanted or a.key == wanted.replace(" ", "_")), None)

    def read(self, value: str) -> RecoveryAction | None:
        """A label's value: the number DCGM exports ("2", "2.0", "0x2") or the driver's words."""
        text = value.strip()
        number = _number(text)
        return self.by_value(number) if number is not None else self.by_name(text)

    def from_text(self, text: str) -> RecoveryAction | None:
        """The action an Xid 154 message changes to (the number wins over the words when both are known)."""
        m = _CHANGE.search(text)
        if m is None:
            return None
        number = _number(m.group("num") or "")
        found = self.by_value(number) if number is not None else None
        return found or self.by_name(m.group("paren") or m.group("bare") or "")

    def from_labels(self, labels: Mapping[str, str]) -> tuple[RecoveryAction, str] | None:
        for name in self.labels:
            value = labels.get(name)
            if value:
                found = self.read(value)
                if found is not None:
                    return found, f'label {name}="{value}"'
        return None


def _words(text: str) -> str:
    return " ".join(text.replace("_", " ").lower().split())


def _number(text: str) -> int | None:
    text = text.strip().lower()
    try:
        if text.startswith("0x"):
            return int(text, 16)
        return int(float(text)) if text and text.replace(".", "", 1).isdigit() else None
    except ValueError:
        return None


def recovery_signal(base: Signal, found: RecoveryAction, evidence: str) -> Signal:
    """The Xid 154 signal with the action the GPU asks for: its action, severity and title."""
    return Signal(
        kind=base.kind, severity=as_severity(found.severity), category=base.category, xid=base.xid,
        title=f"Xid {base.xid}: GPU asks for recovery: {found.name}", meaning=found.meaning or base.meaning,
        action=found.action, investigate=base.investigate, drain=found.drain, runbook=base.runbook,
        detail=found.key, basis=f"{base.basis}; recovery action from {evidence}" if base.basis else
        f"recovery action from {evidence}")


class RecoveryActionDoc(TypedDict):
    """One ``actions`` entry: recovery-actions.schema.json requires every key, the fields of RecoveryAction."""

    value: int
    key: str
    name: str
    action: str
    severity: str
    drain: bool
    meaning: str
    source: str


class RecoveryActionsDoc(TypedDict, total=False):
    """The ``recovery_actions`` section (recovery-actions.schema.json)."""

    actions: list[RecoveryActionDoc]
    labels: list[str]


def parse_recovery(doc: JSONObject) -> RecoveryTable:
    """A schema-valid ``recovery_actions`` section -> the table."""
    valid = cast(RecoveryActionsDoc, doc)  # the caller validated it against the section's schema
    return RecoveryTable(actions=tuple(RecoveryAction(**e) for e in valid.get("actions") or ()),
                         labels=tuple(valid.get("labels") or ()))


def merge_recovery(a: RecoveryTable, b: RecoveryTable) -> RecoveryTable:
    """A later file's action replaces an earlier one with the same value; label lists join."""
    later = {x.value for x in b.actions}
    return RecoveryTable(actions=tuple(x for x in a.actions if x.value not in later) + b.actions,
                         labels=tuple(dict.fromkeys(a.labels + b.labels)))


__all__ = ["RecoveryAction", "RecoveryActionDoc", "RecoveryActionsDoc", "RecoveryTable", "XID_RECOVERY", "merge_recovery", "parse_recovery",
           "recovery_signal"]
