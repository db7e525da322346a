"""Coalescing, batching, caching and timeouts in front of one log backend.

:class:`LogSearcher`

- answers from a per node+window cache (TTL; failures are cached briefly too, so a
  down backend is not hammered by a storm),
- joins a query that is already in flight for the same node+window,
- collects new queries for a short linger and hands them to the backend as ONE
  batch (Elasticsearch/OpenSearch: one ``_msearch``),
- bounds the number of batches in flight, and
- fails a batch that takes longer than the per-query timeout.

A window that had not closed yet (plus ingest lag) when it was searched is
cached only until it closes, so the enricher's recheck gets a fresh answer.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Callable

from alertd.enrich.logs import LogBackend, LogQuery, QueryKey, LogResult, LogsUnavailable, align_window, describe_error
from alertd.enrich.settings import LogSettings

log = logging.getLogger(__name__)


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
        return {f.name: getattr(self, f.name) for f in fields(self)}


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
        self._cache: OrderedDict[QueryKey, _Entry] = OrderedDict()
        self._max_entries = max_entries
        self._inflight: dict[QueryKey, asyncio.Future[LogResult]] = {}
        self._pending: list[tuple[LogQuery, asyncio.Future[LogResult]]] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self._sem = asyncio.Semaphore(max(1, self.settings.concurrency))
        self._tasks: set[asyncio.Task[None]] = set()
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
            self._flush_handle = loop.call_later(self.settings.batch.linger, self._flush)
        return await asyncio.shield(fut)

    def _batch_size(self) -> int:
        return max(1, min(self.backend.max_batch, self.settings.batch.max))

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

    async def _run(self, batch: list[tuple[LogQuery, asyncio.Future[LogResult]]]) -> None:
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
            ttl: float = self.settings.cache_ttl
            if not complete:  # the window is still filling: keep the answer only until it closes
                ttl = min(ttl, max(1.0, (q.end + self.settings.ingest_lag - fetched_at).total_seconds()))
            self._store(q.key, _Entry(now_mono + ttl, result=result))
            if not fut.done():
                fut.set_result(result)

    def _store(self, key: QueryKey, entry: _Entry) -> None:
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


__all__ = ["LogSearcher", "SearchStats"]
