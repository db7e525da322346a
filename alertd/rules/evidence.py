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
from typing import Annotated, Callable, ClassVar, Protocol

import msgspec
from msgspec import Meta

from alertd.core.matchers import Matcher, match_all
from alertd.core.model import Alert
from alertd.core.regex import Regex, RegexError
from alertd.core.sections import Section
from alertd.core.vocabulary import RULED_CATEGORIES, Category, EVIDENCE_KINDS, EVIDENCE_MISSING_DETAILS, Detail, SignalKind
from alertd.core.yamlio import Path_
from alertd.gpu.nvrm import other_driver
from alertd.promql.expr import ExprFacts, Selector, facts_of_url
from alertd.rules.checker import Checker
from alertd.schemas.declared import (DETAIL_PATTERN, RUNBOOK_PATTERN, SEVERITY_WORDS, MatcherText, RuleFile,
                                     in_order, matcher_def, word)


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


class EvidenceEntry(Section, frozen=True):
    """What every evidence entry says: the signal it means."""

    SCHEMA: ClassVar[dict[str, object]] = {"allOf": [{"$ref": "#/$defs/needs_detail"}]}

    kind: Annotated[str, word(in_order(SignalKind, EVIDENCE_KINDS), "The signal kind this evidence means.")]
    detail: Annotated[str, Meta(pattern=DETAIL_PATTERN, description=(
        "Refines the kind (metrics_missing: exporter_down, node_down, gpu_missing, telemetry_frozen)."))] = ""
    severity: Annotated[str, word(SEVERITY_WORDS, "The severity when the alert has no usable severity label.")] = ""
    category: Annotated[str, word(in_order(Category, RULED_CATEGORIES), "Who most likely owns the problem; Xids take the catalog's.")] = ""
    runbook: Annotated[str, Meta(pattern=RUNBOOK_PATTERN, description="Runbook page under runbooks/, without .md.")] = ""


NonEmpty = Annotated[str, Meta(min_length=1)]


class ExpressionEntry(EvidenceEntry, frozen=True, kw_only=True):
    """An ``evidence.expressions`` entry: a selector of the alert's expression."""

    metric: Annotated[str, Meta(min_length=1, description="Regex (anchored) on the selector's metric name.")]
    match: Annotated[tuple[MatcherText, ...], Meta(
        description="Matchers on the selector's label matchers (value, or regex text).")] = ()
    inside: Annotated[str, Meta(min_length=1, description=(
        "Regex (anchored) on a function or aggregation around the selector."))] | None = None
    compare: Annotated[str, Meta(min_length=1, description=(
        "Regex (anchored) on the nearest comparison: '<op> <number>' or '<op> vector'."))] | None = None


class AlertnameEntry(EvidenceEntry, frozen=True, kw_only=True):
    """An ``evidence.alertnames`` entry: an alert name well known in the ecosystem."""

    names: Annotated[tuple[NonEmpty, ...], Meta(min_length=1, description="Exact alert names.")]
    match: Annotated[tuple[MatcherText, ...], Meta(description="Further matchers on the labels (AND).")] = ()


class LabelsEntry(EvidenceEntry, frozen=True, kw_only=True):
    """An ``evidence.labels`` entry: the alert's labels alone."""

    match: Annotated[tuple[MatcherText, ...], Meta(min_length=1, description="Matchers on the labels (AND).")]


class Annotations(Section, frozen=True):
    """Where and how to read an Xid code in annotation text."""

    fields: Annotated[tuple[NonEmpty, ...], Meta(min_length=1, description="Annotations read, in order.")] = \
        TEXT_FIELDS
    xid_patterns: Annotated[tuple[NonEmpty, ...], Meta(min_length=1, description=(
        "Regexes (RE2, as every rule regex; Python's (?P<xid>...) group syntax) with a named group 'xid'."))] = ()
    value_patterns: Annotated[tuple[NonEmpty, ...], Meta(description=(
        "Regexes with a named group 'value' finding the alert's rendered value ('VALUE = 79'): read as the Xid "
        "code only when the alert's expression reads the Xid metric as it is (no increase(), rate() or sum around "
        "it), after the xid_patterns found nothing."))] = ()


class GpuLookingPart(Section, frozen=True):
    """What makes an alert look like a GPU alert (check warnings, unclassified-alert metric)."""

    metrics: Annotated[str, Meta(description="Regex (anchored) on metric names of the expression.")] | None = None
    labels: Annotated[tuple[str, ...], Meta(description="Label names only GPU alerts carry.")] = ()
    alertnames: Annotated[str, Meta(description="Regex (anchored) on the alert name.")] | None = None


