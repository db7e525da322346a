"""Prometheus duration strings (``1h30m``, ``5m``, ``250ms``), the ecosystem's habit."""
from __future__ import annotations

import math
import re
from datetime import timedelta

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
             "y": 31_536_000_000}
# Prometheus holds a duration as Go's time.Duration (int64 nanoseconds) and refuses a longer one, about 292
# years, as "duration out of range". alertd ends where it does: every timestamp plus or minus such a duration
# stays a datetime, so a rule's hold_down of 900000y is an error at load, not an OverflowError in the engine.
MAX_MS = (2**63 - 1) // 1_000_000
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_WHOLE = re.compile(r"^((\d+)(ms|s|m|h|d|w|y))+$")
# Units must appear largest first and at most once, as Prometheus requires.
_ORDER = ["y", "w", "d", "h", "m", "s", "ms"]


class DurationError(ValueError):
    pass


class DurationOutOfRange(DurationError):
    """Well formed, but longer than any duration alertd can hold."""


def parse_duration(text: str | int | float) -> timedelta:
    """Parse a Prometheus duration; plain numbers are seconds (YAML habit)."""
    if isinstance(text, bool):
        raise DurationError(f"not a duration: {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise DurationError(f"negative duration: {text!r}")
        if not math.isfinite(text) or text * 1000 > MAX_MS:
            raise DurationOutOfRange(f"duration out of range: {text!r}")
        return timedelta(seconds=text)
    value = str(text).strip()
    if value == "0":
        return timedelta(0)
    if not _WHOLE.match(value):
        raise DurationError(f"not a Prometheus duration (like 30s, 5m, 1h30m): {text!r}")
    ms = 0
    last = -1
    for number, unit in _PART.findall(value):
        pos = _ORDER.index(unit)
        if pos <= last:
            raise DurationError(f"duration units out of order or repeated: {text!r}")
        last = pos
        ms += int(number) * _UNITS_MS[unit]
    if ms > MAX_MS:
        raise DurationOutOfRange(f"duration out of range (at most 292y, as in Prometheus): {text!r}")
    return timedelta(milliseconds=ms)


def format_duration(delta: timedelta) -> str:
    total = int(delta.total_seconds())
    if total <= 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            out.append(f"{total // size}{unit}")
            total %= size
    return "".join(out)
