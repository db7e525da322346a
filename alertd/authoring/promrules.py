"""``alertd check --prometheus-rules FILE...``: what alertd will make of a site's alerting rules.

Reads Prometheus rule files (plain ``groups:`` files or PrometheusRule
resources with ``spec.groups``) and runs every alerting rule through the same
classification as the engine, as Alertmanager would deliver it: its name, its
static labels and annotations, and its expression in the generatorURL. Says,
per rule, which signal it maps to and why, and warns on rules that look like
GPU alerts but map to nothing, or whose Xid code alertd will not find, and on
rules whose alerts can fire and resolve between two flushes of their
Alertmanager group (authoring/race.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote_plus

import yaml

from alertd.authoring.node_carry import carried, host_only_note, node_warning
from alertd.authoring.race import Timing, race_warning
from alertd.engine.classify import Classification, classify_explained
from alertd.rules.evidence import value_in_text, xid_in_text
from alertd.core.errors import InvalidDocument
from alertd.core.json_types import JSONObject, as_array, member
from alertd.core.model import FIRING, Alert
from alertd.core.yamlio import load_yaml
from alertd.gpu.clocks import clock_reasons
from alertd.engine.normalize import NormalizeConfig
from alertd.promql.bittest import bitwise_hint
from alertd.promql.expr import ExprFacts, facts_of_expr
from alertd.promql.xidvalue import value_is_code
from alertd.promql.recording import (RecordingIndex, collect, facts_of_url_expanded, recording_pairs, rule_groups,
                                     unknown_recorded)
from alertd.rules.ruleset import RuleSet
from alertd.core.vocabulary import NEVER_CAUSE, XID_LABELS, SignalKind

_XID_LABEL = "|".join(map(re.escape, XID_LABELS))
_COUNT_VALUES_XID = re.compile(rf'count_values\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\(\s*"({_XID_LABEL})"')
_TEMPLATE = re.compile(r"\{\{-?(.*?)-?\}\}", re.S)
_LABEL_XID = re.compile(rf"(?:\$labels|\.Labels)\.(?:{_XID_LABEL})\b")
PROBE_CODE = 4242  # stands for the code in a rendered template: no Xid has it


@dataclass(slots=True)
class RuleResult:
    file: str
    group: str
    alert: str
    decision: Classification
    warnings: list[str] = field(default_factory=list)
    xid_from: str = ""
    runtime: str = ""  # a well-known name whose mapping depends on labels only the firing alert has
    line: int = 0  # of the rule in its file
    errors: list[str] = field(default_factory=list)  # what promtool would fail too (an expression that does not parse)
    reasons: str = ""  # the clock-event reasons a throttling rule tests, harmful and benign apart
    notes: list[str] = field(default_factory=list)  # what depends on the scrape (not a warning: --strict passes)

    @property
    def gpu_relevant(self) -> bool:
        """Shown without --all: mapped to a GPU signal, decided at runtime, or with something to say."""
        return self.decision.signal.kind != SignalKind.OTHER or self.decision.stage == "signals" or bool(
            self.runtime or self.warnings or self.errors or self.decision.signal.detail)


def _decided_at_runtime(alert: Alert, rules: RuleSet) -> str:
    """E.g. TargetDown: exporter_down when its job label names dcgm, known only once it fires."""
    for rule in rules.evidence.alertnames:
        if alert.name in rule.names and rule.matchers:
            kind = rule.kind + (f"/{rule.detail}" if rule.detail else "")
            return f"{kind} when {', '.join(map(str, rule.matchers))} (labels of the firing alert; {rule.where})"
    return ""


def synthetic_alert(rule: JSONObject) -> Alert:
    """The alert as Alertmanager would deliver it, before templating: name, static labels, annotations, expr.
    ``rule``: an alerting rule of a Prometheus rule file, as read."""
    labels = {"alertname": str(rule["alert"]), **{str(k): str(v) for k, v in member(rule, "labels").items()}}
    expr = str(rule.get("expr", ""))
    return Alert(fingerprint="0" * 16, status=FIRING, labels=labels,
                 annotations={str(k): str(v) for k, v in member(rule, "annotations").items()},
                 starts_at=datetime.now(timezone.utc), ends_at=None,
                 generator_url=f"http://prometheus/graph?g0.expr={quote_plus(expr)}&g0.tab=1" if expr else "")


def _xid_source(rule: JSONObject, decision: Classification, rules: RuleSet) -> tuple[str, list[str]]:
    if decision.signal.xid:
        return decision.xid_from, []
    expr = str(rule.get("expr", ""))
    facts = facts_of_expr(expr) if expr else None
    if _COUNT_VALUES_XID.search(expr):
        return "label set by count_values in the expression", []
    if facts and any(n in XID_LABELS for s in facts.selectors for n, _, _ in s.labels):
        return "label xid/err_code of the series", []
    url = synthetic_alert(rule).generator_url
    read = facts_of_url_expanded(url, rules.recorded.for_url(url)) if url else None  # through recording rules
    if _rendered_code(rule, expr, read, rules) == PROBE_CODE:
        return "annotation text, once Prometheus renders it", []
    return "", ["no Xid code in its labels or text: alertd will show 'Xid (code unknown)' until the kernel log "
                "names it; add an xid label (count_values) or the code to the summary"]


def _rendered_code(rule: JSONObject, expr: str, facts: ExprFacts | None, rules: RuleSet) -> int | None:
    """The Xid code alertd would read in the rule's text, rendered with a code wherever a template gives one
    (``{{ $value }}`` when the value is the code, ``{{ $labels.xid }}`` when the result keeps it) and a word
    elsewhere: a promise only what the text will hold once Prometheus renders it."""
    value_code = value_is_code(facts) is True
    kept = carried(expr) if expr else None
    label_code = kept is not None and any(kept.keeps(n) for n in XID_LABELS)

    def fill(m: re.Match[str]) -> str:
        inner = m.group(1)
        gives = (value_code and "$value" in inner) or (label_code and _LABEL_XID.search(inner) is not None)
        return str(PROBE_CODE) if gives else "x"

    probe = Alert(fingerprint="0" * 16, status=FIRING, labels={}, starts_at=datetime.now(timezone.utc), ends_at=None,
                  annotations={str(k): _TEMPLATE.sub(fill, str(v)) for k, v in member(rule, "annotations").items()})
    found = xid_in_text(probe, rules.evidence) or (value_in_text(probe, rules.evidence) if value_code else None)
    return found[0] if found else None


def with_recorded(rules: RuleSet, docs: list[object]) -> RuleSet:
    """``rules`` whose recording rules also hold those of ``docs`` (the rule files being checked): the service
    reads the same from classify.prometheus_rules or from Prometheus's rules API."""
    pairs = [p for doc in docs for p in recording_pairs(doc) if p[0] not in rules.recorded.files]
    if not pairs:
        return rules
    return replace(rules, recorded=RecordingIndex(rules.recorded.files.merged(collect(pairs))))


