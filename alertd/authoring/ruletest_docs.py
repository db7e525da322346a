"""A rule test file (``alertd test``) as ruletest.schema.json admits it, typed once it has passed the schema
and the time checks (alertd.authoring.ruletest.load_test_file). Times are a number of seconds after the
test's start, a duration after it (``5m``) or an RFC 3339 time."""
from __future__ import annotations

from typing import TypedDict

Time = float | str
Value = str | float  # a label or annotation value as YAML gives it (a number is written as its text)


class DefaultsDoc(TypedDict, total=False):
    labels: dict[str, Value]
    annotations: dict[str, Value]


class InputDoc(TypedDict, total=False):
    """One alert of a test's ``input`` (at and labels required); ``every``/``until`` repeat it."""

    at: Time
    labels: dict[str, Value]
    annotations: dict[str, Value]
    expr: str
    status: str  # firing, resolved
    fingerprint: str
    starts_at: Time
    ends_at: Time
    every: str
    until: Time


class ActionDoc(TypedDict, total=False):
    """What a person does at a moment (at, action, incident required)."""

    at: Time
    action: str
    incident: str
    by: str


class IncidentSpec(TypedDict, total=False):
    """An expected incident: every key given must hold (alertd.authoring.ruletest._actual reads each)."""

    id: str
    key: str
    group: str
    title: str
    title_contains: str
    severity: str
    category: str
    status: str
    signals: list[str]
    xids: list[int]
    action: str
    runbook: str
    detail: str
    cluster: str
    node: str
    namespace: str
    pod: str
    nodes: list[str]
    fleet: bool
    children: int | list[str]
    parent_id: str
    previous_id: str
    members: int
    firing: int
    folded: int
    flaps: int
    receivers: list[str]
    notified: list[str]
    remediation: str
    muted: bool


class ExpectationDoc(TypedDict, total=False):
    at: Time  # required
    count: int
    open: int
    partial: bool
    incidents: list[IncidentSpec]


class TestDoc(TypedDict, total=False):
    """One test (name, input, expect required)."""

    name: str
    start: str
    input: list[InputDoc]
    actions: list[ActionDoc]
    eval_at: list[Time]
    expect: list[ExpectationDoc]


class RuleTestFileDoc(TypedDict, total=False):
    """A test file (tests required)."""

    rule_files: list[str]
    prometheus_rules: list[str]
    start: str
    defaults: DefaultsDoc
    tests: list[TestDoc]


__all__ = ["ActionDoc", "DefaultsDoc", "ExpectationDoc", "IncidentSpec", "InputDoc", "RuleTestFileDoc", "TestDoc",
           "Time", "Value"]
