"""Recording rules: a recorded series' name -> the expression Prometheus records under it.

Sites write alerts on recording rules (``node:dcgm_up:min == 0``,
``floor(gpu:clock_reasons:max / 32) % 2 == 1``); such an expression names no
DCGM metric, so classification would learn nothing from it. alertd expands a
selector that names a recorded series into the recorded expression (recursively,
at most :data:`MAX_DEPTH` levels) before it reads the expression.

The names come from the site's rule files (config ``classify.prometheus_rules``,
``alertd check --prometheus-rules FILE...``) and, optionally, from the rules
API of the Prometheus that evaluated the alert (:mod:`alertd.app.recording_rules`,
at the service's edge). The engine only reads what is already known, through
:class:`RecordingIndex`.
"""
from __future__ import annotations

import glob
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from alertd.core.errors import InvalidDocument, Problem
from alertd.core.json_types import JSONObject, objects
from alertd.promql.expr import ExprFacts, Selector, facts_of_expr, facts_of_url
from alertd.core.yamlio import Marks, mark_for

MAX_DEPTH = 8  # recording rules over recording rules: real chains are 2-3 deep
MAX_RULES = 20_000  # recorded names kept per source
MAX_EXPR_CHARS = 2500  # as promql.MAX_EXPR_CHARS: longer ones are not read anyway


class RecordedRules(Mapping[str, str]):
    """An immutable map recorded name -> expression, hashed by identity so caches can key on it.

    A name recorded by several rules (one per job, say) maps to their
    expressions joined with ``or``: the alert may read any of them."""

    __slots__ = ("_exprs", "sources")

    def __init__(self, exprs: Mapping[str, str] | None = None, sources: tuple[str, ...] = ()):
        self._exprs = dict(exprs or {})
        self.sources = sources

    def __getitem__(self, name: str) -> str:
        return self._exprs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._exprs)

    def __len__(self) -> int:
        return len(self._exprs)

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def merged(self, other: "RecordedRules") -> "RecordedRules":
        """``self``'s names, then ``other``'s where ``self`` has none (the site's files win)."""
        if not other:
            return self
        if not self:
            return other
        return RecordedRules({**other._exprs, **self._exprs}, self.sources + other.sources)


EMPTY = RecordedRules()


def collect(pairs: Iterable[tuple[str, str]], sources: tuple[str, ...] = ()) -> RecordedRules:
    """(name, expr) pairs -> RecordedRules; the same name twice is joined with ``or``."""
    out: dict[str, list[str]] = {}
    for name, expr in pairs:
        if len(out) >= MAX_RULES and name not in out:
            break
        if name and expr and len(expr) <= MAX_EXPR_CHARS:
            exprs = out.setdefault(name, [])
            if expr not in exprs:
                exprs.append(expr)
    return RecordedRules({n: " or ".join(f"({e})" for e in es) if len(es) > 1 else es[0] for n, es in out.items()},
                         sources)


def rule_groups(doc: object) -> list[JSONObject]:
    """The rule groups of a Prometheus rule file or of a PrometheusRule resource."""
    if not isinstance(doc, dict):
        return []
    spec = doc.get("spec")
    return objects((spec if isinstance(spec, dict) else doc).get("groups"))


def recording_pairs(doc: object) -> list[tuple[str, str]]:
    """(record, expr) of every recording rule of one rule file document."""
    return [(str(r["record"]), str(r.get("expr", "")).strip())
            for g in rule_groups(doc) for r in objects(g.get("rules")) if "record" in r]


def expand_paths(patterns: Iterable[str], base: Path | None = None) -> tuple[list[Path], list[str]]:
    """Files named by paths or globs (relative ones under ``base``); and the patterns that matched nothing."""
    files: list[Path] = []
    unmatched: list[str] = []
    for pattern in patterns:
        full = pattern if base is None or Path(pattern).is_absolute() else str(base / pattern)
        found = sorted(Path(p) for p in glob.glob(full, recursive=True) if Path(p).is_file())
        if Path(full).is_dir():
            found = sorted(p for p in Path(full).iterdir() if p.suffix in (".yml", ".yaml") and p.is_file())
        if not found:
            unmatched.append(pattern)
        files.extend(f for f in found if f not in files)
    return files, unmatched


def load_files(patterns: Iterable[str], base: Path | None = None) -> tuple[RecordedRules, list[Problem]]:
    """The recording rules of the site's rule files; unreadable files and empty globs are problems."""
    files, unmatched = expand_paths(patterns, base)
    problems = [Problem(p, "classify.prometheus_rules: matches no file") for p in unmatched]
    pairs: list[tuple[str, str]] = []
    for path in files:
        try:
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            problems.append(Problem(str(path), f"cannot read Prometheus rules: {exc}"))
            continue
        for doc in docs:
            pairs.extend(recording_pairs(doc))
    return collect(pairs, tuple(str(f) for f in files)), problems


