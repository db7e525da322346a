"""Timestamps as log pipelines store them, in and out.

Log documents carry their time in whatever shape the shipper wrote (Graylog's
own format, ISO 8601 from Fluent Bit, epoch numbers); everything is read as a
UTC datetime here and written back in the fixed-width forms the backends and
the annotations use.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

_GRAYLOG_TS = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?\s*(Z|[+-]\d{2}:?\d{2})?$")


def parse_time(value: Any) -> datetime | None:
    """Timestamps as log pipelines store them, all as UTC datetimes.

    Graylog ``yyyy-MM-dd HH:mm:ss.SSS`` (UTC), ISO 8601 with ``T``/``Z``/offset and
    up to nanosecond fractions (Fluent Bit), epoch milliseconds (numbers), epoch
    seconds with a fraction.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000.0 if abs(value) > 1e11 else float(value)
        return datetime.fromtimestamp(seconds, timezone.utc)
    if isinstance(value, list) and value:
        return parse_time(value[0])
    text = str(value).strip()
    m = _GRAYLOG_TS.match(text)
    if m is None:
        if re.fullmatch(r"-?\d+(\.\d+)?", text):
            return parse_time(float(text))
        return None
    day, clock, frac, tz = m.groups()
    micro = (frac or "0")[:6].ljust(6, "0")
    zone = timezone.utc
    if tz and tz != "Z":
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        zone = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    try:
        ts = datetime.fromisoformat(f"{day}T{clock}.{micro}").replace(tzinfo=zone)
    except ValueError:
        return None
    return ts.astimezone(timezone.utc)


def graylog_time(ts: datetime) -> str:
    """``yyyy-MM-dd HH:mm:ss.SSS`` in UTC, the format of Graylog's timestamp field."""
    ts = ts.astimezone(timezone.utc)
    return ts.strftime("%Y-%m-%d %H:%M:%S.") + f"{ts.microsecond // 1000:03d}"


def iso_millis(ts: datetime) -> str:
    ts = ts.astimezone(timezone.utc)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def epoch_millis(ts: datetime) -> int:
    return int(ts.timestamp() * 1000)


__all__ = ["epoch_millis", "graylog_time", "iso_millis", "parse_time"]
