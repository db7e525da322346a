"""Loads rules/ (Xid catalog, signal classification, correlation, routing) into one RuleSet.

Each top-level section of a rule file is validated by its own JSON Schema, then
checked semantically (matchers parse, durations parse, names unique). Every
problem carries ``file:line:column``.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Sequence, cast

from alertd.rules.evidence import EVIDENCE, EvidenceRules, parse_evidence_rules, merge
from alertd.rules.remediation import RemediationPolicy, parse_remediation
from alertd.core.json_types import JSONObject
from alertd.rules.storm_says import Escalation, Reading, parse_escalate
from alertd.rules.history import HistoryFile, HistoryRule, parse_history, rma_rules
from alertd.rules.rma import RmaRule, parse_rma
from alertd.rules.routing import Routing, parse_routing
from alertd.rules.checker import Checker
from alertd.rules.correlation_section import Correlation, Response, Storm, WatchdogRule
from alertd.rules.declared import decode
from alertd.rules.section_docs import RuleFileDoc
from alertd.rules.signals import SIGNALS, SignalEntry
from alertd.core.errors import InvalidDocument, Problem
from alertd.gpu.catalog import XID_CATALOG, XidCatalog, XidEntry
from alertd.gpu.recovery import RECOVERY_ACTIONS_FILE, RecoveryActionsSection, RecoveryTable, merge_recovery, parse_recovery
from alertd.gpu.sxid import DEFAULT_SXIDS, SXID_CATALOG, SxidCatalog, SxidsSection, merge_sxids, parse_sxid_catalog
from alertd.core.matchers import Matcher, MatcherError, literal_values, parse_matchers
from alertd.promql.recording import RecordingIndex
from alertd.rules.kube_health import KubeHealthRules, KubeHealthSection, parse_kube_health
from alertd.rules.jobs import DomainRule, JobRule, check_domains, parse_job
from alertd.schemas import problems as schema_problems
from alertd.core.yamlio import Marks, Path_, format_path, load_yaml, mark_for

# section name -> JSON Schema name
SECTIONS = {"xids": "xid-catalog", "recovery_actions": "recovery-actions", "sxids": "sxid-catalog", "signals": "signals",
            "evidence": "evidence", "correlation": "correlation", "routing": "routing", "rma": "rma",
            "remediation": "remediation", "kube_health": "kube-health", "history": "history"}
RULE_SUFFIXES = (".yml", ".yaml")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SignalRule:
    kind: str
    matchers: tuple[Matcher, ...]
    detail: str = ""
    severity: str = ""
    category: str = ""
    runbook: str = ""
    where: str = ""  # file:line of the entry, for `alertd explain`
    alertnames: frozenset[str] | None = None  # the only alert names it can match (None: any), to skip it fast


@dataclass(frozen=True, slots=True)
class GroupRule:
    name: str
    by: tuple[str, ...]
    matchers: tuple[Matcher, ...] = ()
    allow_empty: bool = False


@dataclass(frozen=True, slots=True)
class StormEvent:
    """One kind of fleet event: node incidents whose leading signal matches share the key built from ``by``."""

    name: str
    by: tuple[str, ...]
    matchers: tuple[Matcher, ...] = ()
    reading: Reading | None = None  # the value its alerts carry (a GPU's temperature), summed up over the storm
    advice: str = ""  # what to do about the storm as a whole, in words
    escalate: tuple[Escalation, ...] = ()  # the severity its extent reaches (rules/storm_says.py)


# The rules below are correlation_section's declarations read (their defaults are there, read by
# default_correlation), their matchers parsed.

@dataclass(frozen=True, slots=True)
class ResponseRule:
    """What people and remediators do to a node after its fault (cordon, drain, reboot, uncordon), and how long
    after the fault it still counts as the response to it (engine/response.py)."""

    signals: tuple[Matcher, ...]  # a node's repair symptoms: never its headline
    window: timedelta  # from the fault's last alert ending
    repair_timeout: timedelta  # back from the reboot (reachable) but still not ready this long: the repair failed
    still_down: tuple[Matcher, ...]  # what "not back yet" is (down or not ready)
    unreachable: tuple[Matcher, ...]  # of those, what "down" (unreachable) is
    down_timeout: timedelta  # unreachable this long: the repair failed


@dataclass(frozen=True, slots=True)
class StormRule:
    enabled: bool
    min_nodes: int
    window: timedelta
    signals: tuple[str, ...]
    events: tuple[StormEvent, ...]
    followers: tuple[Matcher, ...]
    # A node incident whose event has peers still too few for a fleet may fold until this long after it is
    # marked "storm pending" (never past the window): routing holds its first post and page until then.
    pending: timedelta
    # A growing fleet's pages are told its new count at most this often, and only when it grew (0: never).
    page_updates: timedelta


@dataclass(frozen=True, slots=True)
class CorrelationRules:
    groups: tuple[GroupRule, ...]
    hold_down: timedelta
    reopen_window: timedelta
    fold_window: timedelta
    storm: StormRule
    watchdog: WatchdogRule
    response: ResponseRule
    job: JobRule
    domains: DomainRule

    @property
    def reopens_within(self) -> timedelta:
        """How long a resolved incident can still reopen: its key firing again within the reopen window, or
        the response to its fault (a reboot, an uncordon) within the response window."""
        return max(self.reopen_window, self.response.window) if self.reopen_window else timedelta(0)


@dataclass(slots=True)
class RuleSet:
    catalog: XidCatalog = field(default_factory=lambda: XidCatalog([]))  # with the recovery actions (Xid 154)
    sxids: SxidCatalog = DEFAULT_SXIDS  # rules/sxid-catalog.yml
    signals: tuple[SignalRule, ...] = ()
    evidence: EvidenceRules = field(default_factory=EvidenceRules)
    correlation: CorrelationRules = field(default_factory=lambda: default_correlation())
    routing: Routing | None = None  # once a routing section is loaded
    rma: tuple[RmaRule, ...] = ()  # the RMA candidate policy (rma sections + history rma rules)
    history: tuple[HistoryRule, ...] = ()  # rules/history.yml: the past -> verdicts (alertd/engine/judge.py)
    remediation: RemediationPolicy = field(default_factory=RemediationPolicy)  # rules/remediation.yml
    sources: tuple[str, ...] = ()
    # Recording rules expanded before classification (config classify.prometheus_rules, rules API).
    recorded: RecordingIndex = field(default_factory=RecordingIndex)
    kube_health: KubeHealthRules = field(default_factory=KubeHealthRules)  # rules/sources.yml


class _Checker:
    """Collects semantic problems with positions while building typed rules."""

    def __init__(self, source: str, marks: Marks):
        self.source, self.marks = source, marks
        self.found: list[Problem] = []

    def where(self, path: Path_) -> str:
        return f"{self.source}:{mark_for(self.marks, path)[0]}"

    def problem(self, path: Path_, message: str) -> None:
        line, col = mark_for(self.marks, path)
        self.found.append(Problem(self.source, message, line, col, format_path(path)))

    def matchers(self, items: Any, path: Path_) -> tuple[Matcher, ...]:
        out: list[Matcher] = []
        for i, text in enumerate(items or []):
            try:
                out.extend(parse_matchers([text]))
            except MatcherError as exc:
                self.problem(path + (i,), str(exc))
        return tuple(out)


def rule_files(paths: Sequence[Path | str]) -> list[Path]:
    """Files named by paths; directories contribute their *.yml, skipping tests/, *.test.yml and hidden names.

    A directory's file replaces one of the same relative name from an earlier directory: a site's
    ``routing.yml`` (``rules.site``) takes the place of the shipped one, its other files add to them."""
    out: dict[Path | str, Path] = {}
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                parts = f.relative_to(p).parts  # hidden ones: a ConfigMap volume's ..data and ..<timestamp>/
                if f.suffix in RULE_SUFFIXES and f.is_file() and "tests" not in parts[:-1] \
                        and not any(part.startswith(".") for part in parts) \
                        and not f.name.endswith((".test.yml", ".test.yaml")):
                    out.pop(f.relative_to(p), None)  # the replacement loads where the site's files load
                    out[f.relative_to(p)] = f
        else:
            out[str(p)] = p
    return list(out.values())


@dataclass(slots=True)
class _Sections:
    """What the rule files say so far, section by section (later files add to or override earlier ones)."""

    xids: dict[int, XidEntry] = field(default_factory=dict)
    recovery: RecoveryTable = field(default_factory=RecoveryTable)
    sxids: SxidCatalog | None = None
    signals: list[SignalRule] = field(default_factory=list)
    evidence: EvidenceRules = field(default_factory=EvidenceRules)
    correlation: CorrelationRules | None = None
    pending_given: bool = False  # correlation.storm.pending set (it wins over routing.storm_wait, its alias)
    routing: tuple[JSONObject, _Checker] | None = None  # parsed last: its problems follow every file's own
    rma: list[RmaRule] = field(default_factory=list)
    history: list[HistoryRule] = field(default_factory=list)
    remediation: RemediationPolicy | None = None
    kube_health: KubeHealthRules | None = None


def load_rules(paths: Sequence[Path | str]) -> RuleSet:
    """Load and check every rule file; raise InvalidDocument listing all problems."""
    files = rule_files(paths)
    if not files:
        raise InvalidDocument([Problem(", ".join(map(str, paths)) or "<none>", "no rule files found")])
    found: list[Problem] = []
    sections = _Sections()
    for path in files:
        read = _read_rule_file(path, found)
        if read is None:
            continue
        doc, check = read
        for section in SECTIONS:
            if section in doc:
                _read_section(sections, section, doc, check, found)
        found.extend(check.found)
    rules = RuleSet(
        catalog=XidCatalog(list(sections.xids.values()), sections.recovery),
        sxids=sections.sxids or DEFAULT_SXIDS,
        signals=tuple(sections.signals),
        evidence=sections.evidence,
        correlation=sections.correlation or default_correlation(),
        rma=tuple(sections.rma) + rma_rules(tuple(sections.history)),
        history=tuple(sections.history),
        remediation=sections.remediation or RemediationPolicy(),
        sources=tuple(map(str, files)),
        kube_health=sections.kube_health or KubeHealthRules(),
    )
    if sections.routing is not None:
        data, check = sections.routing
        rules.routing = parse_routing(data, check)
        rules.correlation = _storm_wait_alias(rules.correlation, rules.routing.storm_wait, sections.pending_given)
        found.extend(check.found)
    if found:
        raise InvalidDocument(found)
    return rules


def _storm_wait_alias(correlation: CorrelationRules, storm_wait: timedelta | None, pending_given: bool) -> CorrelationRules:
    """``routing.storm_wait`` is an older name of ``correlation.storm.pending``: the engine alone decides
    storms, and routing holds a first post only while the engine's mark stands."""
    if storm_wait is None:
        return correlation
    if pending_given:
        log.warning("routing.storm_wait is ignored: correlation.storm.pending is set, and storm_wait is only "
                    "its older name; remove storm_wait")
        return correlation
    log.warning("routing.storm_wait is deprecated: it now sets correlation.storm.pending (%ss), the engine's "
                "hold for a node incident that may still fold into a storm; move it there",
                int(storm_wait.total_seconds()))
    return dataclasses.replace(correlation, storm=dataclasses.replace(correlation.storm, pending=storm_wait))


