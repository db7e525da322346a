"""How long an alerting expression stays true after one event: the window of an event-style expression.

An expression that turns true because something happened (a counter rose, a gauge changed) stays true only
while its range still holds the samples that show it: ``changes(x[5m]) > 0``, ``increase(x[5m]) > 0``,
``rate(x[5m]) > 0``, ``last_over_time(x[5m]) > 0``, or a ``> 0`` on a counter's delta against an offset
(``x - x offset 5m > 0``). A subquery under ``*_over_time`` holds its inner event that much longer. Both sides
of ``and`` must hold, so the shorter window decides; the branches of ``or`` are alerts of their own, and the
shortest is the one that can race. ``None``: no event-style part (a state, such as ``temp > 85``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import promql_parser as pp

from alertd.promql.expr import too_complex

MAX_RECORDED_DEPTH = 8  # recording rules reading recording rules, as far as anyone nests them
EVENT_FUNCTIONS = frozenset({"changes", "increase", "delta", "rate", "resets", "last_over_time"})
# Their range ends at the last two samples: true for one scrape after the event, whatever the range.
LAST_TWO = frozenset({"irate", "idelta"})
OVER_TIME = frozenset({"max_over_time", "min_over_time", "last_over_time", "present_over_time",
                       "count_over_time", "sum_over_time", "avg_over_time", "quantile_over_time"})


@dataclass(frozen=True, slots=True)
class Hold:
    """The event window: how long it holds (seconds) and what says so, as written."""

    seconds: float
    what: str


def _shortest(*holds: Hold | None) -> Hold | None:
    found = [h for h in holds if h is not None]
    return min(found, key=lambda h: h.seconds) if found else None


def event_hold(expr: str, recorded: Mapping[str, str] | None = None) -> Hold | None:
    """The shortest window an event keeps ``expr`` true, or None (not event-style, or not readable).
    ``recorded``: recording rules (series name -> expression), read where the expression names one."""
    return _Reader(recorded or {}, 0).hold_of(expr)


class _Reader:
    def __init__(self, recorded: Mapping[str, str], depth: int):
        self.recorded, self.depth = recorded, depth

    def hold_of(self, expr: str) -> Hold | None:
        if too_complex(expr) or self.depth > MAX_RECORDED_DEPTH:
            return None
        try:
            return self._hold(pp.parse(expr))
        except (ValueError, TypeError, RecursionError):
            return None

    def _hold(self, node: object) -> Hold | None:
        if isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.AggregateExpr)):
            return self._hold(node.expr)
        if isinstance(node, pp.Call):
            return self._call(node)
        if isinstance(node, pp.BinaryExpr):
            op = str(node.op).strip()
            if op == "unless":
                return self._hold(node.lhs)
            if op == "-" and (delta := _offset_delta(node)) is not None:
                return delta
            return _shortest(self._hold(node.lhs), self._hold(node.rhs))
        if isinstance(node, pp.VectorSelector) and node.name and node.name in self.recorded:
            found = _Reader(self.recorded, self.depth + 1).hold_of(self.recorded[node.name])
            return Hold(found.seconds, f"{found.what} in {node.name}") if found else None
        return None

    def _call(self, node: pp.Call) -> Hold | None:
        name = node.func.name
        args = [a for a in node.args if not isinstance(a, (pp.StringLiteral, pp.NumberLiteral))]
        if name in LAST_TWO:
            return Hold(0.0, f"{name}()")
        if name in OVER_TIME and args and isinstance(args[-1], pp.SubqueryExpr):
            sub, inner = args[-1], self._hold(args[-1].expr)
            if inner is not None and sub.range is not None:
                window = sub.range.total_seconds()
                return Hold(inner.seconds + window, f"{name}(...[{_dur(window)}:]) over {inner.what}")
        if name in EVENT_FUNCTIONS and args and isinstance(args[-1], pp.MatrixSelector):
            window = args[-1].range.total_seconds()
            return Hold(window, f"{name}(...[{_dur(window)}])")
        return _shortest(*(self._hold(a) for a in args))


def _offset_delta(node: pp.BinaryExpr) -> Hold | None:
    """``x - x offset 5m``: a counter's delta over the offset."""
    lhs, rhs = node.lhs, node.rhs
    while isinstance(rhs, pp.ParenExpr):
        rhs = rhs.expr
    if isinstance(rhs, pp.VectorSelector) and rhs.offset is not None and _name(lhs) == rhs.name:
        window = rhs.offset.total_seconds()
        return Hold(window, f"{rhs.name} - {rhs.name} offset {_dur(window)}")
    return None


def _name(node: object) -> str | None:
    while isinstance(node, pp.ParenExpr):
        node = node.expr
    return node.name if isinstance(node, pp.VectorSelector) else None


def _dur(seconds: float) -> str:
    """Seconds as a Prometheus duration ("5m", "1m30s", "90ms")."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole, out = int(seconds), ""
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size:
            out += f"{whole // size}{unit}"
            whole %= size
    return out


__all__ = ["Hold", "event_hold"]
