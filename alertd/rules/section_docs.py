"""A rule file as its sections' JSON Schemas admit it (alertd/schemas/*.schema.json), for the parsers that
read a section once it has passed its schema (alertd.rules.ruleset._read_section, the one place a section's
document becomes typed). Each section's own shapes live beside its parser; these are the rest. The sections
declared as Structs (alertd/rules/files.py) are decoded instead, and have no shape here."""
from __future__ import annotations

from typing import TypedDict

from alertd.rules.jobs import DomainDoc, JobDoc
from alertd.rules.remediation import RemediationDoc
from alertd.rules.rma import RmaRuleDoc
from alertd.rules.routing import RoutingDoc
from alertd.rules.storm_says import EscalateDoc, ReadingDoc


class GroupDoc(TypedDict, total=False):
    name: str  # required, with by
    match: list[str]
    by: list[str]
    allow_empty: bool


class StormEventDoc(TypedDict, total=False):
    name: str  # required, with by
    match: list[str]
    by: list[str]
    reading: ReadingDoc
    advice: str
    escalate: list[EscalateDoc]


class StormDoc(TypedDict, total=False):
    enabled: bool
    min_nodes: int
    window: str
    signals: list[str]
    events: list[StormEventDoc]
    pending: str
    followers: list[str]


class ResponseDoc(TypedDict, total=False):
    signals: list[str]
    window: str
    repair_timeout: str
    still_down: list[str]


class WatchdogDoc(TypedDict, total=False):
    alertnames: list[str]
    timeout: str
    severity: str


class CorrelationDoc(TypedDict, total=False):
    """The ``correlation`` section (correlation.schema.json)."""

    hold_down: str
    reopen_window: str
    fold_window: str
    groups: list[GroupDoc]
    storm: StormDoc
    response: ResponseDoc
    watchdog: WatchdogDoc
    job: JobDoc
    domains: DomainDoc


class RuleFileDoc(TypedDict, total=False):
    """A rule file: any of the sections (a section may be empty: null)."""

    correlation: CorrelationDoc | None
    routing: RoutingDoc
    rma: list[RmaRuleDoc]
    remediation: RemediationDoc | None


__all__ = ["CorrelationDoc", "GroupDoc", "ResponseDoc", "RuleFileDoc", "StormDoc", "StormEventDoc",
           "WatchdogDoc"]
