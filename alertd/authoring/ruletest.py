"""``alertd test``: rule unit tests in YAML, like ``promtool test rules``.

A test file names rule files, then lists tests: alerts arriving at given times
and what the incidents (and, with a routing section, the notifications) must
look like at given times. Each test runs the pure engine on a virtual clock
from an empty state. The format is declared in alertd/schemas/ruletest.py (its
schema, ruletest.schema.json, is generated from it) and described in
docs/rules.md; the runner reads the decoded declaration.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO
from urllib.parse import quote_plus

from alertd.core.errors import InvalidDocument, Problem
from alertd.core.model import FIRING, Alert, Incident
from alertd.promql.recording import load_index
from alertd.notify.router import ConsoleRouter, Router
from alertd.receive.payload import fingerprint_of
from alertd.remediation.decide import escalation_of, policy_for
from alertd.rules.ruleset import RuleSet
from alertd.schemas import problems as schema_problems
from alertd.schemas.ruletest import (RULE_TEST, Defaults, Expectation, IncidentSpec, InputAlert, RuleTestFile, TestCase,
                                     unreadable)
from alertd.core.yamlio import Marks, Path_, format_path, load_yaml, mark_for

from alertd.authoring.virtual import VirtualRun, build_router, load_rule_set
from alertd.core.words import counted

ROUTING_FIELDS = ("notified", "muted", "receivers")


def _plain(value: Any) -> Any:
    """YAML turns unquoted timestamps into datetimes; the schema wants their text."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        ts = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return ts.isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat() + "T00:00:00Z"
    return value


# ----- results -----


@dataclass(slots=True)
class Failure:
    where: str  # file:line:column of the test or expectation
    test: str
    message: str

    def __str__(self) -> str:
        body = self.message.replace("\n", "\n    ")
        return f"{self.where}: test {self.test!r}: {body}"


@dataclass(slots=True)
class FileResult:
    path: str
    tests: int = 0
    passed: int = 0
    failures: list[Failure] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # the file itself or its rules are invalid

    @property
    def ok(self) -> bool:
        return not self.failures and not self.problems


# ----- comparing incidents -----


def chosen_receivers(run: VirtualRun, inc: Incident) -> list[str]:
    """Receivers the routes pick for ``inc`` now, muted ones left out (none without a routing section: a
    test that asks for receivers is refused before it runs)."""
    from alertd.notify.decision import route_incident

    if run.rules.routing is None:
        return []
    router = run.router
    cordoned = router.cordoned_at(inc) if isinstance(router, Router) else None
    return route_incident(run.rules.routing, inc, run.now, cordoned_at=cordoned).active_receivers


def _actual(run: VirtualRun, inc: Incident, name: str) -> Any:
    p = inc.primary
    if name in ("signals", "nodes"):
        return sorted(getattr(inc, name))
    if name == "xids":
        return sorted(inc.xids)
    if name == "members":
        return len(inc.members)
    if name == "firing":
        return len(inc.firing_members())
    if name == "folded":
        return sum(1 for m in inc.members.values() if m.folded)
    if name in ("action", "runbook", "detail"):
        return getattr(p, name) if p else ""
    if name == "title_contains":
        return inc.title
    if name in ("verdict", "verdict_action", "verdict_contains"):
        v = inc.verdict
        return "" if v is None else {"verdict": v.rule, "verdict_action": v.action, "verdict_contains": v.line}[name]
    if name == "notified":
        return sorted(run.delivered_targets(inc.id))
    if name == "muted":
        return not run.delivered_targets(inc.id)
    if name == "receivers":
        return sorted(chosen_receivers(run, inc))
    if name == "remediation":
        chosen = policy_for(inc, run.rules.remediation, escalation_of(inc))
        return chosen.action if chosen is not None else "none"
    return getattr(inc, name)


def _same(name: str, expected: Any, actual: Any) -> bool:
    if name in ("title_contains", "verdict_contains"):
        return str(expected) in str(actual)
    if name == "children":
        return bool(expected == len(actual) if isinstance(expected, int) else sorted(expected) == sorted(actual))
    if isinstance(expected, list):
        return sorted(map(str, expected)) == sorted(map(str, actual))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    return bool(expected == actual)


def _mismatches(run: VirtualRun, inc: Incident, spec: IncidentSpec) -> list[tuple[str, object, Any]]:
    out: list[tuple[str, object, Any]] = []
    for name, expected in spec.given().items():
        actual = _actual(run, inc, name)
        if not _same(name, expected, actual):
            out.append((name, expected, actual))
    return out


