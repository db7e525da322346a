"""A rule file as its sections' JSON Schemas admit it (alertd/schemas/*.schema.json), for the parsers that
read a section once it has passed its schema (alertd.rules.ruleset._read_section, the one place a section's
document becomes typed). Each section's own shapes live beside its parser; these are the rest."""
from __future__ import annotations

from typing import TypedDict

from alertd.core.json_types import JSONObject
from alertd.gpu.catalog import XidEntryDoc
from alertd.rules.evidence import EvidenceDoc
from alertd.rules.history import HistoryRuleDoc
from alertd.rules.kube_health import KubeHealthDoc


class SignalDoc(TypedDict, total=False):
    """One ``signals`` entry (signals.schema.json; kind and match required)."""

    kind: str
    match: list[str]
    detail: str
    severity: str
    category: str
    runbook: str


class RuleFileDoc(TypedDict, total=False):
    """A rule file: any of the sections (a section may be empty: null)."""

    xids: list[XidEntryDoc]
    signals: list[SignalDoc]
    evidence: EvidenceDoc | None
    correlation: JSONObject | None  # declared: alertd.rules.correlation_section
    routing: JSONObject  # declared: alertd.rules.routing_section
    rma: list[JSONObject]  # declared: alertd.rules.rma.RmaFile
    remediation: JSONObject | None  # declared: alertd.rules.remediation.RemediationFile
    kube_health: KubeHealthDoc | None
    recovery_actions: JSONObject | None
    sxids: JSONObject | None
    history: list[HistoryRuleDoc]


__all__ = ["RuleFileDoc", "SignalDoc"]
