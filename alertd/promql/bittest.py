"""Which clock-event reason bits an alert's PromQL expression tests.

PromQL has no bitwise operators, so sites test one reason of the
DCGM_FI_DEV_CLOCKS_EVENT_REASONS bitmask (old name ..._CLOCK_THROTTLE_REASONS)
with arithmetic: ``floor(X / 32) % 2 == 1``, ``X % 64 >= 32``,
``X % 256 >= 128``, ``(floor(X / 64) % 2) != bool 0`` or simply ``X > 0``.
Reading those shapes one by one would miss the next variant, so the
expression is evaluated for every value of the nine documented bits at once
(512 values per node): the bits *tested* are those
of the smallest masks that make the alert fire. That reads any
arithmetic a site writes, through recording rules too (a selector naming a
recorded series is replaced by its expression, bounded in depth).

What cannot be read (another metric in the arithmetic, a rate of the mask)
gives None: the alert is then classified from its metric name alone.
"""
from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import promql_parser as pp

from alertd.promql.expr import too_complex
from alertd.promql.recording import EMPTY, RecordedRules

# Every spelling dcgm-exporter and DCGM have used: CLOCK_THROTTLE_REASONS (DCGM < 3.3),
# CLOCKS_EVENT_REASONS (DCGM's field name since), CLOCK_EVENT_REASONS (newer exporter counters files).
MASK_METRIC = re.compile(r"DCGM_FI_DEV_CLOCKS?_(?:THROTTLE|EVENT)_REASONS?")
MASK_BITS = 9  # 0x1 .. 0x100, NVML's documented reasons
MAX_RECORDED_DEPTH = 8
CACHE_SIZE = 1024

Value = float | None  # None: the series is absent (filtered out), so the alert does not fire
Vec = list[Value]  # one value per mask 0 .. 2^MASK_BITS - 1


class Unreadable(Exception):
    """The expression does something with the mask (or around it) this reader does not model."""


@dataclass(frozen=True, slots=True)
class ClockTest:
    """What an alert expression tests of the clock-event reasons mask."""

    bits: frozenset[int]  # bit values (0x20, ...) that, set, make the alert fire (see _triggering_bits)
    fires_on_zero: bool  # the alert fires with no reason set at all

    @property
    def mask(self) -> int:
        return sum(self.bits)

    def describe(self) -> str:
        shown = ", ".join(f"0x{b:x}" for b in sorted(self.bits)) or "none"
        return f"clock-event reason bits tested: {shown}"


_ARITH: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": lambda a, b: a / b if b else (math.copysign(math.inf, a) if a else math.nan),
    "%": lambda a, b: math.fmod(a, b) if b else math.nan,
    "^": lambda a, b: a ** b if (a or b > 0) else math.inf,
}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le,
}
_ONE_ARG: dict[str, Callable[[float], float]] = {
    "floor": math.floor, "ceil": math.ceil, "abs": abs,
    "round": lambda v: math.floor(v + 0.5), "sgn": lambda v: float((v > 0) - (v < 0)),
}
# Over a window of a mask that holds still, these give the mask itself.
_OVER_TIME_SAME = frozenset({"max_over_time", "min_over_time", "avg_over_time", "last_over_time",
                             "quantile_over_time"})
# Aggregations of one series: the value itself, or 1 for the counting ones.
_AGG_SAME = frozenset({"sum", "min", "max", "avg", "topk", "bottomk", "quantile", "limitk", "limit_ratio"})
_AGG_ONE = frozenset({"count", "group", "count_values"})


N = 1 << MASK_BITS
MASKS: list[Value] = [float(m) for m in range(N)]
ABSENT: list[Value] = [None] * N


def _pairwise(a: Vec, b: Vec, fn: Callable[[float, float], Value]) -> Vec:
    return [None if x is None or y is None else fn(x, y) for x, y in zip(a, b)]


