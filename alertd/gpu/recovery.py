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
from typing import Annotated

from msgspec import Meta

from alertd.core.model import Signal, as_severity
from alertd.core.sections import Section
from alertd.core.vocabulary import RECOVERY_ACTIONS, GpuAction
from alertd.schemas.declared import SEVERITY_WORDS, RuleFile, in_order, word

XID_RECOVERY = 154  # GPU_RECOVERY_ACTION_CHANGED

# "changed from 0x0 (None) to 0x2 (Node Reboot Required)"; the "0xN (" part may be missing.
_CHANGE = re.compile(
    r"recovery\s+action\s+changed\s+from\s+(?P<old>.*?)\s+to\s+(?:(?P<num>0x[0-9a-fA-F]+|\d+)\s*)?"
    r"(?:\((?P<paren>[^()]*)\)|(?P<bare>[A-Za-z][A-Za-z0-9 ]*[A-Za-z0-9]))", re.IGNORECASE)


A = GpuAction
# What the driver's recovery action may ask of an incident, in the order its errors list them
ACTIONS = in_order((A.IGNORE, A.RESET_GPU, A.REBOOT_NODE, A.DRAIN_P2P, A.DRAIN_RESET, A.CONTACT_SUPPORT), RECOVERY_ACTIONS)


class RecoveryAction(Section, frozen=True):
    """One recovery action value."""

    value: Annotated[int, Meta(ge=0, le=255, description=(
        "The number (nvmlDeviceGpuRecoveryAction_t), as DCGM exports it and the Xid 154 line writes it (0x2)."))]
    key: Annotated[str, Meta(pattern="^[a-z][a-z0-9_]*$", description=(
        "A stable name remediation policies match on (remediation.policies[].recovery) and the incident's signal "
        "detail."))]
    name: Annotated[str, Meta(min_length=2, description=(
        "The driver's words in the Xid 154 line, e.g. 'Node Reboot Required'; matched without regard to case."))]
    action: Annotated[str, word(ACTIONS, "The incident's action when this is what the GPU asks for.")]
    severity: Annotated[str, word(SEVERITY_WORDS, "The incident's severity: info pages nobody.")]
    drain: Annotated[bool, Meta(description=(
        "Whether the GPU (or the node, for reboot_node) must be emptied of work first."))]
    meaning: Annotated[str, Meta(min_length=10, max_length=600, description=(
        "What the GPU asks for, for the on-call engineer."))]
    source: Annotated[str, Meta(min_length=10, description=(
        "Provenance: the NVIDIA document that names the value and its words."))]


class RecoveryActionsSection(Section, frozen=True, kw_only=True):
    """The decode table and where an alert carries the value."""

    labels: Annotated[tuple[Annotated[str, Meta(pattern="^[A-Za-z_][A-Za-z0-9_]*$")], ...], Meta(description=(
        "Alert labels that carry the DCGM recovery action value (the number, or the driver's words), first present "
        "wins; read before the Xid 154 text."))] = ()
    actions: Annotated[tuple[RecoveryAction, ...], Meta(min_length=1, description=(
        "One entry per value. Values must be unique within a file."))]


class RecoveryActionsFile(Section, frozen=True):
    """The recovery action the driver asks for (Xid 154, NVML nvmlDeviceGpuRecoveryAction_t, DCGM field
    DCGM_FI_DEV_GPU_RECOVERY_ACTION) as data (rules/gpu-recovery.yml): its number, the driver's words, and what it
    makes of an incident. A later file's action replaces the one with the same value."""

    recovery_actions: RecoveryActionsSection


RECOVERY_ACTIONS_FILE = RuleFile("recovery-actions", "alertd GPU recovery actions", RecoveryActionsFile,
                                 {RecoveryAction: "action"})


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


def parse_recovery(section: RecoveryActionsSection) -> RecoveryTable:
    """A decoded ``recovery_actions`` section -> the table."""
    return RecoveryTable(actions=section.actions, labels=section.labels)


def merge_recovery(a: RecoveryTable, b: RecoveryTable) -> RecoveryTable:
    """A later file's action replaces an earlier one with the same value; label lists join."""
    later = {x.value for x in b.actions}
    return RecoveryTable(actions=tuple(x for x in a.actions if x.value not in later) + b.actions,
                         labels=tuple(dict.fromkeys(a.labels + b.labels)))


__all__ = ["RECOVERY_ACTIONS_FILE", "RecoveryAction", "RecoveryActionsSection", "RecoveryTable", "XID_RECOVERY", "merge_recovery", "parse_recovery",
           "recovery_signal"]
