"""A rule file as its sections' JSON Schemas admit it (alertd/schemas/*.schema.json), for the parser that
reads a section once it has passed its schema (alertd.rules.ruleset._read_section, the one place a section's
document becomes typed). Every section is declared as Structs (alertd/rules/rule_files.py lists them), which
decode it; here it is only the JSON its declaration reads."""
from __future__ import annotations

from typing import TypedDict

from alertd.core.json_types import JSONObject


class RuleFileDoc(TypedDict, total=False):
    """A rule file: any of the sections (a section may be empty: null)."""

    xids: list[JSONObject]
    signals: list[JSONObject]
    evidence: JSONObject | None
    correlation: JSONObject | None
    routing: JSONObject
    rma: list[JSONObject]
    remediation: JSONObject | None
    kube_health: JSONObject | None
    recovery_actions: JSONObject | None
    sxids: JSONObject | None
    history: list[JSONObject]


__all__ = ["RuleFileDoc"]
