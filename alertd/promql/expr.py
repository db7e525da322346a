"""An alert's own PromQL expression -> the series it selects, and how.

Prometheus puts the rule's expression in every alert's ``generatorURL``
(``.../graph?g0.expr=<url-encoded PromQL>&g0.tab=1``). Parsing it with a real
PromQL parser (promql-parser) tells which metrics the alert is about, with
which label matchers, inside which functions and compared with what: evidence
for classification that survives any renaming of the alert.

Alertmanager repeats the same generatorURL for every alert of a rule, so the
parsed facts are cached by URL.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qs, urlsplit

import promql_parser as pp

COMPARISONS = frozenset({"==", "!=", ">", "<", ">=", "<="})
# The right-hand side of `and` is a condition the alert also needs (a hot GPU `and` one drawing little power):
# read after the left-hand side. The right-hand side of `unless` says when the alert does not fire: never
# what it is about.
CONDITION, EXCLUSION = "and", "unless"
CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class Selector:
    """One vector selector of the expression, with its context."""

    metric: str  # metric name; for a {__name__=~"A|B"} selector each alternative is a Selector
    labels: tuple[tuple[str, str, str], ...]  # (label, op, value) as written: op is =, !=, =~ or !~
    inside: tuple[str, ...]  # enclosing functions and aggregations, innermost first
    compare: str  # the nearest enclosing comparison, "<op> <number>" or "<op> vector"; "" if none

    def label_values(self) -> dict[str, str]:
        """Label -> value text of its positive matchers (a regex matcher gives its regex text)."""
        return {name: value for name, op, value in self.labels if op in ("=", "=~")}

    def describe(self) -> str:
        inner = ",".join(f'{n}{op}"{v}"' for n, op, v in self.labels)
        text = self.metric + (f"{{{inner}}}" if inner else "")
        for fn in self.inside:
            text = f"{fn}({text})"
        return f"{text} {self.compare}" if self.compare else text


@dataclass(frozen=True, slots=True)
class ExprFacts:
    expr: str
    selectors: tuple[Selector, ...] = ()  # what the alert's value comes from
    error: str = ""  # why the expression could not be parsed
    conditions: tuple[Selector, ...] = ()  # right-hand sides of `and`: what must hold too


def expr_of_url(url: str) -> str:
    """The first query expression (g0.expr) of a Prometheus generatorURL, URL-decoded; "" if none."""
    if not url or "expr=" not in url:
        return ""
    try:
        query = parse_qs(urlsplit(url).query, keep_blank_values=False)
    except ValueError:
        return ""
    for key in ("g0.expr", "expr"):
        values = query.get(key)
        if values:
            return values[0].strip()
    return ""


@lru_cache(maxsize=CACHE_SIZE)
def facts_of_url(url: str) -> ExprFacts | None:
    """Parsed facts of the generatorURL's expression; None when the URL carries none. Cached."""
    expr = expr_of_url(url)
    return facts_of_expr(expr) if expr else None


# Real alerting rules are a few hundred characters; the parser's time grows steeply with nesting, so
# absurd expressions (a hostile or broken generatorURL) are refused before parsing.
MAX_EXPR_CHARS = 2500
MAX_NESTING = 64
_SIGN_RUN = re.compile(r"(?:[-+]\s*){17,}")


def too_complex(expr: str) -> str:
    """Why the expression is not parsed at all ("" when it is fine)."""
    if len(expr) > MAX_EXPR_CHARS:
        return f"expression longer than {MAX_EXPR_CHARS} characters: not read"
    depth = deepest = 0
    for ch in expr:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    if deepest > MAX_NESTING:
        return f"expression nested deeper than {MAX_NESTING} brackets: not read"
    if _SIGN_RUN.search(expr):
        return "expression with a run of more than 16 signs: not read"
    return ""


# What compiling an expression's regex matchers may cost. The parser compiles each one with Rust's regex
# crate, whose Unicode classes are large: `\w{100}` alone takes some 60 ms, 140 of them in a 2.4 KB URL
# 18 s, under the length and nesting limits above. Units are about 5 µs on the reference machine: an
# atom weighs 1, 2 for `.`, `\s`, `\S` and negated sets, 8 for `\d`, 100 for `\w`, `\W`, `\p{..}`, times
# the product of the counted repetitions in its matcher; each matcher costs 10 more. A site's rules use a few
# dozen units per matcher (`job=~".*dcgm.*"` is 20); refused expressions are not used for classification.
MAX_REGEX_MATCHERS = 64
MAX_REGEX_COST = 4000
_REGEX_LITERAL = re.compile(r"""([=!]~)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)""")
_HEAVY_ATOM = re.compile(r"\\[wWpP]|\\d|\\D")
_REPEAT = re.compile(r"\{(\d{1,6})(?:,(\d{0,6}))?\}")


def regex_cost(pattern: str) -> int:
    """Estimated units to compile one regex matcher (see MAX_REGEX_COST)."""
    weight = len(pattern)
    for atom in _HEAVY_ATOM.findall(pattern):
        weight += 99 if atom[1] in "wWpP" else 7
    weight += pattern.count(".") + pattern.count("\\s") + pattern.count("\\S") + pattern.count("[^")
    times = 1
    for low, high in _REPEAT.findall(pattern):
        times = min(times * max(1, int(high or low or 1)), 1_000_000)
    return 10 + weight * times


