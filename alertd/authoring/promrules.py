"""``alertd check --prometheus-rules FILE...``: what alertd will make of a site's alerting rules.

Reads Prometheus rule files (plain ``groups:`` files or PrometheusRule
resources with ``spec.groups``) and runs every alerting rule through the same
classification as the engine, as Alertmanager would deliver it: its name, its
static labels and annotations, and its expression in the generatorURL. Says,
per rule, which signal it maps to and why, and warns on rules that look like
GPU alerts but map to nothing, or whose Xid code alertd will not find.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote_plus

import yaml

from alertd.authoring.node_carry import node_warning
from alertd.engine.classify import Classification, classify_explained
from alertd.core.model import Alert
from alertd.engine.normalize import NormalizeConfig
from alertd.promql.bittest import bitwise_hint
from alertd.promql.expr import facts_of_expr
from alertd.promql.recording import RecordingIndex, collect, recording_pairs, rule_groups, unknown_recorded
from alertd.rules.ruleset import RuleSet

_COUNT_VALUES_XID = re.compile(r'count_values\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\(\s*"(xid|err_code)"')
_TEMPLATE_XID = re.compile(r"(?i)xid[^{}]{0,40}\{\{[^}]*(\$value|\$labels\.(xid|err_code))")


@dataclass(slots=True)
class RuleResult:
    file: str
    group: str
    alert: str
    decision: Classification
    warnings: list[str] = field(default_factory=list)
    xid_from: str = ""
    runtime: str = ""  # a well-known name whose mapping depends on labels only the firing alert has


def _decided_at_runtime(alert: Alert, rules: RuleSet) -> str:
    """E.g. TargetDown: exporter_down when its job label names dcgm, known only once it fires."""
    for rule in rules.evidence.alertnames:
        if alert.name in rule.names and rule.matchers:
            kind = rule.kind + (f"/{rule.detail}" if rule.detail else "")
            return f"{kind} when {', '.join(map(str, rule.matchers))} (labels of the firing alert; {rule.where})"
    return ""


def synthetic_alert(rule: dict[str, Any]) -> Alert:
    """The alert as Alertmanager would deliver it, before templating: name, static labels, annotations, expr."""
    labels = {"alertname": str(rule["alert"]), **{str(k): str(v) for k, v in (rule.get("labels") or {}).items()}}
    expr = str(rule.get("expr", ""))
    return Alert(fingerprint="0" * 16, status="firing", labels=labels,
                 annotations={str(k): str(v) for k, v in (rule.get("annotations") or {}).items()},
                 starts_at=datetime.now(timezone.utc), ends_at=None,
                 generator_url=f"http://prometheus/graph?g0.expr={quote_plus(expr)}&g0.tab=1" if expr else "")


def _xid_source(rule: dict[str, Any], decision: Classification) -> tuple[str, list[str]]:
    if decision.signal.xid:
        return decision.xid_from, []
    expr = str(rule.get("expr", ""))
    facts = facts_of_expr(expr) if expr else None
    if _COUNT_VALUES_XID.search(expr):
        return "label set by count_values in the expression", []
    if facts and any(n in ("xid", "err_code") for s in facts.selectors for n, _, _ in s.labels):
        return "label xid/err_code of the series", []
    texts = " ".join(str(v) for v in (rule.get("annotations") or {}).values())
    if _TEMPLATE_XID.search(texts):
        return "annotation text, once Prometheus renders it", []
    return "", ["no Xid code in its labels or text: alertd will show 'Xid (code unknown)' until the kernel log "
                "names it; add an xid label (count_values) or the code to the summary"]


def with_recorded(rules: RuleSet, docs: list[Any]) -> RuleSet:
    """``rules`` whose recording rules also hold those of ``docs`` (the rule files being checked): the service
    reads the same from classify.prometheus_rules or from Prometheus's rules API."""
    pairs = [p for doc in docs for p in recording_pairs(doc) if p[0] not in rules.recorded.files]
    if not pairs:
        return rules
    return replace(rules, recorded=RecordingIndex(rules.recorded.files.merged(collect(pairs))))