def _match(candidates: list[list[int]], n_actual: int) -> list[int | None]:
    """Maximum bipartite matching (expected -> actual index), Kuhn's algorithm; lists are tiny."""
    owner: list[int | None] = [None] * n_actual

    def take(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            holder = owner[j]
            if holder is None or take(holder, seen):
                owner[j] = i
                return True
        return False

    for i in range(len(candidates)):
        take(i, set())
    out: list[int | None] = [None] * len(candidates)
    for j, holder in enumerate(owner):
        if holder is not None:
            out[holder] = j
    return out


def _describe(inc: Incident) -> str:
    return f"{inc.id} [{inc.status} {inc.severity}] key={inc.key} title={inc.title!r}"


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return repr(str(value)) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def compare(run: VirtualRun, exp: Expectation) -> list[str]:
    """Differences between the run's incidents and one expectation, as readable lines."""
    actual = list(run.incidents.values())
    lines: list[str] = []
    if exp.count is not None and exp.count != len(actual):
        lines.append(f"count: expected {counted(exp.count, 'incident')}, got {len(actual)}")
    if exp.open is not None and exp.open != len(run.open_incidents()):
        lines.append(f"open: expected {exp.open} open incidents, got {len(run.open_incidents())}")
    specs = exp.incidents
    if specs is not None:
        candidates = [[j for j, inc in enumerate(actual) if not _mismatches(run, inc, spec)] for spec in specs]
        matched = _match(candidates, len(actual))
        used = {j for j in matched if j is not None}
        explained: set[str] = set()
        for i, (spec, j) in enumerate(zip(specs, matched)):
            if j is not None:
                continue
            free = [inc for k, inc in enumerate(actual) if k not in used] or actual
            if not free:
                lines.append(f"incidents[{i}]: expected an incident {_spec_text(spec)}, but there are none")
                continue
            best = min(free, key=lambda inc: len(_mismatches(run, inc, spec)))
            explained.add(best.id)
            lines.append(f"incidents[{i}]: no incident matches; closest is {_describe(best)}:")
            for name, want, got in _mismatches(run, best, spec):
                lines.append(f"  - {name}: {_show(want)}")
                lines.append(f"  + {name}: {_show(got)}")
        if not exp.partial:
            for k, inc in enumerate(actual):
                if k not in used and inc.id not in explained:
                    lines.append(f"unexpected incident {_describe(inc)} (list it, or set partial: true)")
    return lines


def _spec_text(spec: IncidentSpec) -> str:
    return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in spec.given().items()) + "}"


# ----- running -----


def expand_input(entries: Iterable[InputAlert | Mapping[str, object]], defaults: Defaults | Mapping[str, object],
                 t0: datetime) -> list[tuple[datetime, Alert]]:
    """Input entries (decoded, or as a test file writes them) -> (arrival time, Alert), time-ordered, with
    Alertmanager's startsAt/endsAt."""
    given = defaults if isinstance(defaults, Defaults) else Defaults.from_doc(defaults)
    raw: list[tuple[datetime, int, InputAlert]] = []
    for n, entry in enumerate(entries):
        item = entry if isinstance(entry, InputAlert) else InputAlert.from_doc(entry)
        times = [item.at.after(t0)]
        if item.every is not None and item.until is not None:
            until = item.until.after(t0)
            while times[-1] + item.every <= until:
                times.append(times[-1] + item.every)
        raw.extend((t, n, item) for t in times)
    raw.sort(key=lambda r: (r[0], r[1]))
    firing_since: dict[str, datetime] = {}
    out = []
    for at, _, item in raw:
        labels, annotations = {**given.labels, **item.labels}, {**given.annotations, **item.annotations}
        fp = (item.fingerprint or fingerprint_of(labels)).lower()
        status = item.status
        starts = item.starts_at.after(t0) if item.starts_at is not None else firing_since.get(fp, at)
        if status == FIRING:
            firing_since.setdefault(fp, starts)
            ends = None
        else:
            firing_since.pop(fp, None)
            ends = item.ends_at.after(t0) if item.ends_at is not None else at
        url = f"http://prometheus:9090/graph?g0.expr={quote_plus(item.expr)}&g0.tab=1" if item.expr else ""
        out.append((at, Alert(fingerprint=fp, status=status, labels=labels, annotations=annotations,
                              starts_at=starts, ends_at=ends, received_at=at, generator_url=url)))
    return out


