"""Half-open intervals [start, end) on the simulation's time line, each tagged with a problem id."""
from __future__ import annotations

from typing import Iterable

Span = tuple[float, float, str]  # start, end, problem


def merge(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union as sorted, disjoint intervals."""
    out: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def subtract(spans: list[Span], holes: list[tuple[float, float]]) -> list[Span]:
    """``spans`` minus the (merged, sorted) ``holes``: what remains of each span keeps its problem."""
    if not holes:
        return spans
    out: list[Span] = []
    for s, e, p in spans:
        cur = s
        for hs, he in holes:
            if he <= cur or hs >= e:
                continue
            if hs > cur:
                out.append((cur, hs, p))
            cur = max(cur, he)
            if cur >= e:
                break
        if cur < e:
            out.append((cur, e, p))
    return out


def covers(holes: list[tuple[float, float]], t: float) -> bool:
    """Is ``t`` inside one of the (merged) intervals?"""
    return any(s <= t < e for s, e in holes)
