"""rules/sources.yml -> which node conditions and Events the kube-health source turns into alerts.

Data, not code: a site adds its own agent's condition by adding an entry (a later file's entries are
tried after the shipped ones). The regexes are anchored like Alertmanager's, except an Event's
``message``, which is searched (a kernel line sits inside NPD's message).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from datetime import timedelta
from typing import Annotated

import msgspec
from msgspec import Meta

from alertd.core.sections import Section, written
from alertd.core.yamlio import Path_
from alertd.rules.checker import Checker
from alertd.rules.declared import TextSpan
from alertd.schemas.declared import SEVERITY_WORDS, DefText, RuleFile


def _anchored(pattern: str) -> re.Pattern[str]:
    return re.compile(f"(?:{pattern})\\Z")


@dataclass(frozen=True, slots=True)
class ConditionRule:
    producer: str
    type: re.Pattern[str]
    bad_status: str
    alertname: str
    reason: re.Pattern[str] | None
    severity: str
    xid_from_reason: re.Pattern[str] | None

    def matches(self, cond_type: str, reason: str) -> bool:
        return bool(self.type.match(cond_type)) and (self.reason is None or bool(self.reason.match(reason)))

    def watches(self, cond_type: str) -> bool:
        return bool(self.type.match(cond_type))


@dataclass(frozen=True, slots=True)
class EventRule:
    producer: str
    reason: re.Pattern[str]
    alertname: str
    component: re.Pattern[str] | None
    message: re.Pattern[str] | None
    severity: str

    def matches(self, reason: str, component: str, message: str) -> bool:
        return bool(self.reason.match(reason)) and (self.component is None or bool(self.component.match(component))) \
            and (self.message is None or self.message.search(message) is not None)


@dataclass(frozen=True, slots=True)
class AdmissionRule:
    reason: re.Pattern[str]
    resource: re.Pattern[str]
    alertname: str
    severity: str
    min_pods: int
    window: timedelta
    settle: timedelta
    max_pods: int

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


# The decoded text types are read into plain str: alert labels are encoded by msgspec, which takes no subclass.
class RegexText(DefText):
    """An anchored regular expression (like Alertmanager's =~)."""

    ref = "regex"


class AlertName(DefText):
    """The name of the alert a rule raises; rules/sources.yml's signals section classifies it."""

    ref = "name"


class SeverityWord(DefText):
    """The severity of the alert a rule raises."""

    ref = "severity"


class ConditionEntry(Section, frozen=True, kw_only=True):
    """One ``kube_health.conditions`` entry: a node condition that reports a GPU problem."""

    producer: Annotated[str, Meta(min_length=1, description=(
        "Who sets the condition (shown on the alert as label producer)."))]
    type: Annotated[RegexText, Meta(description="The condition type, e.g. AcceleratedHardwareReady.")]
    bad_status: Annotated[str, Meta(description="The status that means a problem (a Ready-style condition: False).",
                                    extra_json_schema={"enum": ["True", "False", "Unknown"]})]
    reason: Annotated[RegexText, Meta(description="Only these reasons count (default: any).")] | None = None
    alertname: Annotated[AlertName, Meta(description=(
        "The alert's name; rules/sources.yml's signals section classifies it."))]
    severity: SeverityWord | None = None
    xid_from_reason: Annotated[RegexText, Meta(description=(
        "A regex whose first group is the Xid code in the reason (EKS: NvidiaXID79Error)."))] | None = None


class EventEntry(Section, frozen=True, kw_only=True):
    """One ``kube_health.events`` entry: an Event on a Node object that reports a GPU problem."""

    producer: Annotated[str, Meta(min_length=1)]
    reason: RegexText
    component: Annotated[RegexText, Meta(description=(
        "The Event's source.component or reportingController (default: any)."))] | None = None
    message: Annotated[RegexText, Meta(description=(
        "Only Events whose message matches (unanchored search; default: any)."))] | None = None
    alertname: AlertName
    severity: SeverityWord | None = None


class Admission(Section, frozen=True):
    """Pods the kubelet rejected at admission because a GPU it counts is not usable."""

    reason: Annotated[RegexText, Meta(description="The Event reason, e.g. UnexpectedAdmissionError.")]
    resource: Annotated[RegexText, Meta(description=(
        "A resource name the Event's message must name, e.g. nvidia\\.com/gpu."))]
    alertname: AlertName
    severity: SeverityWord = msgspec.field(default_factory=partial(SeverityWord, "error"))
    min_pods: Annotated[int, Meta(ge=1, description="Rejected pods on one Ready node before it is an incident.")] = 3
    window: Annotated[TextSpan, Meta(description="Prometheus duration: rejections this far apart are one burst.")] = \
        written(TextSpan.from_config, "10m")
    settle: Annotated[TextSpan, Meta(description=(
        "Prometheus duration: how long after min_pods is reached the alert waits to count the burst."))] = \
        written(TextSpan.from_config, "5s")
    max_pods: Annotated[int, Meta(ge=1, description="Pods remembered per node (memory bound).")] = 500


class KubeHealthSection(Section, frozen=True):
    """The ``kube_health`` section."""

    conditions: Annotated[tuple[ConditionEntry, ...], Meta(description=(
        "Node conditions that report a GPU problem, first match wins."))] = ()
    events: Annotated[tuple[EventEntry, ...], Meta(description=(
        "Events (on Node objects) that report a GPU problem, first match wins."))] = ()
    admission: Admission | None = None


class KubeHealthFile(Section, frozen=True):
    """Which node conditions and Events the kube-health source (alertd/sources/) turns into alerts
    (rules/sources.yml). Conditions and Events no entry names are ignored."""

    kube_health: KubeHealthSection


KUBE_HEALTH = RuleFile("kube-health", "alertd Kubernetes health signals", KubeHealthFile,
                       {ConditionEntry: "condition", EventEntry: "event", Admission: "admission"}, {
                           "name": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.-]*$"},
                           "regex": {"type": "string", "minLength": 1,
                                     "description": "An anchored regular expression (like Alertmanager's =~)."},
                           "severity": {"enum": list(SEVERITY_WORDS)}})