def config_problems(doc: object, path: Path, marks: Marks) -> list[Problem]:
    """For `alertd check CONFIG`: each path or glob of classify.prometheus_rules must name rule files that read."""
    classify = doc.get("classify") if isinstance(doc, dict) else None
    out: list[Problem] = []
    for i, raw in enumerate((classify if isinstance(classify, dict) else {}).get("prometheus_rules") or []):
        if isinstance(raw, str):
            out.extend(Problem(str(path), f"classify.prometheus_rules[{i}]: {p.source}: {p.message.split(': ', 1)[-1]}",
                               *mark_for(marks, ("classify", "prometheus_rules", i)))
                       for p in load_files([raw], path.parent)[1])
    return out


def load_index(patterns: Iterable[str], base: Path | None = None) -> "RecordingIndex":
    """A RecordingIndex of the rule files' recording rules; InvalidDocument naming every bad file or glob."""
    files, problems = load_files(patterns, base)
    if problems:
        raise InvalidDocument(problems)
    return RecordingIndex(files)


def base_url(generator_url: str) -> str:
    """The Prometheus a generatorURL points at: ``http://prom:9090/prefix/graph?...`` -> ``http://prom:9090/prefix``."""
    try:
        parts = urlsplit(generator_url)
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return ""
    path = parts.path
    for tail in ("/graph", "/query"):
        if path.endswith(tail):
            path = path[: -len(tail)]
    return f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}"


class RecordingIndex:
    """What the engine reads: the site's files, plus what each Prometheus's rules API told (filled at the edge).

    ``for_url`` is cheap: the merged map per Prometheus is rebuilt only when that
    Prometheus's rules change."""

    def __init__(self, files: RecordedRules = EMPTY):
        self.files = files
        self._fetched: dict[str, RecordedRules] = {}
        self._merged: dict[str, RecordedRules] = {}

    def for_url(self, generator_url: str) -> RecordedRules:
        if not self._fetched:
            return self.files
        base = base_url(generator_url)
        merged = self._merged.get(base)
        if merged is None:
            merged = self.files.merged(self._fetched.get(base, EMPTY))
            self._merged[base] = merged
        return merged

    def knows(self, base: str) -> bool:
        return base in self._fetched

    def set_fetched(self, base: str, rules: RecordedRules) -> bool:
        """Store a Prometheus's recording rules; True when they differ from what was known."""
        old = self._fetched.get(base)
        self._fetched[base] = rules
        self._merged.pop(base, None)
        return old is None or dict(old) != dict(rules)

    def adopt(self, previous: "RecordingIndex") -> None:
        """Keep what the rules API told ``previous`` (a rule reload must not forget it)."""
        self._fetched.update(previous._fetched)

    def forget(self, keep: Iterable[str]) -> None:
        """Drop every Prometheus but ``keep`` (the fetcher's bounded cache decides)."""
        kept = set(keep)
        for base in [b for b in self._fetched if b not in kept]:
            del self._fetched[base]
            self._merged.pop(base, None)


def expand_facts(facts: ExprFacts, recorded: Mapping[str, str], depth: int = 0) -> ExprFacts:
    """``facts`` with each selector of a recorded series preceded by the selectors of its expression.

    The outer selector's matchers, enclosing functions and comparison carry over
    to the inner ones (``node:dcgm_up:min == 0`` over ``min by (node) (up{job="dcgm"})``
    reads as ``min(up{job="dcgm"}) == 0``). The recorded name itself stays, after
    them, so name-based evidence still applies."""
    if not recorded or depth >= MAX_DEPTH or not any(s.metric in recorded for s in facts.selectors):
        return facts
    out: list[Selector] = []
    for sel in facts.selectors:
        expr = recorded.get(sel.metric)
        if expr is not None:
            inner = expand_facts(facts_of_expr(expr), recorded, depth + 1)
            out.extend(Selector(metric=s.metric, labels=s.labels + sel.labels, inside=s.inside + sel.inside,
                                compare=s.compare or sel.compare) for s in inner.selectors)
        out.append(sel)
    return ExprFacts(expr=facts.expr, selectors=tuple(out), error=facts.error, conditions=facts.conditions)


@lru_cache(maxsize=4096)
def facts_of_url_expanded(url: str, recorded: RecordedRules) -> ExprFacts | None:
    """:func:`facts_of_url` with recording rules expanded; cached per URL and rule set (Alertmanager repeats
    one generatorURL per rule, and a RecordedRules is replaced, never changed)."""
    facts = facts_of_url(url)
    return expand_facts(facts, recorded) if facts is not None and recorded else facts


def unknown_recorded(facts: ExprFacts | None, recorded: Mapping[str, str]) -> list[str]:
    """Selectors named like recorded series (``level:metric:operations``) that ``recorded`` does not know."""
    if facts is None:
        return []
    return sorted({s.metric for s in facts.selectors if ":" in s.metric and s.metric not in recorded})


__all__ = ["EMPTY", "MAX_DEPTH", "RecordedRules", "RecordingIndex", "base_url", "collect", "config_problems", "expand_facts",
           "expand_paths", "facts_of_url_expanded", "load_files", "load_index", "recording_pairs", "rule_groups", "unknown_recorded"]
