"""``alertd check``: validate rule and config files like ``promtool check``.

Per file: YAML syntax, JSON Schema, the loaders' semantic checks. Across files: unknown receivers,
unreachable routes and groups, route matchers and group ``by`` fields no incident or alert has, runbook
pages that do not exist (warning). Every finding is printed as ``file:line:column: message``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, TextIO

from alertd.authoring.route_fields import route_field_findings
from alertd.authoring.race import Timing
from alertd.authoring.virtual import load_rule_set
from alertd.config.settings import Config, parse_config
from alertd.rules.shipped import default_rule_paths
from alertd.core.errors import InvalidDocument, Problem
from alertd.core.matchers import MatcherError, parse_matchers
from alertd.core import json_types
from alertd.promql.recording import config_problems
from alertd.rules.ruleset import SECTIONS, rule_files
from alertd.schemas import problems as schema_problems
from alertd.schemas import schema
from alertd.core.yamlio import Marks, Path_, format_path, load_yaml, mark_for
from alertd.authoring.storm_check import storm_warnings


# Fields every alert has after normalization (alertd.engine.grouping.fields_of).
DERIVED_FIELDS = frozenset({"cluster", "node", "origin", "gpu", "namespace", "pod", "container", "signal", "category",
                            "severity", "xid", "switch", "alertname", "fingerprint"})
# Labels the exporters our Prometheus rules read put on alerts (dcgm-exporter, kube-state-metrics, Prometheus).
KNOWN_LABELS = frozenset({
    "instance", "job", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "hostname", "DCGM_FI_DRIVER_VERSION",
    "exported_pod", "exported_namespace", "exported_container", "err_code", "clock_event_reasons", "condition",
    "status", "key", "value", "effect", "kubernetes_node", "uid", "service", "endpoint"})

@dataclass(slots=True)
class Report:
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    rule_files: list[str] = field(default_factory=list)
    config_files: list[str] = field(default_factory=list)
    test_files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, p: Problem) -> None:
        if p not in self.errors:
            self.errors.append(p)

    def warn(self, p: Problem) -> None:
        if p not in self.warnings and p not in self.errors:
            self.warnings.append(p)

    def lines(self) -> list[str]:
        def key(p: Problem) -> tuple[str, int, int]:
            return (p.source, p.line, p.column)

        out = [(key(p), str(p)) for p in self.errors]
        out += [(key(p), _warning_text(p)) for p in self.warnings]
        return [text for _, text in sorted(out, key=lambda x: x[0])]

    def summary(self) -> str:
        parts = [(self.rule_files, "rule file"), (self.config_files, "config file"), (self.test_files, "test file")]
        what = ", ".join(_count(len(files), noun) for files, noun in parts if files) or "0 rule files"
        warned = f" ({_count(len(self.warnings), 'warning')})" if self.warnings else ""
        if self.ok:
            return f"SUCCESS: {what} found{warned}"
        bad = {p.source for p in self.errors}
        return f"FAILED: {_count(len(self.errors), 'problem')} in {_count(len(bad), 'file')} ({what} checked){warned}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _warning_text(p: Problem) -> str:
    text = str(p)
    where = p.source + (f":{p.line}:{p.column or 1}" if p.line else "")
    return where + ": warning:" + text[len(where) + 1:]


# ----- what kind of file -----


def kind_of(doc: object) -> str:
    """'rules', 'config', 'test' or 'rules' by default (it then fails as an unknown section). ``rma`` is a rule
    section (a list) and a config section (a mapping): a key only one kind has decides, else its shape."""
    if not isinstance(doc, dict) or not doc:
        return "rules"
    keys = set(doc)
    rules, config = keys & set(SECTIONS), keys & set(json_types.member(schema("config"), "properties"))
    if rules - config:
        return "rules"
    if "tests" in keys or "rule_files" in keys:
        return "test"
    return "config" if config - rules or isinstance(doc.get("rma"), dict) else "rules"


def expand(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        out.extend(rule_files([p]) if p.is_dir() else [p])
    return out


# ----- the check -----


def check(paths: Iterable[str | Path] | None = None, *, runbooks: str | Path | None = None) -> Report:
    report = Report()
    paths = list(paths or default_rule_paths())
    files = expand(paths)
    if not files:
        report.error(Problem(", ".join(map(str, paths)), "no rule or config files found"))
    docs: dict[Path, tuple[Any, Marks]] = {}
    explicit_rules: list[Path] = []
    configs: list[Path] = []
    for f in files:
        if not f.exists():
            report.error(Problem(str(f), "no such file or directory"))
            continue
        try:
            doc, marks = load_yaml(f, with_marks=True)
        except InvalidDocument as exc:
            for p in exc.problems:
                report.error(p)
            report.rule_files.append(str(f))
            continue
        docs[f] = (doc, marks)
        kind = kind_of(doc)
        if kind == "config":
            configs.append(f)
        elif kind == "test":
            report.test_files.append(str(f))
            for p in schema_problems("ruletest", _plain(doc), str(f), marks):
                report.error(p)
        else:
            explicit_rules.append(f)
    # rule files, and the configuration that names them (None: it did not parse) with its path
    rule_sets: list[tuple[list[Path], tuple[Config | None, str] | None]] = []
    checked_configs: list[tuple[Path, Config | None]] = []
    for f in configs:
        report.config_files.append(str(f))
        rule_paths, cfg = _check_config(f, *docs[f], report)
        checked_configs.append((f, cfg))
        if rule_paths:
            rule_sets.append((rule_paths, (cfg, str(f))))
    if explicit_rules:
        # with exactly one config, its notifier settings apply to the rules checked along with it
        only = checked_configs[0] if len(checked_configs) == 1 and checked_configs[0][1] is not None else None
        rule_sets.insert(0, (explicit_rules, (only[1], str(only[0])) if only else None))
    seen: set[tuple[str, ...]] = set()
    for rule_set, config in rule_sets:
        members = rule_files(rule_set)
        ident = tuple(sorted(str(p.resolve()) for p in members))
        if ident in seen:
            continue
        seen.add(ident)
        for m in members:
            if str(m) not in report.rule_files:
                report.rule_files.append(str(m))
        _check_rules(members, docs, report, runbooks, config)
    return report


def _check_config(path: Path, doc: Any, marks: Marks, report: Report) -> tuple[list[Path], Config | None]:
    """Validate a config file; return the rule paths it names (to check them too) and the parsed config."""
    source = str(path)
    cfg: Config | None = None
    base = path.resolve().parent  # relative *_file paths: against the config file, as alertd serve reads them
    try:
        cfg = parse_config(doc, source, marks, base=base)
    except InvalidDocument as exc:
        unset = [p for p in exc.problems if p.message.startswith("environment variable")]
        for p in unset:  # the checking machine need not have the deployment's secrets
            report.warn(Problem(p.source, p.message + " here (value not checked)", p.line, p.column, p.path))
        unset_lines = {p.line for p in unset}
        env = dict(os.environ)
        for p in unset:
            env[p.message.split("${", 1)[1].split("}", 1)[0]] = "placeholder"
        try:
            cfg = parse_config(doc, source, marks, env, base=base) if unset else None
            rest = [] if unset else exc.problems
        except InvalidDocument as again:
            rest = again.problems
        for p in rest:
            if p.line not in unset_lines:
                report.error(p)
    rules_doc = (doc or {}).get("rules") if isinstance(doc, dict) else None
    out = []
    for i, raw in enumerate((rules_doc or {}).get("paths") or []):
        if not isinstance(raw, str):
            continue
        candidate = path.parent / raw  # relative to the config file, as the service reads it
        found = candidate if candidate.exists() else None
        if found is None:
            report.error(Problem(source, f"rules.paths[{i}]: {raw} does not exist", *mark_for(marks, ("rules", "paths", i))))
        else:
            out.append(found)
    for problem in config_problems(doc, path, marks):  # classify.prometheus_rules
        report.error(problem)
    return out, cfg


def _check_rules(files: list[Path], docs: dict[Path, tuple[Any, Marks]], report: Report, runbooks: str | Path | None,
                 config: tuple[Config | None, str] | None = None) -> None:
    if not files:
        return
    try:
        load_rule_set(files)
    except InvalidDocument as exc:
        for p in exc.problems:
            report.error(p)
    except Exception as exc:  # a loader bug must not hide the other findings
        report.error(Problem(", ".join(map(str, files)), f"rules could not be loaded: {type(exc).__name__}: {exc}"))
    loaded: dict[Path, tuple[Any, Marks]] = {}
    for f in files:
        if f not in docs:
            try:
                docs[f] = load_yaml(f, with_marks=True)
            except InvalidDocument:
                continue
        doc, marks = docs[f]
        if isinstance(doc, dict):
            loaded[f] = (doc, marks)
    _cross_checks(loaded, report, runbooks)
    if config is not None and config[0] is not None:
        _check_keys(loaded, report, config[0], config[1])


# ----- checks across files -----


def _problem(f: Path, marks: Marks, path: Path_, message: str) -> Problem:
    return Problem(str(f), message, *mark_for(marks, path), format_path(path))


def _section(loaded: dict[Path, tuple[Any, Marks]], name: str) -> list[tuple[Path, Any, Marks]]:
    return [(f, doc[name], marks) for f, (doc, marks) in loaded.items() if name in doc]


def _label_names(matchers: Any) -> set[str]:
    out: set[str] = set()
    for text in matchers or []:
        try:
            out.update(m.name for m in parse_matchers([text]))
        except (MatcherError, TypeError):
            pass
    return out


def _matcher_key(items: Any) -> frozenset[str]:
    """Matchers in canonical form, to compare two lists as sets."""
    out: set[str] = set()
    for text in items if isinstance(items, list) else []:
        try:
            out.update(str(m) for m in parse_matchers([text]))
        except (MatcherError, TypeError):
            out.add(str(text))
    return frozenset(out)


def _cross_checks(loaded: dict[Path, tuple[Any, Marks]], report: Report, runbooks: str | Path | None) -> None:
    mentioned: set[str] = set()
    for _, sigs, _ in _section(loaded, "signals"):
        for rule in sigs if isinstance(sigs, list) else []:
            if isinstance(rule, dict):
                mentioned |= _label_names(rule.get("match"))
    _check_signals(loaded, report)
    _check_groups(loaded, report, mentioned)
    _check_runbooks(loaded, report, runbooks)
    _check_routing(loaded, report, DERIVED_FIELDS | KNOWN_LABELS | mentioned)


def _check_signals(loaded: dict[Path, tuple[Any, Marks]], report: Report) -> None:
    first: dict[frozenset[str], tuple[Path, int]] = {}
    for f, sigs, marks in _section(loaded, "signals"):
        for i, rule in enumerate(sigs if isinstance(sigs, list) else []):
            if not isinstance(rule, dict) or not isinstance(rule.get("match"), list):
                continue
            key = _matcher_key(rule["match"])
            if key in first:
                where = first[key]
                report.warn(_problem(f, marks, ("signals", i, "match"),
                                     f"never used: an earlier signal rule ({where[0]}, signals[{where[1]}]) has the same matchers"))
            else:
                first[key] = (f, i)


def _check_groups(loaded: dict[Path, tuple[Any, Marks]], report: Report, mentioned: set[str]) -> None:
    for f, corr, marks in _section(loaded, "correlation"):
        if not isinstance(corr, dict):
            continue
        found = corr.get("groups")
        groups = found if isinstance(found, list) else []
        known = DERIVED_FIELDS | KNOWN_LABELS | mentioned
        for g in groups:
            if isinstance(g, dict):
                known |= _label_names(g.get("match"))
        catch_all: int | None = None
        for i, g in enumerate(groups):
            if not isinstance(g, dict):
                continue
            name = g.get("name", f"#{i}")
            if catch_all is not None:
                report.error(_problem(f, marks, ("correlation", "groups", i),
                                      f"group {name!r} is unreachable: group {groups[catch_all].get('name')!r} before it "
                                      "matches every alert (no match, allow_empty: true)"))
            elif not g.get("match") and g.get("allow_empty"):
                catch_all = i
            for j, by in enumerate(g.get("by") or []):
                if isinstance(by, str) and by not in known:
                    then = "its key gets an empty value" if g.get("allow_empty") else "alerts fall through to the next group"
                    report.warn(_problem(f, marks, ("correlation", "groups", i, "by", j),
                                         f"group {name!r} groups by {by!r}, which is no derived field and which no rule "
                                         f"or known exporter label provides; where it is missing {then}"))
        storm = corr.get("storm")
        if isinstance(storm, dict):
            for path, message in storm_warnings(storm):
                report.warn(_problem(f, marks, path, message))


def _check_routing(loaded: dict[Path, tuple[Any, Marks]], report: Report, labels: frozenset[str]) -> None:
    """Routes that never match or match on a field no incident has; unused windows. (Receivers: the loader.)"""
    for f, routing, marks in _section(loaded, "routing"):
        if not isinstance(routing, dict):
            continue
        for refused, p, m in route_field_findings(routing, labels):
            (report.error if refused else report.warn)(_problem(f, marks, p, m))
        found = routing.get("routes")
        routes = found if isinstance(found, list) else []
        stopper: tuple[int, str] | None = None  # the first route that takes everything and stops
        seen: dict[frozenset[str], int] = {}
        for i, r in enumerate(routes):
            if not isinstance(r, dict):
                continue
            name = r.get("name") or f"routes[{i}]"
            path = ("routing", "routes", i)
            key = _matcher_key(r.get("match"))
            if stopper is not None:
                report.error(_problem(f, marks, path, f"route {name!r} is unreachable: route {stopper[1]!r} before it "
                                                      "matches every incident and has no continue: true"))
            elif key in seen and not routes[seen[key]].get("continue"):
                first = routes[seen[key]]
                report.error(_problem(f, marks, path, f"route {name!r} is unreachable: route "
                                                      f"{first.get('name') or f'routes[{seen[key]}]'!r} before it has the "
                                                      "same matchers and no continue: true"))
            seen.setdefault(key, i)
            if not key and not r.get("continue") and stopper is None:
                stopper = (i, name)
        if stopper is not None and routing.get("default_receiver"):
            report.warn(_problem(f, marks, ("routing", "default_receiver"),
                                 f"default_receiver is never used: route {stopper[1]!r} matches every incident"))
        used = {w for r in routes if isinstance(r, dict) for k in ("mute", "active") for w in r.get(k) or []}
        for i, w in enumerate(routing.get("mute_windows") or []):
            if isinstance(w, dict) and w.get("name") not in used:
                report.warn(_problem(f, marks, ("routing", "mute_windows", i, "name"),
                                     f"mute window {w.get('name')!r} is not used by any route"))


def _check_keys(loaded: dict[Path, tuple[Any, Marks]], report: Report, cfg: Config, config_source: str) -> None:
    """PagerDuty routing key names the rules use but the config does not define."""
    from alertd.integrations.pagerduty import PagerDutySettings

    pd = PagerDutySettings.from_config(cfg)
    if not pd.enabled:
        return
    for f, routing, marks in _section(loaded, "routing"):
        if not isinstance(routing, dict):
            continue
        refs = [(("routing", "receivers", i, "pagerduty", "routing_key"), (r.get("pagerduty") or {}).get("routing_key"))
                for i, r in enumerate(routing.get("receivers") or []) if isinstance(r, dict)]
        refs += [(("routing", "routes", i, "escalate", "routing_key"), (r.get("escalate") or {}).get("routing_key"))
                 for i, r in enumerate(routing.get("routes") or []) if isinstance(r, dict)]
        for path, ref in refs:
            name = str(ref or "").strip()[2:-1] if str(ref or "").startswith("${") else ""
            if name and name not in pd.routing_keys:
                report.error(_problem(f, marks, path, f"PagerDuty routing key {name!r} is not defined in "
                                                      f"notify.pagerduty.routing_keys of {config_source}"))


def runbook_dir(files: Iterable[Path], given: str | Path | None = None) -> Path | None:
    if given is not None:
        return Path(given)
    for f in files:
        for base in (f.parent, f.parent.parent):
            if (base / "runbooks").is_dir():
                return base / "runbooks"
    return Path("runbooks") if Path("runbooks").is_dir() else None


def _check_runbooks(loaded: dict[Path, tuple[Any, Marks]], report: Report, given: str | Path | None) -> None:
    refs: list[tuple[Path, Marks, Path_, str]] = []
    for section in ("xids", "signals"):
        for f, items, marks in _section(loaded, section):
            for i, item in enumerate(items if isinstance(items, list) else []):
                if isinstance(item, dict) and isinstance(item.get("runbook"), str) and item["runbook"]:
                    refs.append((f, marks, (section, i, "runbook"), item["runbook"]))
    for f, ev, marks in _section(loaded, "evidence"):
        for stage in ("expressions", "alertnames", "labels"):
            items = ev.get(stage) if isinstance(ev, dict) else None
            for i, item in enumerate(items if isinstance(items, list) else []):
                if isinstance(item, dict) and isinstance(item.get("runbook"), str) and item["runbook"]:
                    refs.append((f, marks, ("evidence", stage, i, "runbook"), item["runbook"]))
    if not refs:
        return
    base = runbook_dir(loaded, given)
    if base is None or not base.is_dir():
        f, marks, path, _ = refs[0]
        report.warn(_problem(f, marks, path, "no runbooks/ directory found next to the rules (use --runbooks DIR); "
                                             "runbook references not checked"))
        return
    for f, marks, path, name in refs:
        if not (base / f"{name}.md").is_file():
            report.warn(_problem(f, marks, path, f"runbook {name!r} does not exist ({base / (name + '.md')})"))


def _plain(doc: Any) -> Any:
    from alertd.authoring.ruletest import _plain as plain
    return plain(doc)


def main(paths: list[str], out: TextIO, *, runbooks: str | None = None, strict: bool = False,
         prometheus_rules: list[str] | None = None, show_all: bool = False, timing: Timing = Timing()) -> int:
    if prometheus_rules:
        return _prometheus_rules(paths, prometheus_rules, out, strict, show_all, timing)
    report = check(paths or None, runbooks=runbooks)
    for line in report.lines():
        print(line, file=out)
    print(report.summary(), file=out)
    return 0 if report.ok and not (strict and report.warnings) else 1


def _prometheus_rules(paths: list[str], files: list[str], out: Any, strict: bool, show_all: bool, timing: Timing) -> int:
    """Map a site's Prometheus alerting rules to signals with the rules (and normalization) in ``paths``."""
    from alertd.authoring import promrules
    from alertd.config.settings import load_config
    from alertd.app.recording_rules import with_site_recordings
    from alertd.rules.ruleset import load_rules

    def is_config(p: str) -> bool:
        try:
            return Path(p).is_file() and kind_of(load_yaml(Path(p))) == "config"
        except InvalidDocument:
            return False

    configs = [p for p in paths if is_config(p)]
    try:
        cfg = load_config(configs[0]) if configs else Config()
        rule_paths = [p for p in paths if p not in configs] or (cfg.rule_paths if configs else default_rule_paths())
        rules = with_site_recordings(load_rules(rule_paths), cfg)  # and the files' own, in promrules
    except InvalidDocument as exc:
        print(f"invalid configuration or rules:\n{exc}", file=out)
        return 1
    return promrules.main(files, rules, cfg.normalize, out, strict=strict, show_all=show_all, timing=timing)