class NotRuleFile(ValueError):
    """A file that is no Prometheus rule file (nor a PrometheusRule resource)."""


def _groups_path(doc: Any) -> tuple[str, ...]:
    """Where the rule groups are in the document: ``groups`` or a PrometheusRule's ``spec.groups``."""
    if isinstance(doc, dict) and isinstance(doc.get("spec"), dict) and isinstance(doc["spec"].get("groups"), list):
        return ("spec", "groups")
    if isinstance(doc, dict) and isinstance(doc.get("groups"), list):
        return ("groups",)
    raise NotRuleFile("not a Prometheus rule file: no groups (nor spec.groups of a PrometheusRule)")


def _tested_reasons(alert: Alert, rules: RuleSet) -> tuple[str, str]:
    """(the reasons line, a warning) for a throttling rule: which bits it tests, the benign ones apart."""
    reasons = clock_reasons(alert.labels, alert.annotations, alert.generator_url,
                            rules.recorded.for_url(alert.generator_url) if alert.generator_url else None)
    if not (reasons.harmful or reasons.benign):
        return "", ""
    text = (f"clock reasons tested ({reasons.basis}): harmful {', '.join(reasons.harmful) or 'none'}; "
            f"benign {', '.join(reasons.benign) or 'none'}")
    if reasons.harmful and reasons.benign and reasons.tested:
        return text, (f"fires on benign clock reasons too ({', '.join(reasons.benign)}: the GPU is fine); test the "
                      "harmful bits only, e.g. floor(X / 32) % 8 > 0 for the thermal and power-brake slowdowns")
    return text, ""