def over_regex_budget(expr: str) -> str:
    """Why the expression's regex matchers cost too much to parse ("" when they do not). Linear in the
    text: read before the parser compiles anything."""
    literals = _REGEX_LITERAL.findall(expr)
    if len(literals) > MAX_REGEX_MATCHERS:
        return f"expression with {len(literals)} regex matchers (budget {MAX_REGEX_MATCHERS}): not read"
    cost = sum(regex_cost(text[1:-1]) for _, text in literals)
    if cost > MAX_REGEX_COST:
        return (f"expression whose regex matchers would cost about {cost} units to compile (budget "
                f"{MAX_REGEX_COST}, see receive/promql.py): not read")
    return ""


@lru_cache(maxsize=CACHE_SIZE)
def facts_of_expr(expr: str) -> ExprFacts:
    refused = too_complex(expr) or over_regex_budget(expr)
    if refused:
        return ExprFacts(expr=expr, error=refused)
    try:
        tree = pp.parse(expr)
    except (ValueError, TypeError) as exc:  # promql-parser raises ValueError with the parser's message
        return ExprFacts(expr=expr, error=str(exc).strip() or "invalid PromQL")
    out: list[Selector] = []
    conditions: list[Selector] = []
    try:
        _walk(tree, (), "", out, conditions)
    except RecursionError:  # thousands of nested parentheses or operators: read nothing rather than fail the alert
        return ExprFacts(expr=expr, error="expression nested too deeply to read")
    return ExprFacts(expr=expr, selectors=tuple(out), conditions=tuple(conditions))


def _number(node: object) -> str | None:
    while isinstance(node, (pp.ParenExpr, pp.UnaryExpr)):
        negate = isinstance(node, pp.UnaryExpr)
        node = node.expr
        if negate and isinstance(node, pp.NumberLiteral):
            return _fmt(-node.val)
    if isinstance(node, pp.NumberLiteral):
        return _fmt(node.val)
    return None


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _walk(node: object, inside: tuple[str, ...], compare: str, out: list[Selector], conds: list[Selector]) -> None:
    if isinstance(node, pp.VectorSelector):
        out.extend(_selectors(node, inside, compare))
    elif isinstance(node, pp.MatrixSelector):
        _walk(node.vector_selector, inside, compare, out, conds)
    elif isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
        _walk(node.expr, inside, compare, out, conds)
    elif isinstance(node, pp.Call):
        for arg in node.args:
            _walk(arg, (node.func.name,) + inside, compare, out, conds)
    elif isinstance(node, pp.AggregateExpr):
        _walk(node.expr, (str(node.op),) + inside, compare, out, conds)
    elif isinstance(node, pp.BinaryExpr):
        op = str(node.op).strip()
        if op in COMPARISONS:
            lhs_num, rhs_num = _number(node.lhs), _number(node.rhs)
            flipped = {">": "<", "<": ">", ">=": "<=", "<=": ">="}.get(op, op)
            _walk(node.lhs, inside, f"{op} {rhs_num if rhs_num is not None else 'vector'}", out, conds)
            _walk(node.rhs, inside, f"{flipped} {lhs_num if lhs_num is not None else 'vector'}", out, conds)
        else:
            _walk(node.lhs, inside, compare, out, conds)
            if op == CONDITION:
                _walk(node.rhs, inside, compare, conds, conds)
            elif op != EXCLUSION:
                _walk(node.rhs, inside, compare, out, conds)


def _selectors(node: pp.VectorSelector, inside: tuple[str, ...], compare: str) -> list[Selector]:
    labels: list[tuple[str, str, str]] = []
    names: list[str] = [node.name] if node.name else []
    for m in node.matchers.matchers:
        op = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}.get(str(m.op), str(m.op))
        if m.name == "__name__":
            if op == "=":
                names.append(m.value)
            elif op == "=~":
                names.extend(part for part in m.value.split("|") if part)
            continue
        labels.append((m.name, op, m.value))
    return [Selector(metric=n, labels=tuple(labels), inside=inside, compare=compare) for n in names or [""]]


def drops_labels(expr: str, labels: tuple[str, ...]) -> bool:
    """Whether every result series of ``expr`` loses all of ``labels`` to an aggregation
    (``sum by (job) (...)``, ``count(...)``): its alerts then name no node. False when unsure."""
    if too_complex(expr) or over_regex_budget(expr):
        return False
    try:
        tree = pp.parse(expr)
    except (ValueError, TypeError):
        return False
    try:
        return _drops(tree, frozenset(labels))
    except RecursionError:
        return False


def _drops(node: object, labels: frozenset[str]) -> bool:
    if isinstance(node, pp.AggregateExpr):
        mod = node.modifier
        if mod is None:
            return str(node.op) not in ("topk", "bottomk", "limitk", "limit_ratio")  # those keep their labels
        kept = set(mod.labels)
        return not (kept & labels) if str(mod.type).endswith("By") else labels <= kept
    if isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
        return _drops(node.expr, labels)
    if isinstance(node, pp.BinaryExpr):
        op = str(node.op).strip()
        if op == "or":
            return _drops(node.lhs, labels) and _drops(node.rhs, labels)
        if _number(node.lhs) is not None:
            return _drops(node.rhs, labels)
        return _drops(node.lhs, labels)
    if isinstance(node, pp.Call) and node.func.name in ("absent", "absent_over_time", "vector", "scalar", "time"):
        return node.func.name in ("vector", "scalar", "time")  # absent keeps the selector's equality labels
    if isinstance(node, pp.Call):
        return any(_drops(a, labels) for a in node.args if not isinstance(a, (pp.StringLiteral, pp.NumberLiteral)))
    return False


def cache_info() -> tuple[int, int]:
    """(hits, misses) of the URL cache, for benchmarks."""
    info = facts_of_url.cache_info()
    return info.hits, info.misses


__all__ = ["ExprFacts", "Selector", "cache_info", "drops_labels", "expr_of_url", "facts_of_expr", "facts_of_url",
           "over_regex_budget", "regex_cost"]