def run_test(test: TestCase, rules: RuleSet, t0: datetime, defaults: Defaults, where: Callable[[Path_], str],
             path: Path_, router_factory: Callable[[], ConsoleRouter | Router]) -> list[Failure]:
    name = test.name
    t0 = test.start.moment if test.start is not None else t0
    needs_routing = any(f in spec.given() for e in test.expect for spec in e.incidents or () for f in ROUTING_FIELDS)
    if needs_routing and rules.routing is None:
        return [Failure(where(path + ("expect",)), name,
                        "routing expectations (notified, muted, receivers) need a routing section in the rule files; "
                        "the loaded rules have none, so every change would only go to the console")]
    run = VirtualRun(rules, t0, router=router_factory())
    arrivals = expand_input(test.input, defaults, t0)
    actions = sorted(((a.at.after(t0), i, a) for i, a in enumerate(test.actions)), key=lambda x: (x[0], x[1]))
    evals = sorted(t.after(t0) for t in test.eval_at)
    expects = sorted(((e.at.after(t0), i, e) for i, e in enumerate(test.expect)), key=lambda x: (x[0], x[1]))
    moments = sorted({t for t, _ in arrivals} | set(evals) | {t for t, _, _ in expects} | {t for t, _, _ in actions})
    failures = []
    a = 0
    for t in moments:
        batch = []
        while a < len(arrivals) and arrivals[a][0] == t:
            batch.append(arrivals[a][1])
            a += 1
        if batch:
            run.receive(batch, t)
        for when, i, act in actions:
            if when != t:
                continue
            if act.incident not in run.incidents:
                failures.append(Failure(where(path + ("actions", i)), name,
                                        f"at {act.at}: cannot {act.action} {act.incident}: no such incident yet "
                                        f"(there are: {', '.join(run.incidents) or 'none'})"))
                continue
            run.act(act.action, act.incident, act.by, t)
        run.advance(t)
        if t in evals:
            run.evaluate(t)
        for when, i, exp in expects:
            if when != t:
                continue
            diff = compare(run, exp)
            if diff:
                failures.append(Failure(where(path + ("expect", i)), name, f"at {exp.at}:\n" + "\n".join(diff)))
    return failures


def load_test_file(path: Path) -> tuple[RuleTestFile | None, Marks, list[Problem]]:
    """The decoded test file, or None and what is wrong with it: the schema's errors, else the times and
    durations the schema cannot judge (e.g. 1m1m, 2026-02-30T00:00:00Z)."""
    try:
        doc, marks = load_yaml(path, with_marks=True)
    except InvalidDocument as exc:
        return None, {}, exc.problems
    doc = _plain(doc)
    found = schema_problems("ruletest", doc, str(path), marks)
    if not found:
        found = [Problem(str(path), f"{format_path(at)}: {why}", *mark_for(marks, at))
                 for at, why in unreadable(RuleTestFile, doc)]
    return (RULE_TEST.decode(doc) if not found else None), marks, found


def run_file(path: Path | str, *, select: re.Pattern[str] | None = None) -> FileResult:
    path = Path(path)
    result = FileResult(str(path))
    doc, marks, found = load_test_file(path)
    if doc is None:
        result.problems = found
        return result
    rule_paths = [path.parent / p for p in doc.rule_files]
    missing = [p for p in rule_paths if not p.exists()]
    if missing:
        result.problems = [Problem(str(path), f"rule_files: {p} does not exist", *mark_for(marks, ("rule_files",)))
                           for p in missing]
        return result
    try:
        rules = load_rule_set(rule_paths)
        if doc.prometheus_rules:  # read as the service reads classify.prometheus_rules
            rules = replace(rules, recorded=load_index(doc.prometheus_rules, path.parent))
    except InvalidDocument as exc:
        result.problems = exc.problems
        return result
    def where(p: Path_) -> str:
        line, col = mark_for(marks, p)
        return f"{path}:{line}:{col}"

    for i, test in enumerate(doc.tests):
        if select is not None and not select.search(test.name):
            continue
        result.tests += 1
        fails = run_test(test, rules, doc.start.moment, doc.defaults, where, ("tests", i), lambda: build_router(rules))
        result.failures.extend(fails)
        result.passed += not fails
    return result


def find_test_files(args: Iterable[str]) -> list[Path]:
    out: list[Path] = []
    for raw in args:
        p = Path(raw)
        out.extend(sorted(p.glob("**/*.test.y*ml")) if p.is_dir() else [p])
    return out


def default_test_files() -> list[Path]:
    from alertd.rules.shipped import SHIPPED_RULES

    return sorted((SHIPPED_RULES / "tests").glob("*.test.yml"))  # the shipped rules' own tests


def main(files: list[str], run: str | None, out: TextIO) -> int:
    paths = find_test_files(files) if files else default_test_files()
    if not paths:
        print("no rule test files found", file=out)
        return 1
    try:
        select = re.compile(run) if run else None
    except re.error as exc:
        print(f"bad --run regex {run!r}: {exc}", file=out)
        return 2
    ok = True
    for p in paths:
        print(f"Unit Testing: {p}", file=out)
        if not p.is_file():
            print(f"  FAILED:\n    {p}: no such file", file=out)
            ok = False
            continue
        res = run_file(p, select=select)
        if res.ok:
            print(f"  SUCCESS ({res.passed} tests)", file=out)
            continue
        ok = False
        print(f"  FAILED: {len(res.failures)} failed of {res.tests} tests" if not res.problems else "  FAILED:", file=out)
        for item in [*res.problems, *res.failures]:
            print("    " + str(item).replace("\n", "\n    "), file=out)
    return 0 if ok else 1
