"""What an incident's GPU and node did before: the verdict of the history rules (rules/history.yml).

A verdict is decided by the pure judge (alertd/engine/judge.py) from a snapshot of the past that the store
reads (alertd/store/history_snapshot.py). It is kept on the incident as a typed field, shown by Slack,
PagerDuty, the UI and the API, and read by remediation as ``action`` and ``line``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.vocabulary import LADDER, LADDER_WORDS



def ladder_rank(action: str) -> int:
    """Where ``action`` stands on the ladder; -1 when it is not on it (no action, or the catalog's own text)."""
    return LADDER.index(action) if action in LADDER else -1


def ladder_action(text: str) -> str:
    """``text`` when it is a ladder step, else "". A signal's action is already one of the Xid catalog's
    (rules/xid-catalog.yml maps NVIDIA's buckets such as RESTART_BM to reboot_node when it is loaded)."""
    return text if text in LADDER else ""


def action_text(action: str) -> str:
    return LADDER_WORDS.get(action, action.replace("_", " "))


@dataclass(frozen=True, slots=True)
class HistoryVerdict:
    """One history rule's finding on an incident: why (``line``), what to do now (``action``) and what the
    incident's own signal said before (``was_action``), with the earlier incidents it rests on."""

    rule: str
    kind: str  # repeat_offender | repair_not_held | lemon_node
    line: str
    action: str  # a ladder step
    was_action: str = ""
    severity: str = ""  # raised to this when set
    incidents: tuple[str, ...] = ()  # the earlier incidents, newest first
    subject: str = ""  # the GPU UUID or the node the rule counted on

    def to_json(self) -> JSONObject:
        out: JSONObject = {"rule": self.rule, "kind": self.kind, "line": self.line, "action": self.action,
                           "wasAction": self.was_action, "incidents": list[JSONValue](self.incidents)}
        if self.severity:
            out["severity"] = self.severity
        if self.subject:
            out["subject"] = self.subject
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> "HistoryVerdict":
        incidents = data.get("incidents")
        return cls(rule=str(data.get("rule") or ""), kind=str(data.get("kind") or ""), line=str(data.get("line") or ""),
                   action=str(data.get("action") or ""), was_action=str(data.get("wasAction") or ""),
                   severity=str(data.get("severity") or ""), subject=str(data.get("subject") or ""),
                   incidents=tuple(str(i) for i in incidents) if isinstance(incidents, list) else ())