def classify_rules(path: Path, rules: RuleSet, ncfg: NormalizeConfig, timing: Timing = Timing()) -> list[RuleResult]:
    """Every alerting rule of one file, with its line; raises InvalidDocument (YAML) or NotRuleFile. ``timing``:
    the Alertmanager timers a rule must outlast (authoring/race.py)."""
    doc, marks = load_yaml(path, with_marks=True)
    base = _groups_path(doc)
    rules = with_recorded(rules, [doc])
    out: list[RuleResult] = []
    for gi, group in enumerate(rule_groups(doc)):
        for ri, rule in enumerate(as_array(group.get("rules"))):
            if not isinstance(rule, dict) or "alert" not in rule:
                continue
            line = marks.get((*base, gi, "rules", ri), (0, 0))[0]
            res = _classify_rule(rule, str(path), str(group.get("name", "")), line, rules, ncfg)
            # never warned on
            declared = res.decision.signal.kind == SignalKind.OTHER and res.decision.stage == "signals"
            race = "" if declared else race_warning(rule, group.get("interval"), timing, rules.recorded.files)
            res.warnings.extend([race] if race else [])
            out.append(res)
    return out


def _classify_rule(rule: JSONObject, path: str, group: str, line: int, rules: RuleSet,
                   ncfg: NormalizeConfig) -> RuleResult:
    alert = synthetic_alert(rule)
    decision = classify_explained(alert, rules, ncfg)
    res = RuleResult(path, group, alert.name, decision, line=line)
    expr = str(rule.get("expr", ""))
    if decision.expr_error:
        hint = bitwise_hint(expr)
        res.errors.append(f"expression does not parse: {decision.expr_error}" + (f"; {hint}" if hint else ""))
    if decision.signal.kind == SignalKind.OTHER:
        res.runtime = _decided_at_runtime(alert, rules)
    if decision.signal.kind == SignalKind.OTHER and decision.gpu_looking and not res.runtime:
        res.warnings.append(f"looks like a GPU alert ({decision.gpu_looking}) but no rule classifies it: "
                            "name it in a site signals file (see docs/rules.md)")
    if decision.signal.kind == SignalKind.XID:
        res.xid_from, more = _xid_source(rule, decision, rules)
        res.warnings.extend(more)
    if decision.signal.kind in (SignalKind.THERMAL, SignalKind.OTHER) and not decision.expr_error:
        res.reasons, benign_too = _tested_reasons(alert, rules)
        res.warnings.extend([benign_too] if benign_too else [])
    if decision.signal.kind not in NEVER_CAUSE or res.runtime:
        carry = node_warning(expr, alert.labels, ncfg.node_labels) or _cluster_only(expr, rules)
        res.warnings.extend([carry] if carry else [])
        texts = [*alert.annotations.values(), *alert.labels.values()]
        note = "" if carry else host_only_note(expr, alert.labels, texts, ncfg.node_labels)
        res.notes.extend([note] if note else [])
    unknown = unknown_recorded(facts_of_expr(expr) if expr else None, rules.recorded.files)
    if unknown and decision.stage in ("none", "alertname", "label", "annotation"):
        res.warnings.append(f"reads recorded series {', '.join(unknown)} whose recording rule is in none of "
                            "the files given nor in classify.prometheus_rules: alertd sees only the name")
    return res


def _cluster_only(expr: str, rules: RuleSet) -> str:
    """A rule reading only cluster-wide metrics (evidence.cluster_metrics) names no node, whatever it keeps."""
    pattern = rules.evidence.cluster_metrics
    facts = facts_of_expr(expr) if expr and pattern is not None else None
    metrics = sorted({s.metric for s in facts.selectors}) if facts else []
    if pattern is None or not metrics or not all(pattern.fullmatch(m) for m in metrics):
        return ""
    return (f"it reads only cluster-wide metrics ({', '.join(metrics)}, evidence.cluster_metrics): its alerts name "
            "no node and open an incident of their own, not a node's")


