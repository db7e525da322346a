"""Log search for enrichment: the backend interface plus coalescing, caching and timeouts.

A :class:`LogQuery` asks for one host's lines in one time window. Windows are
aligned to a bucket (default 1 minute) so alerts on the same node a few seconds
apart ask the same question. :class:`LogSearcher` then

- answers from a per node+window cache (TTL; failures are cached briefly too, so a
  down backend is not hammered by a storm),
- joins a query that is already in flight for the same node+window,
- collects new queries for a short linger and hands them to the backend as ONE
  batch (Elasticsearch/OpenSearch: one ``_msearch``),
- bounds the number of batches in flight, and
- fails a batch that takes longer than the per-query timeout.

Backends raise or return :class:`LogsUnavailable` with a short reason; the
enricher shows that reason on the incident (``logs_unavailable``).
"""
from __future__ import annotations

import abc
import asyncio
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence

from alertd.durations import parse_duration

log = logging.getLogger(__name__)

DEFAULT_PATTERNS = ("NVRM", "Xid", "nvidia", "kernel")


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


# ----- settings -----

@dataclass(frozen=True, slots=True)
class LogSettings:
    """The ``enrich.logs`` config section, parsed."""

    backend: str = "opensearch"  # opensearch | elasticsearch | graylog
    urls: tuple[str, ...] = ("http://127.0.0.1:9200",)
    username: str = ""
    password: str = ""
    api_key: str = ""
    token: str = ""  # Graylog access token (sent as basic auth <token>:token)
    ca_bundle: str = ""
    verify_tls: bool = True
    index: str = "graylog_*"
    host_fields: tuple[str, ...] = ("source",)
    message_field: str = "message"
    time_field: str = "timestamp"
    extra_fields: tuple[str, ...] = ("full_message", "level", "facility", "kubernetes_pod_name",
                                     "kubernetes_namespace_name", "kubernetes_container_name")
    match_short_hostname: bool = True
    before: timedelta = timedelta(minutes=10)
    after: timedelta = timedelta(minutes=2)
    bucket: timedelta = timedelta(minutes=1)
    max_lines: int = 50
    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    pattern_fields: tuple[str, ...] = ()  # default: the message field and facility
    timeout: float = 10.0
    concurrency: int = 4
    max_batch: int = 64
    linger: float = 0.025
    cache_ttl: float = 300.0
    failure_ttl: float = 15.0
    ingest_lag: timedelta = timedelta(seconds=30)
    graylog_api: str = "messages"  # messages (POST /api/search/messages) | universal (/api/search/universal/absolute)
    graylog_streams: tuple[str, ...] = ()

    @property
    def search_fields(self) -> tuple[str, ...]:
        return self.pattern_fields or (self.message_field, "facility")

    @property
    def source_fields(self) -> list[str]:
        out: list[str] = []
        for name in (self.time_field, *self.host_fields, self.message_field, *self.extra_fields):
            if name and name not in out:
                out.append(name)
        return out

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> "LogSettings":
        doc = doc or {}
        d = cls()
        auth = doc.get("auth") or {}
        basic = auth.get("basic") or {}
        fields = doc.get("fields") or {}
        window = doc.get("window") or {}
        graylog = doc.get("graylog") or {}
        batch = doc.get("batch") or {}
        urls = doc.get("urls") or ([doc["url"]] if doc.get("url") else list(d.urls))
        host = fields.get("host", list(d.host_fields))
        return cls(
            backend=doc.get("backend", d.backend),
            urls=tuple(u.rstrip("/") for u in urls),
            username=basic.get("username", ""),
            password=basic.get("password", ""),
            api_key=auth.get("api_key", ""),
            token=auth.get("token", ""),
            ca_bundle=doc.get("ca_bundle", ""),
            verify_tls=doc.get("verify_tls", True),
            index=doc.get("index", d.index),
            host_fields=tuple([host] if isinstance(host, str) else host),
            message_field=fields.get("message", d.message_field),
            time_field=fields.get("time", d.time_field),
            extra_fields=tuple(fields.get("extra", d.extra_fields)),
            match_short_hostname=doc.get("match_short_hostname", True),
            before=parse_duration(window.get("before", "10m")),
            after=parse_duration(window.get("after", "2m")),
            bucket=parse_duration(window.get("align", "1m")),
            max_lines=int(doc.get("max_lines", d.max_lines)),
            patterns=tuple(doc.get("patterns", d.patterns)),
            pattern_fields=tuple(doc.get("pattern_fields", ())),
            timeout=parse_duration(doc.get("timeout", "10s")).total_seconds(),
            concurrency=int(doc.get("concurrency", d.concurrency)),
            max_batch=int(batch.get("max", d.max_batch)),
            linger=parse_duration(batch.get("linger", "25ms")).total_seconds(),
            cache_ttl=parse_duration(doc.get("cache_ttl", "5m")).total_seconds(),
            failure_ttl=parse_duration(doc.get("failure_ttl", "15s")).total_seconds(),
            ingest_lag=parse_duration(doc.get("ingest_lag", "30s")),
            graylog_api=graylog.get("api", d.graylog_api),
            graylog_streams=tuple(graylog.get("streams", ())),
        )