class EvidenceSection(Section, frozen=True):
    """The ``evidence`` section."""

    expressions: Annotated[tuple[ExpressionEntry, ...], Meta(description=(
        "Rules on the vector selectors of the alert's expression (generatorURL g0.expr), first match wins."))] = ()
    alertnames: Annotated[tuple[AlertnameEntry, ...], Meta(
        description="Alert names well known in the ecosystem, first match wins.")] = ()
    labels: Annotated[tuple[LabelsEntry, ...], Meta(description="Rules on the alert's labels alone, first match wins.")] = ()
    field_labels: Annotated[tuple[Annotated[str, Meta(pattern="^[A-Za-z_][A-Za-z0-9_]*$")], ...], Meta(description=(
        "Labels whose value names a metric (a DCGM field kept by label_replace, say): read like the expression's "
        "metric, before the labels entries."))] = ()
    annotations: Annotated[Annotations, Meta(description="Where and how to read an Xid code in annotation text.")] = \
        msgspec.field(default_factory=Annotations)
    cluster_metrics: Annotated[str, Meta(description=(
        "Regex (anchored) on metric names that describe the cluster, not a node (an operator's own gauges): "
        "`alertd check --prometheus-rules` warns that a GPU rule reading only such metrics names no node. The first "
        "file that sets it wins."))] | None = None
    gpu_looking: GpuLookingPart = msgspec.field(default_factory=GpuLookingPart)


class EvidenceFile(Section, frozen=True):
    """How alertd classifies alerts no signals rule names (rules/evidence.yml): by the alert's own PromQL
    expression, well-known alert names, labels and annotation text, in that order of trust."""

    evidence: Annotated[EvidenceSection, Meta(description=(
        "Evidence lists of several rule files are concatenated in file order; the first file with annotation "
        "patterns or gpu_looking sets those."))]


EVIDENCE = RuleFile("evidence", "alertd classification from evidence", EvidenceFile,
                    {ExpressionEntry: "expression", AlertnameEntry: "alertname", LabelsEntry: "labels"}, {
                        "matcher": matcher_def("One Alertmanager-style matcher, e.g. job=~\".*dcgm.*\"."),
                        "needs_detail": {
                            "if": {"properties": {"kind": {"const": SignalKind.METRICS_MISSING.value}}},
                            "then": {"required": ["detail"], "properties": {"detail": {
                                "enum": list(in_order(Detail, EVIDENCE_MISSING_DETAILS))}}},
                            "description": "metrics_missing entries must say what is missing (detail)."}},
                    def_key_order=("type", "description", "required", "properties", "additionalProperties"))


def _regex(check: Checker, text: str | None, path: Path_) -> Regex | None:
    if text is None:
        return None
    try:
        return Regex(text)
    except RegexError as exc:
        check.problem(path, f"invalid regex {text!r}: {exc}")
        return None


def parse_evidence_rules(doc: EvidenceSection, check: Checker, where: Callable[[Path_], str]) -> EvidenceRules:
    """Typed evidence rules from a decoded `evidence` section; regex errors go to ``check``."""

    def entry(stage: str, i: int, e: ExpressionEntry | AlertnameEntry | LabelsEntry) -> EvidenceRule:
        path = ("evidence", stage, i)
        exp = e if isinstance(e, ExpressionEntry) else None
        return EvidenceRule(
            stage=stage, kind=e.kind, where=where(path), detail=e.detail, severity=e.severity, category=e.category,
            runbook=e.runbook, matchers=check.matchers(e.match, path + ("match",)),
            names=frozenset(e.names) if isinstance(e, AlertnameEntry) else frozenset(),
            metric=_regex(check, exp.metric, path + ("metric",)) if exp else None,
            inside=_regex(check, exp.inside, path + ("inside",)) if exp else None,
            compare=_regex(check, exp.compare, path + ("compare",)) if exp else None)

    def patterns(key: str, texts: tuple[str, ...], group: str) -> tuple[Regex, ...]:
        out = []
        for i, text in enumerate(texts):
            pattern = _regex(check, text, ("evidence", "annotations", key, i))
            if pattern is not None and group not in pattern.groupindex:
                check.problem(("evidence", "annotations", key, i), f"the pattern needs a named group (?P<{group}>...)")
            elif pattern is not None:
                out.append(pattern)
        return tuple(out)
    g = doc.gpu_looking
    return EvidenceRules(
        expressions=tuple(entry("expressions", i, e) for i, e in enumerate(doc.expressions)),
        alertnames=tuple(entry("alertnames", i, e) for i, e in enumerate(doc.alertnames)),
        labels=tuple(entry("labels", i, e) for i, e in enumerate(doc.labels)),
        text_fields=doc.annotations.fields,
        field_labels=doc.field_labels,
        xid_patterns=patterns("xid_patterns", doc.annotations.xid_patterns, "xid"),
        value_patterns=patterns("value_patterns", doc.annotations.value_patterns, "value"),
        cluster_metrics=_regex(check, doc.cluster_metrics, ("evidence", "cluster_metrics")),
        gpu_looking=GpuLooking(
            metrics=_regex(check, g.metrics, ("evidence", "gpu_looking", "metrics")),
            labels=frozenset(g.labels),
            alertnames=_regex(check, g.alertnames, ("evidence", "gpu_looking", "alertnames")),
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


__all__ = ["EVIDENCE", "EvidenceRule", "EvidenceRules", "EvidenceSection", "Found", "GpuLooking", "parse_evidence_rules", "by_alertname",
           "by_expression", "by_labels", "gpu_looking", "looks_gpu", "merge", "value_in_text",
           "xid_in_text"]
