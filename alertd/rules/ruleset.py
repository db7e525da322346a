"""Loads rules/ (Xid catalog, signal classification, correlation, routing) into one RuleSet.

Each top-level section of a rule file is validated by its own JSON Schema, then
checked semantically (matchers parse, durations parse, names unique). Every
problem carries ``file:line:column``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from alertd.core.durations import DurationError, parse_duration
from alertd.rules.evidence import EvidenceRules, build_evidence, merge
from alertd.core.errors import InvalidDocument, Problem
from alertd.gpu.catalog import XidCatalog, XidEntry
from alertd.core.matchers import Matcher, MatcherError, literal_values, parse_matchers
from alertd.promql.recording import RecordingIndex
from alertd.schemas import problems as schema_problems
from alertd.core.yamlio import format_path, load_yaml, mark_for

# section name -> JSON Schema name
SECTIONS = {"xids": "xid-catalog", "signals": "signals", "evidence": "evidence", "correlation": "correlation",
            "routing": "routing", "rma": "rma"}
RULE_SUFFIXES = (".yml", ".yaml")


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


DEFAULT_STORM_EVENTS = (
    StormEvent("gpu-fault", ("cluster", "category"), parse_matchers(['signal=~"xid|ecc|row_remap|nvlink"'])),
    StormEvent("thermal", ("cluster",), parse_matchers(['signal="thermal"'])),
    StormEvent("node-lost", ("cluster",), parse_matchers(['signal=~"metrics_missing|node_not_ready"'])),
)
DEFAULT_FOLLOWERS = parse_matchers(['signal=~"metrics_missing|node_not_ready"'])


@dataclass(frozen=True, slots=True)
class StormRule:
    enabled: bool = True
    min_nodes: int = 5
    window: timedelta = timedelta(minutes=15)
    signals: tuple[str, ...] = ()
    events: tuple[StormEvent, ...] = DEFAULT_STORM_EVENTS
    followers: tuple[Matcher, ...] = DEFAULT_FOLLOWERS


@dataclass(frozen=True, slots=True)
class WatchdogRule:
    alertnames: tuple[str, ...] = ("Watchdog",)
    timeout: timedelta = timedelta(minutes=10)
    severity: str = "critical"


DEFAULT_GROUPS = (
    GroupRule("application-xid", ("cluster", "namespace", "pod"), parse_matchers(['signal="xid"', 'category="application"'])),
    GroupRule("node", ("cluster", "node"), parse_matchers(['signal!="other"'])),
    GroupRule("origin", ("cluster", "origin"), parse_matchers(['node=""', 'signal!="watchdog"'])),
    GroupRule("node-unknown", ("cluster", "alertname", "fingerprint"), parse_matchers(['signal!~"other|watchdog"', 'node=""'])),
    GroupRule("other", ("alertname", "cluster", "node"), (), True),
)


@dataclass(frozen=True, slots=True)
class CorrelationRules:
    groups: tuple[GroupRule, ...] = DEFAULT_GROUPS
    hold_down: timedelta = timedelta(minutes=5)
    reopen_window: timedelta = timedelta(hours=1)
    fold_window: timedelta = timedelta(minutes=10)
    storm: StormRule = StormRule()
    watchdog: WatchdogRule = WatchdogRule()


@dataclass(slots=True)
class RuleSet:
    catalog: XidCatalog = field(default_factory=lambda: XidCatalog([]))
    signals: tuple[SignalRule, ...] = ()
    evidence: EvidenceRules = field(default_factory=EvidenceRules)
    correlation: CorrelationRules = field(default_factory=CorrelationRules)
    routing: Any = None  # alertd.route.Routing once a routing section is loaded
    rma: tuple[Any, ...] = ()  # alertd.rules.rma.RmaRule: the RMA candidate policy
    sources: tuple[str, ...] = ()
    # Recording rules expanded before classification (config classify.prometheus_rules, rules API).
    recorded: RecordingIndex = field(default_factory=RecordingIndex)


class _Checker:
    """Collects semantic problems with positions while building typed rules."""

    def __init__(self, source: str, marks: dict):
        self.source, self.marks, self.found = source, marks, []

    def where(self, path: tuple) -> str:
        return f"{self.source}:{mark_for(self.marks, path)[0]}"

    def problem(self, path: tuple, message: str) -> None:
        line, col = mark_for(self.marks, path)
        self.found.append(Problem(self.source, message, line, col, format_path(path)))

    def matchers(self, items: Any, path: tuple) -> tuple[Matcher, ...]:
        out: list[Matcher] = []
        for i, text in enumerate(items or []):
            try:
                out.extend(parse_matchers([text]))
            except MatcherError as exc:
                self.problem(path + (i,), str(exc))
        return tuple(out)

    def duration(self, value: Any, path: tuple, default: timedelta) -> timedelta:
        if value is None:
            return default
        try:
            return parse_duration(value)
        except DurationError as exc:
            self.problem(path, str(exc))
            return default


def rule_files(paths: list[Path | str]) -> list[Path]:
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


def load_rules(paths: list[Path | str], *, routing_loader: Callable[..., Any] | None = None) -> RuleSet:
    """Load and check every rule file; raise InvalidDocument listing all problems."""
    found: list[Problem] = []
    xids: dict[int, XidEntry] = {}
    signals: list[SignalRule] = []
    evidence = EvidenceRules()
    correlation: CorrelationRules | None = None
    routing_doc: tuple[Any, _Checker] | None = None
    rma: list[Any] = []
    files = rule_files(paths)
    if not files:
        raise InvalidDocument([Problem(", ".join(map(str, paths)) or "<none>", "no rule files found")])
    for path in files:
        try:
            doc, marks = load_yaml(path, with_marks=True)
        except InvalidDocument as exc:
            found.extend(exc.problems)
            continue
        source = str(path)
        if doc is None:
            continue
        if not isinstance(doc, dict):
            found.append(Problem(source, "a rule file must be a mapping of sections", 1, 1))
            continue
        check = _Checker(source, marks)
        for key in doc:
            if key not in SECTIONS:
                check.problem((key,), f"unknown section {key!r}; expected one of {', '.join(SECTIONS)}")
        for section, schema_name in SECTIONS.items():
            if section not in doc:
                continue
            errors = schema_problems(schema_name, {section: doc[section]}, source, marks)
            if errors:
                found.extend(errors)
                continue
            if section == "xids":
                seen: set[int] = set()
                for i, entry in enumerate(doc["xids"]):
                    if entry["code"] in seen:
                        check.problem(("xids", i, "code"), f"duplicate Xid code {entry['code']}")
                    seen.add(entry["code"])
                    xids[entry["code"]] = XidEntry(**entry)  # later files override earlier ones
            elif section == "signals":
                for i, entry in enumerate(doc["signals"]):
                    matchers = check.matchers(entry.get("match"), ("signals", i, "match"))
                    signals.append(
                        SignalRule(
                            kind=entry["kind"],
                            matchers=matchers,
                            alertnames=literal_values(matchers, "alertname"),
                            detail=entry.get("detail", ""),
                            severity=entry.get("severity", ""),
                            category=entry.get("category", ""),
                            runbook=entry.get("runbook", ""),
                            where=check.where(("signals", i)),
                        )
                    )
            elif section == "evidence":
                evidence = merge(evidence, build_evidence(doc["evidence"], check, check.where))
            elif section == "correlation":
                if correlation is not None:
                    check.problem(("correlation",), "correlation is defined in more than one rule file")
                correlation = _correlation(doc["correlation"], check)
            elif section == "routing":
                if routing_doc is not None:
                    check.problem(("routing",), "routing is defined in more than one rule file")
                routing_doc = (doc["routing"], check)
            elif section == "rma":
                from alertd.rules.rma import load as load_rma

                rma.extend(load_rma(doc["rma"], check))
        found.extend(check.found)
    rules = RuleSet(
        catalog=XidCatalog(list(xids.values())),
        signals=tuple(signals),
        evidence=evidence,
        correlation=correlation or CorrelationRules(),
        rma=tuple(rma),
        sources=tuple(map(str, files)),
    )
    if routing_doc is not None and routing_loader is None:
        from alertd.rules.routing import load_routing as routing_loader
    if routing_doc is not None and routing_loader is not None:
        data, check = routing_doc
        rules.routing = routing_loader(data, check)
        found.extend(check.found)
    if found:
        raise InvalidDocument(found)
    return rules


def _correlation(doc: dict, check: _Checker) -> CorrelationRules:
    base = CorrelationRules()
    groups = []
    names: set[str] = set()
    for i, g in enumerate(doc.get("groups") or []):
        if g["name"] in names:
            check.problem(("correlation", "groups", i, "name"), f"duplicate group name {g['name']!r}")
        names.add(g["name"])
        groups.append(
            GroupRule(
                name=g["name"],
                by=tuple(g["by"]),
                matchers=check.matchers(g.get("match"), ("correlation", "groups", i, "match")),
                allow_empty=bool(g.get("allow_empty", False)),
            )
        )
    if groups and (groups[-1].matchers or not groups[-1].allow_empty):
        check.problem(("correlation", "groups"), "the last group should match everything (no match, allow_empty: true) so no alert is dropped")
    storm_doc = doc.get("storm") or {}
    events = []
    for i, ev in enumerate(storm_doc.get("events") or []):
        if ev["name"] in {e.name for e in events}:
            check.problem(("correlation", "storm", "events", i, "name"), f"duplicate storm event name {ev['name']!r}")
        events.append(StormEvent(ev["name"], tuple(ev["by"]),
                                 check.matchers(ev.get("match"), ("correlation", "storm", "events", i, "match"))))
    followers = storm_doc.get("followers")
    storm = StormRule(
        enabled=storm_doc.get("enabled", True),
        min_nodes=storm_doc.get("min_nodes", base.storm.min_nodes),
        window=check.duration(storm_doc.get("window"), ("correlation", "storm", "window"), base.storm.window),
        signals=tuple(storm_doc.get("signals") or ()),
        events=tuple(events) if "events" in storm_doc else base.storm.events,
        followers=base.storm.followers if followers is None else check.matchers(followers, ("correlation", "storm", "followers")),
    )
    wd_doc = doc.get("watchdog") or {}
    watchdog = WatchdogRule(
        alertnames=tuple(wd_doc.get("alertnames") or base.watchdog.alertnames),
        timeout=check.duration(wd_doc.get("timeout"), ("correlation", "watchdog", "timeout"), base.watchdog.timeout),
        severity=wd_doc.get("severity", base.watchdog.severity),
    )
    return CorrelationRules(
        groups=tuple(groups) or base.groups,
        hold_down=check.duration(doc.get("hold_down"), ("correlation", "hold_down"), base.hold_down),
        reopen_window=check.duration(doc.get("reopen_window"), ("correlation", "reopen_window"), base.reopen_window),
        fold_window=check.duration(doc.get("fold_window"), ("correlation", "fold_window"), base.fold_window),
        storm=storm,
        watchdog=watchdog,
    )