# ----- queries and results -----

@dataclass(frozen=True, slots=True)
class LogQuery:
    """One host's log lines in [start, end]; ``key`` is what coalescing and the cache use."""

    node: str
    start: datetime
    end: datetime

    @property
    def key(self) -> tuple[str, datetime, datetime]:
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
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LogResult:
    query: LogQuery
    lines: list[LogLine]
    fetched_at: datetime
    complete: bool  # the window had closed (plus ingest lag) when it was searched
    cached: bool = False


def align_window(node: str, anchor: datetime, settings: LogSettings) -> LogQuery:
    """[anchor - before, anchor + after], widened to whole buckets so nearby alerts share it."""
    start = anchor - settings.before
    end = anchor + settings.after
    step = settings.bucket.total_seconds()
    if step > 0:
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
        s = (start - epoch).total_seconds()
        e = (end - epoch).total_seconds()
        start = epoch + timedelta(seconds=(s // step) * step)
        end = epoch + timedelta(seconds=-((-e) // step) * step)
    return LogQuery(node, start.astimezone(timezone.utc), end.astimezone(timezone.utc))


# ----- timestamps -----

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


# ----- Elasticsearch / OpenSearch query DSL (both speak it) -----

def es_query(q: LogQuery, s: LogSettings) -> dict[str, Any]:
    """The search body for one node+window: host filter, time range, any of the patterns."""
    hosts = q.hosts(s.match_short_hostname)
    host_filter: dict[str, Any]
    if len(s.host_fields) == 1:
        host_filter = {"terms": {s.host_fields[0]: hosts}}
    else:
        host_filter = {"bool": {"should": [{"terms": {f: hosts}} for f in s.host_fields], "minimum_should_match": 1}}
    filters: list[dict[str, Any]] = [
        host_filter,
        {"range": {s.time_field: {"gte": epoch_millis(q.start), "lte": epoch_millis(q.end), "format": "epoch_millis"}}},
    ]
    if s.patterns:
        filters.append({"bool": {
            "should": [{"multi_match": {"query": p, "type": "phrase", "fields": list(s.search_fields)}} for p in s.patterns],
            "minimum_should_match": 1,
        }})
    return {
        "size": s.max_lines,
        "query": {"bool": {"filter": filters}},
        "sort": [{s.time_field: {"order": "asc", "unmapped_type": "date"}}],
        "_source": s.source_fields,
        "track_total_hits": False,
    }


def hit_to_line(hit: Any, s: LogSettings) -> LogLine:
    """One search hit -> LogLine; raises ValueError on a hit that is not a document."""
    if not isinstance(hit, dict) or not isinstance(hit.get("_source", {}), dict):
        raise ValueError("search hit is not an object")
    return doc_to_line(hit.get("_source") or {}, s)


def doc_to_line(doc: dict[str, Any], s: LogSettings) -> LogLine:
    message = doc.get(s.message_field)
    if message is None:
        message = doc.get("full_message", "")
    host = next((str(doc[f]) for f in s.host_fields if doc.get(f)), "")
    extra = {k: doc[k] for k in s.extra_fields if k in doc and doc[k] not in (None, "")}
    return LogLine(time=parse_time(doc.get(s.time_field)), host=host, message=str(message), fields=extra)


def es_responses(body: Any, count: int, s: LogSettings) -> list[list[LogLine] | LogsUnavailable]:
    """Split an ``_msearch`` answer into per-query results; garbage becomes LogsUnavailable."""
    responses = body.get("responses") if isinstance(body, dict) else None
    if not isinstance(responses, list) or len(responses) != count:
        raise LogsUnavailable(f"bad _msearch answer: expected {count} responses, got "
                              f"{len(responses) if isinstance(responses, list) else type(body).__name__}")
    out: list[list[LogLine] | LogsUnavailable] = []
    for resp in responses:
        if not isinstance(resp, dict):
            out.append(LogsUnavailable("bad _msearch answer: response is not an object"))
            continue
        if resp.get("error"):
            err = resp["error"]
            reason = err.get("reason") or err.get("type") if isinstance(err, dict) else str(err)
            out.append(LogsUnavailable(f"search failed ({resp.get('status', '?')}): {reason}"))
            continue
        hits = (resp.get("hits") or {}).get("hits") if isinstance(resp.get("hits"), dict) else None
        if not isinstance(hits, list):
            out.append(LogsUnavailable("bad _msearch answer: no hits"))
            continue
        try:
            out.append([hit_to_line(h, s) for h in hits])
        except (ValueError, TypeError) as exc:
            out.append(LogsUnavailable(f"bad _msearch answer: {exc}"))
    return out


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


def build_backend(settings: LogSettings) -> LogBackend:
    if settings.backend == "elasticsearch":
        from alertd.enrich.elasticsearch import ElasticsearchBackend

        return ElasticsearchBackend(settings)
    if settings.backend == "opensearch":
        from alertd.enrich.opensearch import OpenSearchBackend

        return OpenSearchBackend(settings)
    if settings.backend == "graylog":
        from alertd.enrich.graylog import GraylogBackend

        return GraylogBackend(settings)
    raise ValueError(f"unknown log backend {settings.backend!r}")


# ----- coalescing, cache, deadline -----

@dataclass(slots=True)
class _Entry:
    expires: float
    result: LogResult | None = None
    error: LogsUnavailable | None = None


@dataclass(slots=True)
class SearchStats:
    queries: int = 0  # fetch() calls
    cache_hits: int = 0
    joined: int = 0  # joined a query already in flight
    searched: int = 0  # distinct node+window searches sent to the backend
    batches: int = 0  # backend calls (one _msearch each for Elasticsearch/OpenSearch)
    failures: int = 0

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]


class LogSearcher:
    """Coalesces, batches and caches log queries in front of one backend."""

    def __init__(self, backend: LogBackend, settings: LogSettings | None = None, *,
                 now: Callable[[], datetime] | None = None, monotonic: Callable[[], float] = time.monotonic,
                 max_entries: int = 4096):
        self.backend = backend
        self.settings = settings or backend.settings
        self.now = now or (lambda: datetime.now(timezone.utc))
        self.monotonic = monotonic
        self.stats = SearchStats()
        self._cache: OrderedDict[tuple, _Entry] = OrderedDict()
        self._max_entries = max_entries
        self._inflight: dict[tuple, asyncio.Future] = {}
        self._pending: list[tuple[LogQuery, asyncio.Future]] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self._sem = asyncio.Semaphore(max(1, self.settings.concurrency))
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    def window(self, node: str, anchor: datetime) -> LogQuery:
        return align_window(node, anchor, self.settings)

    async def fetch(self, query: LogQuery, *, fresh: bool = False) -> LogResult:
        """Lines for one node+window; raises LogsUnavailable. ``fresh`` skips a cached answer."""
        if self._closed:
            raise LogsUnavailable("enrichment is shutting down")
        self.stats.queries += 1
        key = query.key
        entry = self._cache.get(key)
        if entry is not None and not fresh:
            if entry.expires > self.monotonic():
                self.stats.cache_hits += 1
                self._cache.move_to_end(key)
                if entry.error is not None:
                    raise LogsUnavailable(entry.error.reason)
                assert entry.result is not None
                return LogResult(entry.result.query, entry.result.lines, entry.result.fetched_at,
                                 entry.result.complete, cached=True)
            del self._cache[key]
        fut = self._inflight.get(key)
        if fut is not None:
            self.stats.joined += 1
            return await asyncio.shield(fut)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._inflight[key] = fut
        self._pending.append((query, fut))
        if self.backend.max_batch <= 1 or len(self._pending) >= self._batch_size():
            self._flush()
        elif self._flush_handle is None:
            self._flush_handle = loop.call_later(self.settings.linger, self._flush)
        return await asyncio.shield(fut)

    def _batch_size(self) -> int:
        return max(1, min(self.backend.max_batch, self.settings.max_batch))

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        pending, self._pending = self._pending, []
        if not pending:
            return
        size = self._batch_size()
        for i in range(0, len(pending), size):
            task = asyncio.get_running_loop().create_task(self._run(pending[i:i + size]), name="alertd-log-search")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[LogQuery, asyncio.Future]]) -> None:
        queries = [q for q, _ in batch]
        timeout = self.settings.timeout
        try:
            async with self._sem:
                self.stats.batches += 1
                self.stats.searched += len(queries)
                fetched_at = self.now()
                results = await asyncio.wait_for(self.backend.search(queries), timeout)
            if not isinstance(results, list) or len(results) != len(queries):
                raise LogsUnavailable("backend answered the wrong number of results")
        except asyncio.CancelledError:
            for q, fut in batch:
                self._inflight.pop(q.key, None)
                if not fut.done():
                    fut.set_exception(LogsUnavailable("enrichment is shutting down"))
            raise
        except Exception as exc:  # down, refused, timeout, garbage: one reason for the whole batch
            if isinstance(exc, asyncio.TimeoutError):
                reason = f"{self.backend.name}: no answer within {timeout:g}s"
            else:
                reason = f"{self.backend.name}: {describe_error(exc)}"
            log.warning("log search failed for %d queries: %s", len(queries), reason)
            results = [LogsUnavailable(reason)] * len(queries)
            fetched_at = self.now()
        now_mono = self.monotonic()
        for (q, fut), res in zip(batch, results):
            self._inflight.pop(q.key, None)
            if isinstance(res, LogsUnavailable):
                self.stats.failures += 1
                self._store(q.key, _Entry(now_mono + self.settings.failure_ttl, error=res))
                if not fut.done():
                    fut.set_exception(res)
                continue
            complete = q.end + self.settings.ingest_lag <= fetched_at
            result = LogResult(q, res, fetched_at, complete)
            ttl = self.settings.cache_ttl
            if not complete:  # the window is still filling: keep the answer only until it closes
                ttl = min(ttl, max(1.0, (q.end + self.settings.ingest_lag - fetched_at).total_seconds()))
            self._store(q.key, _Entry(now_mono + ttl, result=result))
            if not fut.done():
                fut.set_result(result)

    def _store(self, key: tuple, entry: _Entry) -> None:
        self._cache[key] = entry
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)

    async def close(self) -> None:
        self._closed = True
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        for _, fut in self._pending:
            if not fut.done():
                fut.set_exception(LogsUnavailable("enrichment is shutting down"))
                fut.exception()
        self._pending = []
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for fut in self._inflight.values():
            if not fut.done():
                fut.set_exception(LogsUnavailable("enrichment is shutting down"))
                fut.exception()  # retrieved: no "never retrieved" warning
        self._inflight.clear()
        await self.backend.close()


__all__ = [
    "DEFAULT_PATTERNS", "LogBackend", "LogLine", "LogQuery", "LogResult", "LogSearcher", "LogSettings",
    "LogsUnavailable", "align_window", "build_backend", "describe_error", "doc_to_line", "es_query",
    "es_responses", "graylog_time", "hit_to_line", "iso_millis", "parse_time",
]
