"""Linear-time regular expressions for every pattern that meets received input.

Rule regexes (evidence, signals, routing matchers, Alertmanager-style ``=~``) run on
RE2 (the google-re2 package), the engine behind Go's regexp and so behind
Alertmanager's matchers: a match costs time linear in the text whatever the
pattern, where Python's backtracking ``re`` can take time cubic in an annotation's
length (one ``xid`` followed by thousands of spaces). Patterns RE2 cannot run
(backreferences, lookaround, possessive or atomic groups) are refused when the
rules load, with the reason, instead of being accepted and run differently.

Only RE2's public API is used. Its wrapper maps match positions back to characters in
Python on every call when given ``str``; given ``bytes`` it hands back RE2's own byte
offsets. So each pattern is compiled a second time from its UTF-8 bytes (same program,
same UTF-8 semantics), texts are encoded once and matched as bytes, and only the groups
a caller asks for are decoded: a ``fullmatch`` costs about 7 µs instead of 23, and
patterns that are only alternatives of plain names (``a|b|c``) are answered by a set
lookup.
"""
from __future__ import annotations

from typing import Any, Iterator

import re2

_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_:-")

# What RE2 refuses that Python's re accepts, said in words a rule author can act on.
_UNSUPPORTED = (
    ("(?=", "lookahead (?=...)"), ("(?!", "negative lookahead (?!...)"), ("(?<=", "lookbehind (?<=...)"),
    ("(?<!", "negative lookbehind (?<!...)"), ("(?P=", "a backreference (?P=name)"), ("(?>", "an atomic group (?>...)"),
    ("*+", "a possessive quantifier *+"), ("++", "a possessive quantifier ++"), ("?+", "a possessive quantifier ?+"),
    ("\\Z", "\\Z (RE2 writes the end of text as \\z or $)"),
)


class RegexError(ValueError):
    """A pattern that cannot be compiled for linear-time matching; the message says why."""


def _options() -> Any:
    opts = re2.Options()
    opts.log_errors = False  # the error goes into RegexError, not to stderr
    return opts


def _why(pattern: str, error: str) -> str:
    for token, name in _UNSUPPORTED:
        if token in pattern:
            return (f"{name} is not supported: patterns run on RE2 (linear time, the engine of Alertmanager's "
                    f"matchers), which has no backtracking ({error})")
    if any(f"\\{d}" in pattern for d in "123456789"):
        return (f"backreferences (\\1 ...) are not supported: patterns run on RE2 (linear time, the engine of "
                f"Alertmanager's matchers) ({error})")
    return error


class Regex:
    """A compiled RE2 pattern with the subset of ``re.Pattern`` alertd uses."""

    __slots__ = ("pattern", "_re", "_bytes", "_literals")

    def __init__(self, pattern: str):
        self.pattern = pattern
        try:
            self._re = re2.compile(pattern, _options())
        except re2.error as exc:
            raw = exc.args[0] if exc.args else exc
            raise RegexError(_why(pattern, raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw))) from None
        self._bytes = re2.compile(pattern.encode(), _options())  # the same program, matched on UTF-8 bytes
        parts = pattern.split("|")
        plain = all(p and _PLAIN.issuperset(p) for p in parts)
        self._literals: frozenset[str] | None = frozenset(parts) if plain else None

    @property
    def groupindex(self) -> dict[str, int]:
        return dict(self._re.groupindex)

    def fullmatch(self, text: str) -> bool:
        """Whether the whole text matches (anchored at both ends, as Alertmanager anchors matchers)."""
        if self._literals is not None:
            return text in self._literals
        return self._bytes.fullmatch(text.encode()) is not None

    def search(self, text: str) -> Any:
        """The first match (an ``re``-like match object) or None."""
        return next(self.finditer(text), None)

    def finditer(self, text: str) -> Iterator[Any]:
        """Matches left to right, as ``re.finditer``; each answers ``group(name or number)``. The text is
        encoded once and matched in bytes; only what a caller asks for is decoded."""
        names = self._re.groupindex
        data = text.encode()
        pos, end = 0, len(data)
        while pos <= end:
            match = self._bytes.search(data, pos)
            if match is None:
                return
            yield Found(match, names)
            first, last = match.span()
            pos = last if last > first else _next_char(data, last)

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Regex) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)


class Found:
    """One match: its groups decoded from the UTF-8 text on demand."""

    __slots__ = ("_match", "_names")

    def __init__(self, match: Any, names: Any):
        self._match, self._names = match, names

    def group(self, which: int | str = 0) -> str | None:
        value = self._match[self._names[which] if isinstance(which, str) else which]
        return None if value is None else bytes(value).decode()


def _next_char(data: bytes, pos: int) -> int:
    """The offset after the character at ``pos`` (an empty match moves on by one character, as re does)."""
    pos += 1
    while pos < len(data) and data[pos] & 0xC0 == 0x80:
        pos += 1
    return pos


def compile(pattern: str) -> Regex:  # noqa: A001 - the name re users expect
    """Compile ``pattern`` for linear-time matching; RegexError says why it cannot be."""
    return Regex(pattern)


__all__ = ["Found", "Regex", "RegexError", "compile"]