def classify_rules(path: Path, rules: RuleSet, ncfg: NormalizeConfig) -> list[RuleResult]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    rules = with_recorded(rules, [doc])
    out: list[RuleResult] = []
    for group in rule_groups(doc):
        for rule in group.get("rules") or []:
            if not isinstance(rule, dict) or "alert" not in rule:
                continue
            alert = synthetic_alert(rule)
            decision = classify_explained(alert, rules, ncfg)
            res = RuleResult(str(path), str(group.get("name", "")), alert.name, decision)
            if decision.expr_error:
                hint = bitwise_hint(str(rule.get("expr", "")))
                res.warnings.append(f"expression does not parse: {decision.expr_error}" + (f"; {hint}" if hint else ""))
            if decision.signal.kind == "other":
                res.runtime = _decided_at_runtime(alert, rules)
            if decision.signal.kind == "other" and decision.gpu_looking and not res.runtime:
                res.warnings.append(f"looks like a GPU alert ({decision.gpu_looking}) but no rule classifies it: "
                                    "name it in a site signals file (see docs/rules.md)")
            if decision.signal.kind == "xid":
                res.xid_from, more = _xid_source(rule, decision)
                res.warnings.extend(more)
            expr = str(rule.get("expr", ""))
            if decision.signal.kind not in ("other", "watchdog") or res.runtime:
                carry = node_warning(expr, alert.labels, ncfg.node_labels)
                res.warnings.extend([carry] if carry else [])
            unknown = unknown_recorded(facts_of_expr(expr) if expr else None, rules.recorded.files)
            if unknown and decision.stage in ("none", "alertname", "label", "annotation"):
                res.warnings.append(f"reads recorded series {', '.join(unknown)} whose recording rule is in none of "
                                    "the files given nor in classify.prometheus_rules: alertd sees only the name")
            out.append(res)
    return out


def _mapped(d: Classification) -> str:
    sig = d.signal
    if sig.kind == "other":
        return f"other/info ({sig.detail})" if sig.detail else "other"  # benign clock reasons only
    return sig.kind + (f"/{sig.detail}" if sig.detail and sig.kind in ("metrics_missing", "thermal") else "")


def print_results(results: list[RuleResult], out: TextIO) -> None:
    width = max((len(r.alert) for r in results), default=10)
    current = None
    for r in results:
        if (r.file, r.group) != current:
            current = (r.file, r.group)
            print(f"{r.file}  group {r.group}", file=out)
        d = r.decision
        why = f"by {d.stage}{' ' + d.rule if d.rule else ''}: {d.evidence}" if d.stage != "none" else "no rule matched"
        print(f"  {r.alert:<{width}}  -> {_mapped(d):<30} {why}", file=out)
        if r.runtime:
            print(f"  {'':<{width}}     at runtime: {r.runtime}", file=out)
        if d.signal.kind == "xid" and r.xid_from:
            print(f"  {'':<{width}}     Xid code from the {r.xid_from}", file=out)
        for w in r.warnings:
            print(f"  {'':<{width}}     WARNING: {w}", file=out)


def main(files: list[str], rules: RuleSet, ncfg: NormalizeConfig, out: TextIO, *, strict: bool = False) -> int:
    """Print the mapping; 1 when a file cannot be read (or, with strict, when any rule has a warning)."""
    results: list[RuleResult] = []
    failed = False
    docs = []
    for name in files:  # recording rules of every file given, so an alert may read another file's rules
        try:
            docs.append(yaml.safe_load(Path(name).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            pass  # reported below
    rules = with_recorded(rules, docs)
    for name in files:
        try:
            results.extend(classify_rules(Path(name), rules, ncfg))
        except (OSError, yaml.YAMLError) as exc:
            print(f"{name}: cannot read Prometheus rules: {exc}", file=out)
            failed = True
    print_results(results, out)
    mapped = sum(1 for r in results if r.decision.signal.kind != "other")
    warned = sum(1 for r in results if r.warnings)
    print(f"{len(results)} alerting rules: {mapped} classified, {len(results) - mapped} other, "
          f"{warned} with warnings", file=out)
    return 1 if failed or (strict and warned) else 0


__all__ = ["RuleResult", "classify_rules", "main", "print_results", "rule_groups", "synthetic_alert", "with_recorded"]
