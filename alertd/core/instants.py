"""Instants as alertd writes and reads them: RFC 3339 in UTC with fixed-width microseconds (stored timestamps
sort as text), parsed back to aware datetimes."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import overload

import orjson

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")  # Monday is 0, as datetime.weekday()


@overload
def iso(ts: datetime) -> str: ...
@overload
def iso(ts: None) -> None: ...
@overload
def iso(ts: datetime | None) -> str | None: ...
def iso(ts: datetime | None) -> str | None:
    """RFC 3339 in UTC with fixed-width microseconds, so stored timestamps sort as text.

    Called dozens of times per stored alert: orjson formats a datetime several times faster than
    ``isoformat`` (which calls back into Python for the offset); it leaves out a zero fraction, put back here."""
    if ts is None:
        return None
    if ts.tzinfo is not timezone.utc:
        ts = ts.astimezone(timezone.utc)
    text = orjson.dumps(ts, option=orjson.OPT_UTC_Z).decode()
    return text[1:-1] if ts.microsecond else text[1:-2] + ".000000Z"


def parse_iso(value: str | None) -> datetime | None:
    """RFC 3339 -> an aware datetime in UTC; ValueError also for an instant UTC cannot hold
    (9999-12-31T23:59:59-01:00 is in year 10000)."""
    if not value:
        return None
    ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if ts.tzinfo is None:
        return ts.replace(tzinfo=timezone.utc)
    if ts.utcoffset():
        try:
            return ts.astimezone(timezone.utc)
        except OverflowError:
            raise ValueError("the instant is outside the years 1..9999 in UTC") from None
    return ts


def parse_instant(value: str) -> datetime:
    """``parse_iso`` for a time that must be there (a stored NOT NULL column, a required field): ValueError
    when it is empty."""
    ts = parse_iso(value)
    if ts is None:
        raise ValueError("a time is required here, and the value is empty")
    return ts
