"""The log-backend interface and the values that pass through it.

A :class:`LogQuery` asks for one host's lines in one time window. Windows are
aligned to a bucket (default 1 minute) so alerts on the same node a few seconds
apart ask the same question, which is what lets
:class:`~alertd.enrich.searcher.LogSearcher` coalesce and cache them.

A :class:`LogBackend` answers a batch of queries with :class:`LogLine` lists.
Backends raise or return :class:`LogsUnavailable` with a short reason; the
enricher shows that reason on the incident (``logs_unavailable``).
"""
from __future__ import annotations

import abc
import asyncio
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Sequence

from alertd.core.json_types import JSONObject
from alertd.enrich.settings import LogSettings
from alertd.enrich.timestamps import parse_time


class LogsUnavailable(Exception):
    """The log backend could not answer; ``reason`` is short and shown to people."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def describe_error(exc: BaseException, limit: int = 200) -> str:
    """A one-line reason for a failed search, without stack traces."""
    if isinstance(exc, LogsUnavailable):
        return exc.reason
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    out = f"{name}: {text}" if text and name not in text else (text or name)
    return out if len(out) <= limit else out[: limit - 1] + "…"


# ----- queries and results -----

# What identifies a query for caching and coalescing: node, window start, window end.
QueryKey = tuple[str, datetime, datetime]


@dataclass(frozen=True, slots=True)
class LogQuery:
    """One host's log lines in [start, end]; ``key`` is what coalescing and the cache use."""

    node: str
    start: datetime
    end: datetime

    @property
    def key(self) -> QueryKey:
        return (self.node, self.start, self.end)

    def hosts(self, short: bool = True) -> list[str]:
        """The node name, plus its short host name (kernel syslog often carries only that)."""
        out = [self.node]
        if short and "." in self.node and not _IP.match(self.node):
            out.append(self.node.split(".", 1)[0])
        return out


_IP = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


@dataclass(slots=True)
class LogLine:
    time: datetime | None
    host: str
    message: str
    fields: JSONObject = field(default_factory=dict)


@dataclass(slots=True)
class LogResult:
    query: LogQuery
    lines: list[LogLine]
    fetched_at: datetime
    complete: bool  # the window had closed (plus ingest lag) when it was searched
    cached: bool = False


def align_window(node: str, anchor: datetime, settings: LogSettings) -> LogQuery:
    """[anchor - before, anchor + after], widened to whole buckets so nearby alerts share it."""
    start = anchor - settings.window.before
    end = anchor + settings.window.after
    step = settings.window.align.total_seconds()
    if step > 0:
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
        s = (start - epoch).total_seconds()
        e = (end - epoch).total_seconds()
        start = epoch + timedelta(seconds=(s // step) * step)
        end = epoch + timedelta(seconds=-((-e) // step) * step)
    return LogQuery(node, start.astimezone(timezone.utc), end.astimezone(timezone.utc))


def doc_to_line(doc: JSONObject, s: LogSettings) -> LogLine:
    """One stored log document (field names as configured) -> LogLine."""
    message = doc.get(s.fields.message)
    if message is None:
        message = doc.get("full_message", "")
    host = next((str(doc[f]) for f in s.fields.hosts if doc.get(f)), "")
    extra = {k: doc[k] for k in s.fields.extra if k in doc and doc[k] not in (None, "")}
    return LogLine(time=parse_time(doc.get(s.fields.time)), host=host, message=str(message), fields=extra)


# ----- the backend interface -----

class LogBackend(abc.ABC):
    """One log store. ``search`` answers a batch of queries in order; a backend without
    a multi-search API sets ``max_batch = 1`` and gets one query per call."""

    name = "logs"
    max_batch = 1

    def __init__(self, settings: LogSettings):
        self.settings = settings
        self.requests = 0  # requests sent over the wire

    @abc.abstractmethod
    async def search(self, queries: Sequence[LogQuery]) -> list[list[LogLine] | LogsUnavailable]:
        """Answer each query (same order); raise LogsUnavailable when the whole call failed."""

    async def close(self) -> None:
        return None


__all__ = [
    "LogBackend", "LogLine", "LogQuery", "LogResult", "LogsUnavailable", "QueryKey", "align_window",
    "describe_error", "doc_to_line",
]