def _read_rule_file(path: Path, found: list[Problem]) -> tuple[JSONObject, _Checker] | None:
    """One file's document and its checker (unknown sections reported), or None: empty or unreadable."""
    try:
        doc, marks = load_yaml(path, with_marks=True)
    except InvalidDocument as exc:
        found.extend(exc.problems)
        return None
    source = str(path)
    if doc is None:
        return None
    if not isinstance(doc, dict):
        found.append(Problem(source, "a rule file must be a mapping of sections", 1, 1))
        return None
    check = _Checker(source, marks)
    for key in doc:
        if key not in SECTIONS:
            check.problem((key,), f"unknown section {key!r}; expected one of {', '.join(SECTIONS)}")
    return doc, check


def _read_section(sections: _Sections, section: str, doc: JSONObject, check: _Checker,
                  found: list[Problem]) -> None:
    """Validate one section against its schema, then add what it says to ``sections``."""
    errors = schema_problems(SECTIONS[section], {section: doc[section]}, check.source, check.marks)
    if errors:
        found.extend(errors)
        return
    valid = cast(RuleFileDoc, {section: doc[section]})  # the section's schema holds: typed from here on
    if section == "xids":
        _xids(XID_CATALOG.decode(valid).xids, check, sections.xids)
    elif section == "recovery_actions":
        sections.recovery = merge_recovery(sections.recovery, _recovery(RECOVERY_ACTIONS_FILE.decode(valid).recovery_actions, check))
    elif section == "sxids":
        sections.sxids = merge_sxids(sections.sxids, _sxids(SXID_CATALOG.decode(valid).sxids, check))
    elif section == "signals":
        sections.signals.extend(_signals(SIGNALS.decode(valid).signals, check))
    elif section == "evidence":
        sections.evidence = merge(sections.evidence, parse_evidence_rules(EVIDENCE.decode(valid).evidence, check, check.where))
    elif section == "correlation":
        if sections.correlation is not None:
            check.problem(("correlation",), "correlation is defined in more than one rule file")
        body = doc["correlation"] if isinstance(doc["correlation"], dict) else {}
        sections.correlation = _correlation(decode(Correlation, body, ("correlation",), check), check)
        storm = body.get("storm")
        sections.pending_given = isinstance(storm, dict) and "pending" in storm
    elif section == "routing":
        if sections.routing is not None:
            check.problem(("routing",), "routing is defined in more than one rule file")
        sections.routing = (valid["routing"], check)
    elif section == "rma":
        sections.rma.extend(parse_rma(valid["rma"], check))
    elif section == "history":
        decoded = decode(HistoryFile, {"history": doc["history"]}, (), check).history
        sections.history.extend(_unique_history(parse_history(decoded, check), sections, check))
    elif section == "remediation":
        if sections.remediation is not None:
            check.problem(("remediation",), "remediation is defined in more than one rule file")
        sections.remediation = parse_remediation(valid["remediation"] or {}, check)
    elif section == "kube_health":
        body = doc["kube_health"] if isinstance(doc["kube_health"], dict) else {}
        sections.kube_health = parse_kube_health(decode(KubeHealthSection, body, ("kube_health",), check), check,
                                                 sections.kube_health)