class _Evaluator:
    """PromQL tree -> its value for every mask at once (a list of N values; None where absent).

    Evaluating each node over all masks in one list comprehension costs a few
    hundred microseconds per expression, where one call per node per mask cost
    milliseconds. Records whether the mask was read at all."""

    def __init__(self, recorded: Mapping[str, str]):
        self.recorded = recorded
        self.reads_mask = False
        self.depth = 0

    def eval(self, node: object) -> Vec:
        if isinstance(node, pp.NumberLiteral):
            return [float(node.val)] * N
        if isinstance(node, pp.ParenExpr):
            return self.eval(node.expr)
        if isinstance(node, pp.UnaryExpr):
            return [None if v is None else -v for v in self.eval(node.expr)]
        if isinstance(node, pp.VectorSelector):
            return self._selector(node)
        if isinstance(node, pp.Call):
            return self._call(node)
        if isinstance(node, pp.AggregateExpr):
            return self._aggregate(node)
        if isinstance(node, pp.BinaryExpr):
            return self._binary(node)
        raise Unreadable(type(node).__name__)

    def _selector(self, node: pp.VectorSelector) -> Vec:
        name = node.name or ""
        if MASK_METRIC.fullmatch(name):
            self.reads_mask = True
            return MASKS
        expr = self.recorded.get(name)
        if expr is None or self.depth >= MAX_RECORDED_DEPTH or too_complex(expr):
            raise Unreadable(f"series {name}")
        self.depth += 1
        try:
            return self.eval(pp.parse(expr))
        except (ValueError, TypeError) as exc:
            raise Unreadable(str(exc)) from None
        finally:
            self.depth -= 1

    def _call(self, node: pp.Call) -> Vec:
        name, args = node.func.name, list(node.args)
        if name in _ONE_ARG and args:
            fn = _ONE_ARG[name]
            return [None if v is None else float(fn(v)) for v in self.eval(args[0])]
        if name in _OVER_TIME_SAME and args:
            window = args[-1]
            target = window.vector_selector if isinstance(window, pp.MatrixSelector) else getattr(window, "expr", None)
            return self.eval(target)
        if name in ("label_replace", "label_join", "vector", "scalar") and args:
            return self.eval(args[0])
        if name in ("clamp_min", "clamp_max") and len(args) == 2:
            return _pairwise(self.eval(args[0]), self.eval(args[1]), max if name == "clamp_min" else min)
        raise Unreadable(f"function {name}")

    def _aggregate(self, node: pp.AggregateExpr) -> Vec:
        op = str(node.op).strip()
        inner = self.eval(node.expr)
        if op in _AGG_SAME:
            return inner
        if op in _AGG_ONE or op in ("stddev", "stdvar"):
            one = 1.0 if op in _AGG_ONE else 0.0
            return [None if v is None else one for v in inner]
        raise Unreadable(f"aggregation {op}")

    def _binary(self, node: pp.BinaryExpr) -> Vec:
        op = str(node.op).strip()
        if op in ("and", "unless", "or"):
            return self._set_op(op, node)
        lhs, rhs = self.eval(node.lhs), self.eval(node.rhs)
        if op in _ARITH:
            return _pairwise(lhs, rhs, _ARITH[op])
        test = _COMPARE.get(op)
        if test is None:
            raise Unreadable(f"operator {op}")
        if node.modifier is not None and node.modifier.return_bool:
            return [None if a is None or b is None else float(test(a, b)) for a, b in zip(lhs, rhs)]
        return [a if a is not None and b is not None and test(a, b) else None for a, b in zip(lhs, rhs)]

    def _set_op(self, op: str, node: pp.BinaryExpr) -> Vec:
        lhs = self.eval(node.lhs)
        try:
            rhs: Vec | None = self.eval(node.rhs)
        except Unreadable:  # another series filtering: assume it lets the mask's alert through
            rhs = None
        if op == "and":
            return lhs if rhs is None else [a if b is not None else None for a, b in zip(lhs, rhs)]
        if op == "unless":
            return lhs if rhs is None else [a if b is None else None for a, b in zip(lhs, rhs)]
        other = rhs or ABSENT
        return [a if a is not None else b for a, b in zip(lhs, other)]


def clock_test(expr: str, recorded: Mapping[str, str] | None = None) -> ClockTest | None:
    """The reason bits ``expr`` tests; None when it reads no clock-event mask or cannot be read."""
    if not expr or too_complex(expr):
        return None
    if recorded is None or isinstance(recorded, RecordedRules):
        return _clock_test(expr, recorded or EMPTY)  # identity-hashed: cached per expression and rule set
    return _clock_test.__wrapped__(expr, recorded)


@lru_cache(maxsize=CACHE_SIZE)
def _clock_test(expr: str, recorded: Mapping[str, str]) -> ClockTest | None:
    evaluator = _Evaluator(recorded)
    try:
        values = evaluator.eval(pp.parse(expr))
    except (Unreadable, ValueError, TypeError, RecursionError, OverflowError):
        return None
    if not evaluator.reads_mask:
        return None
    fires = [v is not None for v in values]
    if all(fires) or not any(fires):  # a `bool` comparison keeps every series: its 0 / 1 says what is meant
        fires = [v is not None and v != 0 for v in values]
    return ClockTest(bits=_triggering_bits(fires), fires_on_zero=fires[0])


# _WITH[b]: the set of masks that have bit b, as a bitset over the N masks (bit m of the int = mask m).
_WITH = [sum(1 << m for m in range(N) if m & (1 << b)) for b in range(MASK_BITS)]


def _triggering_bits(fires: list[bool]) -> frozenset[int]:
    """The bits of the minimal firing masks (firing, and no longer firing without any one of their bits):
    ``X % 256 >= 128`` -> {0x80}; ``X == 4`` -> {0x4}; ``X > 0`` -> every bit. Bitset arithmetic over the
    N masks: shifting the firing set left by 2^b puts, at mask m, whether m without bit b fires."""
    firing = sum(1 << m for m, fire in enumerate(fires) if fire)
    reducible = 0
    for b in range(MASK_BITS):
        reducible |= firing & _WITH[b] & (firing << (1 << b))
    minimal = firing & ~reducible
    return frozenset(1 << b for b in range(MASK_BITS) if minimal & _WITH[b])


_BITWISE = re.compile(r"(?:&|\band\s+(?:0x[0-9a-fA-F]+|[0-9]+)\b)\s*(0x[0-9a-fA-F]+|[0-9]+)?")


def bitwise_hint(expr: str) -> str:
    """For a mask test written with a bitwise AND PromQL does not have (``X & 0x40``, ``X and 128``): how to
    write it ("" when the expression does not look like one)."""
    if not MASK_METRIC.search(expr or "") or not (m := _BITWISE.search(expr)):
        return ""
    digits = re.search(r"0x[0-9a-fA-F]+|[0-9]+", m.group(0))
    bit = int(digits.group(0), 0) if digits else 0
    if bit <= 0 or bit & (bit - 1):
        return "PromQL has no bitwise AND (Prometheus refuses this rule too): test one bit with floor(X / 2^n) % 2 == 1"
    return (f"PromQL has no bitwise AND (Prometheus refuses this rule too): test bit 0x{bit:x} with "
            f"floor(X / {bit}) % 2 == 1")


__all__ = ["ClockTest", "MASK_METRIC", "bitwise_hint", "clock_test"]
