"""Evidence rules (rules/evidence.yml): how an alert no signals rule names is classified.

Each finder returns the rule that matched and the evidence it matched on, so
`alertd explain` can say why an alert got its signal. Pure functions over the
alert; the expression comes from :mod:`alertd.promql.expr` (parsed once per
generatorURL). Every pattern is compiled for RE2 (alertd/core/regex.py): annotation text
and label values come from whoever can send a webhook, so matching must stay linear.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Literal, Protocol, TypedDict

from alertd.core.matchers import Matcher, match_all
from alertd.core.model import Alert
from alertd.core.regex import Regex, RegexError
from alertd.core.yamlio import Path_
from alertd.gpu.nvrm import other_driver
from alertd.promql.expr import ExprFacts, Selector, facts_of_url
from alertd.rules.checker import Checker


@dataclass(frozen=True, slots=True)
class EvidenceRule:
    """One entry of an evidence list: what it matches and the signal it means."""

    stage: str  # expressions | alertnames | labels
    kind: str
    where: str = ""  # file:line of the entry
    detail: str = ""
    severity: str = ""
    category: str = ""
    runbook: str = ""
    matchers: tuple[Matcher, ...] = ()
    names: frozenset[str] = frozenset()
    metric: Regex | None = None
    inside: Regex | None = None
    compare: Regex | None = None

    def matches_selector(self, sel: Selector) -> bool:
        if self.metric is None or not self.metric.fullmatch(sel.metric):
            return False
        if self.inside is not None and not any(self.inside.fullmatch(fn) for fn in sel.inside):
            return False
        if self.compare is not None and not self.compare.fullmatch(sel.compare):
            return False
        return not self.matchers or match_all(self.matchers, sel.label_values())


@dataclass(frozen=True, slots=True)
class GpuLooking:
    metrics: Regex | None = None
    labels: frozenset[str] = frozenset()
    alertnames: Regex | None = None


TEXT_FIELDS = ("summary", "description", "message")
_FRACTION = re.compile(r"\.0*[1-9][0-9]*\s*$")  # "50.67": a count or a rate, never a code ("79.0" is one)


@dataclass(frozen=True, slots=True)
class EvidenceRules:
    expressions: tuple[EvidenceRule, ...] = ()
    alertnames: tuple[EvidenceRule, ...] = ()
    labels: tuple[EvidenceRule, ...] = ()
    text_fields: tuple[str, ...] = TEXT_FIELDS
    field_labels: tuple[str, ...] = ()  # labels whose value names a DCGM field / metric (label_replace'd __name__)
    xid_patterns: tuple[Regex, ...] = ()
    # "VALUE = 79": read only when the expression's value is the Xid code (alertd/promql/xidvalue.py)
    value_patterns: tuple[Regex, ...] = ()
    gpu_looking: GpuLooking = field(default_factory=GpuLooking)
    cluster_metrics: Regex | None = None  # metrics about the cluster, not a node: their alerts name no node


class DecidingRule(Protocol):
    """What classification reads of the rule that decided: an evidence entry here, or a ``signals`` entry
    (alertd/rules/ruleset.py's SignalRule)."""

    @property
    def kind(self) -> str: ...

    @property
    def where(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def severity(self) -> str: ...

    @property
    def category(self) -> str: ...

    @property
    def runbook(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Found:
    """What decided: the rule (None for annotation text) and the evidence, in words."""

    stage: str
    evidence: str
    rule: DecidingRule | None = None


def by_expression(facts: ExprFacts | None, rules: EvidenceRules) -> Found | None:
    """The first entry matching a selector the alert's value comes from; else one matching a condition the
    expression adds with `and` (a hot GPU `and` little power: the temperature says what is wrong)."""
    if facts is None:
        return None
    for selectors, role in ((facts.selectors, ""), (facts.conditions, " (a condition after `and`)")):
        for rule in rules.expressions:
            for sel in selectors:
                if rule.matches_selector(sel):
                    return Found("expression", f"metric {sel.metric} in {sel.describe()}{role}", rule)
    return None


def by_alertname(alert: Alert, rules: EvidenceRules) -> Found | None:
    name = alert.name
    for rule in rules.alertnames:
        if name in rule.names and match_all(rule.matchers, alert.labels):
            extra = "".join(f", {m}" for m in rule.matchers)
            return Found("alertname", f"alertname {name}{extra}", rule)
    return None


def by_labels(alert: Alert, rules: EvidenceRules) -> Found | None:
    for name in rules.field_labels:  # e.g. metric="DCGM_FI_DEV_XID_ERRORS": read as the expression's metric
        value = alert.labels.get(name)
        if value:
            sel = Selector(metric=value, labels=(), inside=(), compare="")
            for rule in rules.expressions:
                if rule.matches_selector(sel):
                    return Found("label", f'label {name}="{value}" names the metric', rule)
    for rule in rules.labels:
        if match_all(rule.matchers, alert.labels):
            shown = ", ".join(f'{m.name}="{alert.labels.get(m.name, "")}"' for m in rule.matchers)
            return Found("label", f"labels {shown}", rule)
    return None


def xid_in_text(alert: Alert, rules: EvidenceRules) -> tuple[int, str] | None:
    """(code, "annotation <field> '<snippet>'") of the first Xid code in the annotation text; never one a
    kernel line of another vendor's device prints (a network card's "XID 541" is its chip version)."""
    return _code_in_text(alert, rules.text_fields, rules.xid_patterns, "xid")


def value_in_text(alert: Alert, rules: EvidenceRules) -> tuple[int, str] | None:
    """The alert's value as its text renders it ("VALUE = 79"): the caller knows the value is the Xid code."""
    return _code_in_text(alert, rules.text_fields, rules.value_patterns, "value")


def _code_in_text(alert: Alert, fields: tuple[str, ...], patterns: tuple[Regex, ...],
                  group: str) -> tuple[int, str] | None:
    for name in fields:
        text = alert.annotations.get(name)
        if not text:
            continue
        lines = [ln for ln in text.splitlines() if not other_driver(ln)] if "XID" in text.upper() else [text]
        for pattern in patterns:
            for m in (found for line in lines for found in pattern.finditer(line)):
                code = int(m.group(group))
                if code > 0 and not _FRACTION.search(m.group(0) or ""):
                    return code, f"annotation {name} {m.group(0).strip()!r}"
    return None


def gpu_looking(alert: Alert, rules: EvidenceRules) -> str:
    """Why the alert looks like a GPU alert ("" if it does not): for unclassified-alert reports."""
    g = rules.gpu_looking
    facts = facts_of_url(alert.generator_url) if alert.generator_url else None
    return looks_gpu(alert.name, alert.labels, facts, g)


def looks_gpu(name: str, labels: dict[str, str], facts: ExprFacts | None, g: GpuLooking) -> str:
    if facts is not None and g.metrics is not None:
        for sel in facts.selectors:
            if g.metrics.fullmatch(sel.metric):
                return f"metric {sel.metric}"
    for label in sorted(g.labels & labels.keys()):
        return f"label {label}"
    if g.alertnames is not None and name and g.alertnames.fullmatch(name):
        return f"alertname {name}"
    return ""


class EvidenceRuleDoc(TypedDict, total=False):
    """One entry of ``evidence.expressions`` (kind and metric required), ``evidence.alertnames`` (kind and names)
    or ``evidence.labels`` (kind and match), as evidence.schema.json admits it."""

    kind: str
    detail: str
    severity: str
    category: str
    runbook: str
    metric: str
    match: list[str]
    inside: str
    compare: str
    names: list[str]


class AnnotationsDoc(TypedDict, total=False):
    fields: list[str]
    xid_patterns: list[str]
    value_patterns: list[str]


class GpuLookingDoc(TypedDict, total=False):
    metrics: str
    labels: list[str]
    alertnames: str


class EvidenceDoc(TypedDict, total=False):
    expressions: list[EvidenceRuleDoc]
    alertnames: list[EvidenceRuleDoc]
    labels: list[EvidenceRuleDoc]
    field_labels: list[str]
    annotations: AnnotationsDoc
    cluster_metrics: str
    gpu_looking: GpuLookingDoc


def _regex(check: Checker, text: str | None, path: Path_) -> Regex | None:
    if text is None:
        return None
    try:
        return Regex(text)
    except RegexError as exc:
        check.problem(path, f"invalid regex {text!r}: {exc}")
        return None


def parse_evidence_rules(doc: EvidenceDoc, check: Checker, where: Callable[[Path_], str]) -> EvidenceRules:
    """Typed evidence rules from a schema-valid `evidence` section; regex errors go to ``check``."""

    def entries(stage: Literal["expressions", "alertnames", "labels"]) -> tuple[EvidenceRule, ...]:
        out = []
        for i, e in enumerate(doc.get(stage) or []):
            path = ("evidence", stage, i)
            out.append(EvidenceRule(
                stage=stage, kind=e["kind"], where=where(path), detail=e.get("detail", ""),
                severity=e.get("severity", ""), category=e.get("category", ""), runbook=e.get("runbook", ""),
                matchers=check.matchers(e.get("match"), path + ("match",)),
                names=frozenset(e.get("names") or ()),
                metric=_regex(check, e.get("metric"), path + ("metric",)),
                inside=_regex(check, e.get("inside"), path + ("inside",)),
                compare=_regex(check, e.get("compare"), path + ("compare",)),
            ))
        return tuple(out)

    ann = doc.get("annotations") or {}

    def patterns(key: Literal["xid_patterns", "value_patterns"], group: str) -> tuple[Regex, ...]:
        out = []
        for i, text in enumerate(ann.get(key) or ()):
            pattern = _regex(check, text, ("evidence", "annotations", key, i))
            if pattern is not None and group not in pattern.groupindex:
                check.problem(("evidence", "annotations", key, i), f"the pattern needs a named group (?P<{group}>...)")
            elif pattern is not None:
                out.append(pattern)
        return tuple(out)
    g = doc.get("gpu_looking") or {}
    return EvidenceRules(
        expressions=entries("expressions"),
        alertnames=entries("alertnames"),
        labels=entries("labels"),
        text_fields=tuple(ann.get("fields") or TEXT_FIELDS),
        field_labels=tuple(doc.get("field_labels") or ()),
        xid_patterns=patterns("xid_patterns", "xid"),
        value_patterns=patterns("value_patterns", "value"),
        cluster_metrics=_regex(check, doc.get("cluster_metrics"), ("evidence", "cluster_metrics")),
        gpu_looking=GpuLooking(
            metrics=_regex(check, g.get("metrics"), ("evidence", "gpu_looking", "metrics")),
            labels=frozenset(g.get("labels") or ()),
            alertnames=_regex(check, g.get("alertnames"), ("evidence", "gpu_looking", "alertnames")),
        ),
    )


def merge(a: EvidenceRules, b: EvidenceRules) -> EvidenceRules:
    """Evidence lists of several rule files, concatenated in file order (earlier files win)."""
    return EvidenceRules(
        expressions=a.expressions + b.expressions,
        alertnames=a.alertnames + b.alertnames,
        labels=a.labels + b.labels,
        text_fields=a.text_fields if a.xid_patterns else b.text_fields,
        field_labels=tuple(dict.fromkeys(a.field_labels + b.field_labels)),
        xid_patterns=a.xid_patterns + b.xid_patterns,
        value_patterns=a.value_patterns + b.value_patterns,
        cluster_metrics=a.cluster_metrics or b.cluster_metrics,
        gpu_looking=a.gpu_looking if a.gpu_looking.metrics or a.gpu_looking.labels else b.gpu_looking,
    )


__all__ = ["EvidenceRule", "EvidenceRules", "Found", "GpuLooking", "parse_evidence_rules", "by_alertname",
           "by_expression", "by_labels", "gpu_looking", "looks_gpu", "merge", "value_in_text",
           "xid_in_text"]
