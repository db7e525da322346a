"""Query parameters of the list endpoints (API and UI): parsed, checked, never silently ignored.

A parameter an endpoint does not know answers 400 naming it: a typo such as
``?gpus=`` must not return every incident as if no filter had been given.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from alertd.core.durations import DurationError, parse_duration
from alertd.core.incident_filters import FILTER_NAMES
from alertd.core.model import INCIDENT_STATES, SEVERITIES, parse_iso
from alertd.store.reads import IncidentQuery

PAGING = ("limit", "cursor")
MAX_LIMIT = 1000


@dataclass(slots=True)
class BadParam(Exception):
    field: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"error": self.message, "field": self.field}


def reject_unknown(query: Mapping[str, str], allowed: tuple[str, ...]) -> None:
    for name in query:
        if name not in allowed:
            raise BadParam(name, f"unsupported parameter {name!r}; supported: {', '.join(allowed)}")


def limit_of(query: Mapping[str, str], default: int = 100) -> int:
    raw = query.get("limit", "") or str(default)
    try:
        value = int(raw)
    except ValueError:
        raise BadParam("limit", "limit must be an integer") from None
    if value < 1:
        raise BadParam("limit", "limit must be at least 1")
    return min(MAX_LIMIT, value)


def encode_cursor(*parts: Any) -> str:
    return base64.urlsafe_b64encode("\x1f".join(map(str, parts)).encode()).decode().rstrip("=")


def decode_cursor(query: Mapping[str, str], n: int) -> list[str] | None:
    raw = query.get("cursor", "")
    if not raw:
        return None
    try:
        parts = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode().split("\x1f")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        parts = []
    if len(parts) != n or any(len(p) > 64 for p in parts):
        raise BadParam("cursor", "cursor is not one this server handed out (use the 'next' value of a page)")
    return parts


def sequence_cursor(query: Mapping[str, str]) -> int | None:
    """A cursor that is one incident sequence number (a 64-bit integer), or None without a cursor."""
    cursor = decode_cursor(query, 1)
    if cursor is None:
        return None
    if not cursor[0].isdigit() or int(cursor[0]) >= 2 ** 63:
        raise BadParam("cursor", "cursor is not one this server handed out")
    return int(cursor[0])


def _time(query: Mapping[str, str], name: str, now: datetime) -> datetime | None:
    """RFC 3339, or a Prometheus duration meaning that long ago (``since=24h``)."""
    raw = query.get(name, "").strip()
    if not raw:
        return None
    try:
        return parse_iso(raw)
    except ValueError:
        pass
    try:
        return now - parse_duration(raw)
    except (DurationError, OverflowError):  # OverflowError: 99999999y ago is before year 1
        raise BadParam(name, f"{name} must be an RFC 3339 timestamp or a duration such as 24h (after year 1)") from None


def incident_query(query: Mapping[str, str], now: datetime | None = None,
                   allowed: tuple[str, ...] = FILTER_NAMES + PAGING) -> tuple[IncidentQuery, str]:
    """(query without GPU resolution, the raw ?gpu= identifier); raises BadParam."""
    reject_unknown(query, allowed)
    now = now or datetime.now(timezone.utc)
    status, severity = query.get("status", ""), query.get("severity", "")
    if status and status not in INCIDENT_STATES:
        raise BadParam("status", f"status must be one of {', '.join(INCIDENT_STATES)}")
    if severity and severity not in SEVERITIES:
        raise BadParam("severity", f"severity must be one of {', '.join(SEVERITIES)}")
    xid = query.get("xid", "").strip()
    if xid and (not xid.isdigit() or int(xid) < 1):
        raise BadParam("xid", "xid must be a positive integer (an Xid code such as 79)")
    before = sequence_cursor(query)
    q = IncidentQuery(status=status, severity=severity, cluster=query.get("cluster", ""), node=query.get("node", ""),
                      signal=query.get("signal", ""), xid=str(int(xid)) if xid else "", team=query.get("team", ""),
                      since=_time(query, "since", now), until=_time(query, "until", now), before=before,
                      limit=limit_of(query))
    return q, query.get("gpu", "").strip()


def window(query: Mapping[str, str], name: str = "days", allowed: tuple[int, ...] = (7, 30, 90),
           default: int = 30) -> timedelta:
    raw = query.get(name, "") or str(default)
    if not raw.isdigit() or int(raw) not in allowed:
        raise BadParam(name, f"{name} must be one of {', '.join(map(str, allowed))}")
    return timedelta(days=int(raw))
