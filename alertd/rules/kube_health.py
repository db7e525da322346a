"""rules/sources.yml -> which node conditions and Events the kube-health source turns into alerts.

Data, not code: a site adds its own agent's condition by adding an entry (a later file's entries are
tried after the shipped ones). The regexes are anchored like Alertmanager's, except an Event's
``message``, which is searched (a kernel line sits inside NPD's message).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypedDict

from alertd.core.yamlio import Path_
from alertd.rules.checker import Checker

DEFAULT_WINDOW = timedelta(minutes=10)
DEFAULT_SETTLE = timedelta(seconds=5)


def _anchored(pattern: str) -> re.Pattern[str]:
    return re.compile(f"(?:{pattern})\\Z")


@dataclass(frozen=True, slots=True)
class ConditionRule:
    producer: str
    type: re.Pattern[str]
    bad_status: str
    alertname: str
    reason: re.Pattern[str] | None = None
    severity: str = ""
    xid_from_reason: re.Pattern[str] | None = None

    def matches(self, cond_type: str, reason: str) -> bool:
        return bool(self.type.match(cond_type)) and (self.reason is None or bool(self.reason.match(reason)))

    def watches(self, cond_type: str) -> bool:
        return bool(self.type.match(cond_type))


@dataclass(frozen=True, slots=True)
class EventRule:
    producer: str
    reason: re.Pattern[str]
    alertname: str
    component: re.Pattern[str] | None = None
    message: re.Pattern[str] | None = None
    severity: str = ""

    def matches(self, reason: str, component: str, message: str) -> bool:
        return bool(self.reason.match(reason)) and (self.component is None or bool(self.component.match(component))) \
            and (self.message is None or self.message.search(message) is not None)


@dataclass(frozen=True, slots=True)
class AdmissionRule:
    reason: re.Pattern[str]
    resource: re.Pattern[str]
    alertname: str
    severity: str = "error"
    min_pods: int = 3
    window: timedelta = DEFAULT_WINDOW
    settle: timedelta = DEFAULT_SETTLE
    max_pods: int = 500

    def matches(self, reason: str, message: str) -> bool:
        return bool(self.reason.match(reason)) and self.resource.search(message) is not None


@dataclass(frozen=True, slots=True)
class KubeHealthRules:
    conditions: tuple[ConditionRule, ...] = ()
    events: tuple[EventRule, ...] = ()
    admission: AdmissionRule | None = None
    alertnames: frozenset[str] = field(default_factory=frozenset)

    def condition(self, cond_type: str, reason: str) -> ConditionRule | None:
        return next((r for r in self.conditions if r.matches(cond_type, reason)), None)

    def watches(self, cond_type: str) -> bool:
        return any(r.watches(cond_type) for r in self.conditions)

    def event(self, reason: str, component: str, message: str) -> EventRule | None:
        return next((r for r in self.events if r.matches(reason, component, message)), None)


def _regex(check: Checker, value: str | None, path: Path_, *, anchored: bool = True) -> re.Pattern[str] | None:
    if value is None:
        return None
    try:
        return _anchored(value) if anchored else re.compile(value)
    except re.error as exc:
        check.problem(path, f"not a valid regular expression: {exc}")
        return re.compile(r"(?!)")


class ConditionDoc(TypedDict, total=False):
    """One ``kube_health.conditions`` entry (kube-health.schema.json; producer, type, bad_status, alertname
    required)."""

    producer: str
    type: str
    bad_status: str
    reason: str
    alertname: str
    severity: str
    xid_from_reason: str


class EventDoc(TypedDict, total=False):
    """One ``kube_health.events`` entry (producer, reason, alertname required)."""

    producer: str
    reason: str
    component: str
    message: str
    alertname: str
    severity: str


class AdmissionDoc(TypedDict, total=False):
    """``kube_health.admission`` (reason, resource, alertname required)."""

    reason: str
    resource: str
    alertname: str
    severity: str
    min_pods: int
    window: str
    settle: str
    max_pods: int


class KubeHealthDoc(TypedDict, total=False):
    conditions: list[ConditionDoc]
    events: list[EventDoc]
    admission: AdmissionDoc


def parse_kube_health(doc: KubeHealthDoc, check: Checker, before: KubeHealthRules | None) -> KubeHealthRules:
    """Schema-valid ``kube_health`` section -> rules, after ``before`` (an earlier file's)."""
    base = before or KubeHealthRules()
    conditions = list(base.conditions)
    for i, e in enumerate(doc.get("conditions") or ()):
        at = ("kube_health", "conditions", i)
        conditions.append(ConditionRule(
            producer=e["producer"], type=_regex(check, e["type"], at + ("type",)) or re.compile("(?!)"),
            bad_status=e["bad_status"], alertname=e["alertname"], reason=_regex(check, e.get("reason"), at + ("reason",)),
            severity=e.get("severity", ""), xid_from_reason=_regex(check, e.get("xid_from_reason"), at + ("xid_from_reason",))))
    events = list(base.events)
    for i, ev in enumerate(doc.get("events") or ()):
        at = ("kube_health", "events", i)
        events.append(EventRule(
            producer=ev["producer"], reason=_regex(check, ev["reason"], at + ("reason",)) or re.compile("(?!)"),
            alertname=ev["alertname"], component=_regex(check, ev.get("component"), at + ("component",)),
            message=_regex(check, ev.get("message"), at + ("message",), anchored=False), severity=ev.get("severity", "")))
    admission = base.admission
    if (a := doc.get("admission")) is not None:
        here: tuple[str, ...] = ("kube_health", "admission")
        admission = AdmissionRule(
            reason=_regex(check, a["reason"], here + ("reason",)) or re.compile("(?!)"),
            resource=_regex(check, a["resource"], here + ("resource",), anchored=False) or re.compile("(?!)"),
            alertname=a["alertname"], severity=a.get("severity", "error"), min_pods=a.get("min_pods", 3),
            window=check.duration(a.get("window"), here + ("window",), DEFAULT_WINDOW),
            settle=check.duration(a.get("settle"), here + ("settle",), DEFAULT_SETTLE), max_pods=a.get("max_pods", 500))
    names = {r.alertname for r in conditions} | {r.alertname for r in events} | \
        ({admission.alertname} if admission else set())
    return KubeHealthRules(tuple(conditions), tuple(events), admission, frozenset(names))


__all__ = ["AdmissionRule", "ConditionRule", "EventRule", "KubeHealthRules", "parse_kube_health"]