def _unique_history(rules: tuple[HistoryRule, ...], sections: _Sections, check: _Checker) -> tuple[HistoryRule, ...]:
    """History rules named once across files, and once among the RMA rules they add to."""
    taken = {r.name for r in sections.history} | {r.name for r in sections.rma}
    for i, rule in enumerate(rules):
        if rule.name in taken:
            check.problem(("history", i, "name"), f"history rule name {rule.name!r} is already a history or RMA rule")
    return rules


def _xids(entries: tuple[XidEntry, ...], check: _Checker, xids: dict[int, XidEntry]) -> None:
    seen: set[int] = set()
    for i, entry in enumerate(entries):
        if entry.code in seen:
            check.problem(("xids", i, "code"), f"duplicate Xid code {entry.code}")
        seen.add(entry.code)
        xids[entry.code] = entry  # later files override earlier ones


def _recovery(section: RecoveryActionsSection, check: _Checker) -> RecoveryTable:
    table = parse_recovery(section)
    seen: set[int] = set()
    for i, action in enumerate(table.actions):
        if action.value in seen:
            check.problem(("recovery_actions", "actions", i, "value"), f"duplicate recovery action value {action.value}")
        seen.add(action.value)
    return table


def _sxids(section: SxidsSection, check: _Checker) -> SxidCatalog:
    codes = [entry.code for entry in section.codes]
    for i, code in enumerate(codes):
        if code in codes[:i]:
            check.problem(("sxids", "codes", i, "code"), f"duplicate SXid code {code}")
    return parse_sxid_catalog(section)