def rule_file_paths(names: list[str]) -> list[Path]:
    """The files named, a directory's *.yml and *.yaml (hidden names skipped) in order."""
    out: list[Path] = []
    for name in names:
        p = Path(name)
        if p.is_dir():
            out.extend(f for f in sorted(p.rglob("*")) if f.suffix in (".yml", ".yaml") and f.is_file()
                       and not any(part.startswith(".") for part in f.relative_to(p).parts))
        else:
            out.append(p)
    return out


def _mapped(d: Classification) -> str:
    sig = d.signal
    if sig.kind == SignalKind.OTHER and d.stage == "signals":
        return "other (not GPU health)"  # the site said so
    if sig.kind == SignalKind.OTHER:
        return f"other/info ({sig.detail})" if sig.detail else "other"  # benign clock reasons only
    return sig.kind + (f"/{sig.detail}" if sig.detail and sig.kind != SignalKind.XID else "")


def print_results(results: list[RuleResult], out: TextIO, *, show_all: bool = False) -> None:
    """One line per rule, ``file:line:`` first (as promtool names findings), its findings below it."""
    shown = [r for r in results if show_all or r.gpu_relevant]
    width = max((len(r.alert) for r in shown), default=10)
    for r in shown:
        d, at = r.decision, f"{r.file}:{r.line}:"
        why = f"by {d.stage}{' ' + d.rule if d.rule else ''}: {d.evidence}" if d.stage != "none" else "no rule matched"
        print(f"{at} {r.alert:<{width}}  -> {_mapped(d):<30} {why}", file=out)
        if r.runtime:
            print(f"{at} at runtime: {r.runtime}", file=out)
        if d.signal.kind == SignalKind.XID and r.xid_from:
            print(f"{at} Xid code from the {r.xid_from}", file=out)
        if r.reasons:
            print(f"{at} {r.reasons}", file=out)
        for e in r.errors:
            print(f"{at} ERROR: {e}", file=out)
        for w in r.warnings:
            print(f"{at} WARNING: {w}", file=out)
        for n in r.notes:
            print(f"{at} note: {n}", file=out)


def main(files: list[str], rules: RuleSet, ncfg: NormalizeConfig, out: TextIO, *, strict: bool = False,
         show_all: bool = False, timing: Timing = Timing()) -> int:
    """Print the mapping; 1 like promtool when a file is no rule file or cannot be read, or an expression does
    not parse (and, with strict, when any rule has a warning)."""
    results: list[RuleResult] = []
    failed = False
    paths = rule_file_paths(files)
    docs = []
    for path in paths:  # recording rules of every file given, so an alert may read another file's rules
        try:
            docs.append(yaml.safe_load(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            pass  # reported below
    rules = with_recorded(rules, [d for d in docs if isinstance(d, dict)])
    for path in paths:
        try:
            results.extend(classify_rules(path, rules, ncfg, timing))
        except InvalidDocument as exc:
            for problem in exc.problems:
                print(f"{problem.source}:{problem.line or 1}: ERROR: cannot read Prometheus rules: {problem.message}",
                      file=out)
            failed = True
        except NotRuleFile as exc:
            print(f"{path}:1: ERROR: {exc}", file=out)
            failed = True
    if not paths:
        print(f"{', '.join(files)}: ERROR: no rule files (*.yml, *.yaml) found", file=out)
        failed = True
    print_results(results, out, show_all=show_all)
    mapped = sum(1 for r in results if r.decision.signal.kind != SignalKind.OTHER)
    warned = sum(1 for r in results if r.warnings)
    errors = sum(len(r.errors) for r in results)
    hidden = 0 if show_all else sum(1 for r in results if not r.gpu_relevant)
    declared = sum(1 for r in results if r.decision.signal.kind == SignalKind.OTHER and r.decision.stage == "signals")
    print(f"{len(results)} alerting rules: {mapped} classified, {len(results) - mapped} other"
          f"{f' ({declared} declared not GPU health)' if declared else ''}, "
          f"{warned} with warnings" + (f", {errors} with errors" if errors else "") +
          (f" ({hidden} other rules not GPU-related not listed: --all lists them)" if hidden else ""), file=out)
    return 1 if failed or errors or (strict and warned) else 0


__all__ = ["NotRuleFile", "RuleResult", "classify_rules", "main", "print_results", "rule_file_paths", "rule_groups",
           "synthetic_alert", "with_recorded"]
