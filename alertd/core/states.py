"""The closed sets of values the model uses: severities, an alert's status, an incident's status.

StrEnums: a member is its text wherever it goes (JSON, SQL parameters, templates, comparisons with text
from rules or stored rows), and the type checker knows which set a field holds; only ``repr`` differs
(show a value with ``str``). Text read at an edge (a webhook, the store, a rule file) becomes a member
through the ``as_*`` converters, a dict lookup.
"""
from __future__ import annotations

import enum


class Severity(enum.StrEnum):
    """How bad a signal or an incident is, least first (the order ranks them). A StrEnum: it is stored,
    sent and compared as its text."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


SEVERITIES = tuple(Severity)
RAISED_SEVERITIES = SEVERITIES[1:]  # what a storm's extent may raise it to (correlation.storm ... escalate)
# Looked up with text from rules, routing and stored payloads as well as with members.
SEVERITY_RANK: dict[str, int] = {name: rank for rank, name in enumerate(SEVERITIES)}
# The one place a site's own severity words become ours (an alert's `severity` label, lower-cased): the
# words of OpenPAI (fatal), of paging tools (page, P1-P5, sev1-sev5), of syslog and of Zabbix.
SEVERITY_ALIASES: dict[str, str] = {
    "fatal": "critical", "page": "critical", "emergency": "critical", "emerg": "critical", "alert": "critical",
    "crit": "critical", "disaster": "critical", "blocker": "critical", "urgent": "critical",
    "p0": "critical", "p1": "critical", "sev0": "critical", "sev1": "critical", "sev-1": "critical",
    "high": "error", "err": "error", "major": "error", "p2": "error", "sev2": "error", "sev-2": "error",
    "warn": "warning", "medium": "warning", "average": "warning", "minor": "warning", "p3": "warning",
    "sev3": "warning", "sev-3": "warning",
    "low": "info", "none": "info", "notice": "info", "informational": "info", "information": "info",
    "debug": "info", "ok": "info", "p4": "info", "p5": "info", "sev4": "info", "sev-4": "info", "sev5": "info",
}


class AlertStatus(enum.StrEnum):
    """An alert's status as Alertmanager sends it."""

    FIRING = "firing"
    RESOLVED = "resolved"


FIRING = AlertStatus.FIRING
RESOLVED = AlertStatus.RESOLVED


class IncidentStatus(enum.StrEnum):
    """Incident states, in lifecycle order (the text is what the API, the store and the messages show)."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    CLOSED = "resolved"


OPEN = IncidentStatus.OPEN
ACKNOWLEDGED = IncidentStatus.ACKNOWLEDGED
CLOSED = IncidentStatus.CLOSED
INCIDENT_STATES = tuple(IncidentStatus)

# Text -> member by dict lookup: calling the enum costs ~30x as much, and alerts are converted one by one.
_SEVERITY = {s.value: s for s in Severity}
_ALERT_STATUS = {s.value: s for s in AlertStatus}
_INCIDENT_STATUS = {s.value: s for s in IncidentStatus}


def as_severity(text: str) -> Severity:
    """Severity text from rules, labels (both schema-checked) or the store as the member."""
    try:
        return _SEVERITY[text]
    except KeyError:
        raise ValueError(f"severity {text!r} is not one of {', '.join(SEVERITIES)}") from None


def as_alert_status(text: str) -> AlertStatus:
    try:
        return _ALERT_STATUS[text]
    except KeyError:
        raise ValueError(f"alert status {text!r} is not firing or resolved") from None


def as_incident_status(text: str) -> IncidentStatus:
    try:
        return _INCIDENT_STATUS[text]
    except KeyError:
        raise ValueError(f"incident status {text!r} is not one of {', '.join(INCIDENT_STATES)}") from None


__all__ = ["ACKNOWLEDGED", "CLOSED", "FIRING", "INCIDENT_STATES", "OPEN", "RAISED_SEVERITIES", "RESOLVED", "SEVERITIES",
           "SEVERITY_RANK", "AlertStatus", "IncidentStatus", "Severity", "as_alert_status", "as_incident_status",
           "as_severity"]