def _signals(entries: tuple[SignalEntry, ...], check: _Checker) -> list[SignalRule]:
    signals = []
    for i, entry in enumerate(entries):
        matchers = check.matchers(entry.match, ("signals", i, "match"))
        signals.append(SignalRule(
            kind=entry.kind, matchers=matchers, alertnames=literal_values(matchers, "alertname"), detail=entry.detail,
            severity=entry.severity, category=entry.category, runbook=entry.runbook, where=check.where(("signals", i))))
    return signals


def default_correlation() -> CorrelationRules:
    """The correlation rules of a rule set with no correlation section: its declared defaults."""
    check = _Checker("correlation defaults", {})
    rules = _correlation(Correlation.from_doc({}), check)
    assert not check.found, check.found
    return rules


def _correlation(doc: Correlation, check: Checker) -> CorrelationRules:
    groups: list[GroupRule] = []
    names: set[str] = set()
    for i, g in enumerate(doc.groups):
        if g.name in names:
            check.problem(("correlation", "groups", i, "name"), f"duplicate group name {g.name!r}")
        names.add(g.name)
        groups.append(GroupRule(g.name, g.by, check.matchers(g.match, ("correlation", "groups", i, "match")),
                                g.allow_empty))
    if groups[-1].matchers or not groups[-1].allow_empty:
        check.problem(("correlation", "groups"), "the last group should match everything (no match, allow_empty: true) so no alert is dropped")
    return CorrelationRules(
        groups=tuple(groups), hold_down=doc.hold_down, reopen_window=doc.reopen_window, fold_window=doc.fold_window,
        storm=_storm(doc.storm, check), watchdog=doc.watchdog, response=_response(doc.response, check),
        job=parse_job(doc.job, check), domains=check_domains(doc.domains, check))


def _storm(doc: Storm, check: Checker) -> StormRule:
    root = ("correlation", "storm")
    events: list[StormEvent] = []
    for i, ev in enumerate(doc.events):
        if ev.name in {e.name for e in events}:
            check.problem(root + ("events", i, "name"), f"duplicate storm event name {ev.name!r}")
        where = root + ("events", i)
        events.append(StormEvent(ev.name, ev.by, check.matchers(ev.match, where + ("match",)), ev.reading,
                                 ev.advice, parse_escalate(ev.escalate, where + ("escalate",), check)))
    return StormRule(enabled=doc.enabled, min_nodes=doc.min_nodes, window=doc.window, signals=doc.signals,
                     events=tuple(events), followers=check.matchers(doc.followers, root + ("followers",)),
                     pending=doc.pending, page_updates=doc.page_updates)


def _response(doc: Response, check: Checker) -> ResponseRule:
    root = ("correlation", "response")
    return ResponseRule(
        signals=check.matchers(doc.signals, root + ("signals",)), window=doc.window,
        repair_timeout=doc.repair_timeout, still_down=check.matchers(doc.still_down, root + ("still_down",)),
        unreachable=check.matchers(doc.unreachable, root + ("unreachable",)), down_timeout=doc.down_timeout)
