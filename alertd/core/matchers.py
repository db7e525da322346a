"""Alertmanager matcher syntax (``name="value"``, ``!=``, ``=~``, ``!~``).

Regex matchers are anchored like Alertmanager's and run on RE2 (alertd/core/regex.py),
the engine of Go's regexp that Alertmanager itself uses: a matcher means here what
it means there, and matching a label value costs time linear in its length. A label
that is absent matches as the empty string, so ``xid=""`` means "no xid" and
``xid!=""`` "has an xid".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from alertd.core.regex import Regex, RegexError

_MATCHER = re.compile(
    r"""^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>=~|!~|!=|=)\s*(?P<value>"(?:[^"\\]|\\.)*"|(?:[^"\s,{}=~!][^"\s,{}]*)?)\s*$"""
)


class MatcherError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Matcher:
    name: str
    op: str
    value: str
    regex: Regex | None = None

    def matches(self, labels: Mapping[str, object]) -> bool:
        raw = labels.get(self.name)
        actual = raw if type(raw) is str else "" if raw is None else str(raw)
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        assert self.regex is not None
        hit = self.regex.fullmatch(actual)
        return hit if self.op == "=~" else not hit

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}{self.op}"{escaped}"'

    def to_silence(self) -> dict[str, object]:
        """The Alertmanager API v2 form used when creating silences."""
        return {
            "name": self.name,
            "value": self.value,
            "isRegex": self.op in ("=~", "!~"),
            "isEqual": self.op in ("=", "=~"),
        }


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner = value[1:-1]
        return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), inner)
    return value


def parse_matcher(text: str) -> Matcher:
    m = _MATCHER.match(text)
    if not m:
        raise MatcherError(f'bad matcher {text!r}: expected name="value" with =, !=, =~ or !~')
    name, op, value = m.group("name"), m.group("op"), _unquote(m.group("value"))
    regex = None
    if op in ("=~", "!~"):
        try:
            regex = Regex(value)
        except RegexError as exc:
            raise MatcherError(f"bad regex in matcher {text!r}: {exc}") from None
    return Matcher(name, op, value, regex)


def parse_matchers(items: Iterable[str] | str | None) -> tuple[Matcher, ...]:
    """Accept a list of matcher strings or one ``{a="b", c=~"d"}`` string."""
    if items is None:
        return ()
    if isinstance(items, str):
        body = items.strip()
        if body.startswith("{") and body.endswith("}"):
            body = body[1:-1]
        items = [part for part in _split_top_level(body) if part.strip()]
    return tuple(parse_matcher(item) for item in items)


def _split_top_level(body: str) -> list[str]:
    parts, current, quoted, escaped = [], [], False, False
    for ch in body:
        if escaped:
            current.append(ch)
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            current.append(ch)
            continue
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def match_all(matchers: Iterable[Matcher], labels: Mapping[str, object]) -> bool:
    for m in matchers:  # a loop, not all() over a generator: called for every rule and alert
        if not m.matches(labels):
            return False
    return True


def one_of(name: str, *values: str, negate: bool = False) -> str:
    """The matcher text that accepts exactly ``values`` (or all but them): ``name="a"`` for one value,
    ``name=~"a|b"`` for several ("" among them: the label absent). The values are words, no regex."""
    op = ("!=" if negate else "=") if len(values) == 1 else ("!~" if negate else "=~")
    return f'{name}{op}"{"|".join(values)}"'


_LITERALS = re.compile(r"^[A-Za-z0-9_:.-]+(\|[A-Za-z0-9_:.-]+)*$")


def literal_values(matchers: Iterable[Matcher], name: str) -> frozenset[str] | None:
    """The only values of label ``name`` these matchers can accept (from ``name="x"`` or ``name=~"x|y"``),
    or None when any value might: lets a caller skip a rule with one set lookup."""
    for m in matchers:
        if m.name == name and m.op == "=":
            return frozenset((m.value,))
        if m.name == name and m.op == "=~" and _LITERALS.match(m.value):
            return frozenset(m.value.split("|"))
    return None
