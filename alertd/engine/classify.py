"""Alert -> Signal, from the rules' data: what kind of GPU problem this is, and why.

Sources in order of trust (see rules/evidence.yml): the signals rules (a site's
own mapping, then the shipped names), the alert's own PromQL expression, alert
names well known in the ecosystem, labels, and an Xid code in the annotation
text. The first that says something decides; :func:`classify_explained` also says which
rule and which evidence did, for `alertd explain`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from alertd.rules.evidence import (DecidingRule, EvidenceRules, Found, by_alertname, by_expression, by_labels,
                                   gpu_looking, value_in_text, xid_in_text)
from alertd.gpu.clocks import clock_reasons
from alertd.gpu.sxid import SxidLine, find_sxid
from alertd.core.matchers import match_all
from alertd.core.model import SEVERITIES, Alert, Severity, Signal, as_severity
from alertd.core.states import SEVERITY_ALIASES
from alertd.core.vocabulary import COUNTED_DETAILS, DETAIL_TITLES, KIND_TITLES, Category, SignalKind
from alertd.engine.identity import nvrm_line
from alertd.engine.normalize import NormalizeConfig, xid_source
from alertd.promql.expr import facts_of_url
from alertd.promql.xidvalue import value_is_code
from alertd.promql.recording import EMPTY, RecordedRules, facts_of_url_expanded
from alertd.rules.ruleset import RuleSet

# Harmful clock-event reasons (alertd/gpu/clocks.py), most telling first: what a thermal alert's title says
CLOCK_TITLES = (
    ("thermal_slowdown", "GPU thermal slowdown: clocks cut by heat"),
    ("power_brake", "GPU power brake: clocks cut"),
    ("hw_slowdown", "GPU hardware slowdown: clocks cut"),
)
UNKNOWN_XID_MEANING = ("The alert reports an Xid but carries no code (no xid label, no code in its text). "
                       "Treated as a GPU hardware signal until a later alert or the kernel log names the code.")


def severity_label(value: str | None) -> str:
    if not value:
        return ""
    v = value.strip().lower()
    v = SEVERITY_ALIASES.get(v, v)
    return v if v in SEVERITIES else ""


@dataclass(frozen=True, slots=True)
class Classification:
    """The signal and what decided it."""

    signal: Signal
    stage: str = "none"  # signals | expression | alertname | label | annotation | none
    rule: str = ""  # file:line of the deciding entry
    evidence: str = ""  # the evidence in words
    xid_from: str = ""  # where the Xid code was read ("" when not an Xid or code unknown)
    expr_error: str = ""  # why the generatorURL's expression could not be parsed
    gpu_looking: str = ""  # for an unclassified alert: why it looks like a GPU alert


@lru_cache(maxsize=1024)
def _matchers_text(matchers: tuple[Any, ...]) -> str:
    return "labels " + ", ".join(map(str, matchers))


def _signals_rule(alert: Alert, rules: RuleSet) -> Found | None:
    name = alert.labels.get("alertname", "")
    for rule in rules.signals:
        if rule.alertnames is not None and name not in rule.alertnames:
            continue  # most entries name alerts: one set lookup instead of the matchers
        if match_all(rule.matchers, alert.labels):
            return Found("signals", _matchers_text(rule.matchers), rule)
    return None


def classify_explained(alert: Alert, rules: RuleSet, ncfg: NormalizeConfig) -> Classification:
    ev = rules.evidence
    facts = None
    found = _signals_rule(alert, rules)
    recorded = rules.recorded.for_url(alert.generator_url) if alert.generator_url else EMPTY
    if found is None and alert.generator_url:
        facts = facts_of_url_expanded(alert.generator_url, recorded)  # a recorded series reads as its expression
        found = _through_recorded(by_expression(facts, ev), alert.generator_url, recorded)
    found = found or by_alertname(alert, ev) or by_labels(alert, ev)
    text_xid = None
    sxid = _sxid_line(alert, ev) if found is None or found.rule is None or found.rule.kind == SignalKind.SXID else None
    if found is None and sxid is not None:
        found = Found(*sxid[1])
    if found is None:
        text_xid = xid_in_text(alert, ev)
        if text_xid is not None:
            found = Found("annotation", text_xid[1])
    if found is None:
        found = _kernel_report(alert, ncfg)
    expr_error = facts.error if facts is not None else ""
    if found is None:
        return Classification(_other(alert), expr_error=expr_error, gpu_looking=gpu_looking(alert, ev))
    rule = found.rule
    where = rule.where if rule is not None else ""
    basis = f"{found.stage}{' ' + where if where else ''}: {found.evidence}"
    if sxid is not None or (rule is not None and rule.kind == SignalKind.SXID):
        signal = _sxid_signal(alert, rules, sxid[0] if sxid else None, rule, basis)
        return Classification(signal, found.stage, where, found.evidence, "", expr_error)
    if rule is None or rule.kind == SignalKind.XID:
        code, xid_from = _xid_code(alert, ncfg, rules, text_xid)
        if xid_from:
            basis += f"; Xid from {xid_from}"
        signal = _xid_signal(alert, rules, code, rule, basis)
        return Classification(signal, found.stage, where, found.evidence, xid_from, expr_error)
    return Classification(_signal(alert, rule, rule.kind, basis, recorded), found.stage, where, found.evidence, "",
                          expr_error)


def _through_recorded(found: Found | None, url: str, recorded: Mapping[str, str]) -> Found | None:
    """Name the recording rules an expression verdict went through, for `alertd explain`."""
    if found is None or not recorded:
        return found
    facts = facts_of_url(url)
    names = sorted({s.metric for s in facts.selectors if s.metric in recorded}) if facts else []
    if not names:
        return found
    return Found(found.stage, f"{found.evidence} (through recording rule {', '.join(names)})", found.rule)


def classify(alert: Alert, rules: RuleSet, ncfg: NormalizeConfig) -> Signal:
    return classify_explained(alert, rules, ncfg).signal


def _xid_code(alert: Alert, ncfg: NormalizeConfig, rules: RuleSet,
              text_xid: tuple[int, str] | None) -> tuple[int | None, str]:
    code, source = xid_source(alert, ncfg)
    if code is not None:
        return code, source
    found = text_xid or xid_in_text(alert, rules.evidence)
    if found is None and alert.generator_url and value_is_code(facts_of_url(alert.generator_url)):
        found = value_in_text(alert, rules.evidence)  # "VALUE = 79" of an expression whose value is the code
    return (found[0], found[1]) if found else (None, "")


def _kernel_report(alert: Alert, ncfg: NormalizeConfig) -> Found | None:
    """A log alert carrying the driver's report of an Xid in a form no text pattern reads (a lost-GPU record,
    whole or in parts, the older "GPU at ... has fallen off the bus" line)."""
    line = nvrm_line(alert.labels, alert.annotations, ncfg.log_line_fields)
    if line is None:
        return None
    found, where = line
    gpu = f" of GPU {found.pci}" if found.pci else ""
    return Found(where.split(" ")[0], f"{where}: the kernel's report of Xid {found.xid}{gpu} ({found.text})")


def _sxid_line(alert: Alert, ev: EvidenceRules) -> tuple[SxidLine, tuple[str, str]] | None:
    """The SXid line a log alert carries (annotation text first, then label values), and where it was."""
    for name in ev.text_fields:
        found = find_sxid([alert.annotations.get(name, "")])
        if found is not None:
            return found, ("annotation", f"annotation {name}: SXid {found.code} on {found.switch}")
    for name, value in sorted(alert.labels.items()):
        found = find_sxid([value]) if "SXid" in value else None
        if found is not None:
            return found, ("label", f"label {name}: SXid {found.code} on {found.switch}")
    return None


def _sxid_signal(alert: Alert, rules: RuleSet, line: SxidLine | None, rule: DecidingRule | None, basis: str) -> Signal:
    if line is not None:
        return rules.sxids.signal(line, basis=basis)
    severity = severity_label(alert.labels.get("severity")) or (rule.severity if rule else "") or Severity.WARNING
    return Signal(kind=SignalKind.SXID.value, severity=as_severity(severity), category=Category.NVLINK.value,
                  title=KIND_TITLES[SignalKind.SXID],
                  meaning=alert.annotations.get("description", ""), runbook=(rule.runbook if rule else "") or rules.sxids.runbook,
                  basis=basis)


def _alert_text(alert: Alert, ev: EvidenceRules) -> str:
    return "\n".join(alert.annotations.get(name, "") for name in ev.text_fields)


def _xid_signal(alert: Alert, rules: RuleSet, code: int | None, rule: DecidingRule | None, basis: str) -> Signal:
    if code is not None:
        return rules.catalog.signal_for(code, _alert_text(alert, rules.evidence), alert.labels, basis=basis)
    # An Xid without a code is still an Xid: hardware, on its node and GPU, its own severity.
    severity = severity_label(alert.labels.get("severity")) or (rule.severity if rule else "") or Severity.WARNING
    return Signal(kind=SignalKind.XID.value, severity=as_severity(severity), category=Category.HARDWARE.value,
                  title=KIND_TITLES[SignalKind.XID],
                  meaning=UNKNOWN_XID_MEANING, runbook=(rule.runbook if rule else "") or "xid-hardware", basis=basis)


def _signal(alert: Alert, rule: DecidingRule, kind: str, basis: str, recorded: RecordedRules = EMPTY) -> Signal:
    labels = alert.labels
    severity = severity_label(labels.get("severity")) or rule.severity or Severity.WARNING
    detail = rule.detail
    if kind == SignalKind.THERMAL and not detail:
        reasons = clock_reasons(alert.labels, alert.annotations, alert.generator_url, recorded)
        if reasons.harmful:
            detail = reasons.detail
            basis += f"; {reasons.basis}"
        elif reasons.benign:  # idle / power cap / sync boost only: the GPU is fine, the alert flows as information
            kind, severity, detail = SignalKind.OTHER.value, Severity.INFO, ",".join(reasons.benign)
            basis += f"; {reasons.basis}: benign reasons only"
    counted = alert.annotations.get("summary", "") if detail in COUNTED_DETAILS else ""
    title = counted or DETAIL_TITLES.get(detail) or _clock_title(detail) or KIND_TITLES.get(kind) or \
        alert.annotations.get("summary") or alert.name or "alert"
    return Signal(
        kind=kind,
        severity=as_severity(severity),
        category=rule.category or (Category.HARDWARE.value if kind != SignalKind.OTHER else Category.OTHER.value),
        title=title,
        meaning=alert.annotations.get("description", ""),
        runbook=rule.runbook or alert.annotations.get("runbook_url", ""),
        detail=detail,
        basis=basis,
    )


def _clock_title(detail: str) -> str:
    """A thermal signal's title from the clock-event reasons in its detail (``hw_thermal_slowdown,...``)."""
    return next((title for reason, title in CLOCK_TITLES if reason in detail), "") if detail else ""


def _other(alert: Alert) -> Signal:
    return Signal(
        kind=SignalKind.OTHER.value,
        severity=as_severity(severity_label(alert.labels.get("severity")) or Severity.WARNING),
        category=Category.OTHER.value,
        title=alert.annotations.get("summary") or alert.name or "alert",
        meaning=alert.annotations.get("description", ""),
        runbook=alert.annotations.get("runbook_url", ""),
    )


__all__ = ["Classification", "classify", "classify_explained", "severity_label", "KIND_TITLES", "DETAIL_TITLES"]
