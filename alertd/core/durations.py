"""Prometheus duration strings (``1h30m``, ``5m``, ``250ms``), the ecosystem's habit."""
from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_WHOLE = re.compile(r"^((\d+)(ms|s|m|h|d|w|y))+$")
# Units must appear largest first and at most once, as Prometheus requires.
_ORDER = ["y", "w", "d", "h", "m", "s", "ms"]


class DurationError(ValueError):
    pass


def parse_duration(text: str | int | float) -> timedelta:
    """Parse a Prometheus duration; plain numbers are seconds (YAML habit)."""
    if isinstance(text, bool):
        raise DurationError(f"not a duration: {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise DurationError(f"negative duration: {text!r}")
        return timedelta(seconds=text)
    value = str(text).strip()
    if value == "0":
        return timedelta(0)
    if not _WHOLE.match(value):
        raise DurationError(f"not a Prometheus duration (like 30s, 5m, 1h30m): {text!r}")
    seconds = 0.0
    last = -1
    for number, unit in _PART.findall(value):
        pos = _ORDER.index(unit)
        if pos <= last:
            raise DurationError(f"duration units out of order or repeated: {text!r}")
        last = pos
        seconds += int(number) * _UNITS[unit]
    return timedelta(seconds=seconds)


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