_NEVER = re.compile("(?!)")  # a rule whose regex is bad matches nothing (its problem is reported)


def parse_kube_health(doc: KubeHealthSection, check: Checker, before: KubeHealthRules | None) -> KubeHealthRules:
    """Decoded ``kube_health`` section -> rules, after ``before`` (an earlier file's)."""
    base = before or KubeHealthRules()
    conditions = list(base.conditions)
    for i, e in enumerate(doc.conditions):
        at = ("kube_health", "conditions", i)
        conditions.append(ConditionRule(
            producer=e.producer, type=_regex(check, e.type, at + ("type",)) or _NEVER, bad_status=e.bad_status,
            alertname=str(e.alertname), reason=_regex(check, e.reason, at + ("reason",)), severity=str(e.severity or ""),
            xid_from_reason=_regex(check, e.xid_from_reason, at + ("xid_from_reason",))))
    events = list(base.events)
    for i, ev in enumerate(doc.events):
        at = ("kube_health", "events", i)
        events.append(EventRule(
            producer=ev.producer, reason=_regex(check, ev.reason, at + ("reason",)) or _NEVER, alertname=str(ev.alertname),
            component=_regex(check, ev.component, at + ("component",)),
            message=_regex(check, ev.message, at + ("message",), anchored=False), severity=str(ev.severity or "")))
    admission = base.admission
    if (a := doc.admission) is not None:
        here: tuple[str, ...] = ("kube_health", "admission")
        admission = AdmissionRule(
            reason=_regex(check, a.reason, here + ("reason",)) or _NEVER,
            resource=_regex(check, a.resource, here + ("resource",), anchored=False) or _NEVER,
            alertname=str(a.alertname), severity=str(a.severity), min_pods=a.min_pods,
            window=a.window, settle=a.settle, max_pods=a.max_pods)
    names = {r.alertname for r in conditions} | {r.alertname for r in events} | \
        ({admission.alertname} if admission else set())
    return KubeHealthRules(tuple(conditions), tuple(events), admission, frozenset(names))


__all__ = ["KUBE_HEALTH", "AdmissionRule", "ConditionRule", "EventRule", "KubeHealthRules", "parse_kube_health"]
