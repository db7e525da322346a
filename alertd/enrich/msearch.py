"""Elasticsearch / OpenSearch: the query DSL both speak and one ``_msearch`` per batch.

Both stores take the same search body and the same multi-search answer; only
their official clients differ (how they are built, the keyword ``msearch``
takes, how their exceptions look). :class:`MsearchBackend` holds everything
else, and each backend module supplies those three hooks.
"""
from __future__ import annotations

import abc
from typing import Any, Sequence

from alertd.core.json_types import JSONObject, JSONValue
from alertd.enrich.logs import LogBackend, LogLine, LogQuery, LogsUnavailable, doc_to_line
from alertd.enrich.settings import LogSettings
from alertd.enrich.timestamps import epoch_millis


def es_query(q: LogQuery, s: LogSettings) -> JSONObject:
    """The search body for one node+window: host filter, time range, any of the patterns."""
    hosts = q.hosts(s.match_short_hostname)
    host_filter: JSONObject
    names: list[JSONValue] = list(hosts)
    if len(s.fields.hosts) == 1:
        host_filter = {"terms": {s.fields.hosts[0]: names}}
    else:
        host_filter = {"bool": {"should": [{"terms": {f: names}} for f in s.fields.hosts], "minimum_should_match": 1}}
    filters: list[JSONValue] = [
        host_filter,
        {"range": {s.fields.time: {"gte": epoch_millis(q.start), "lte": epoch_millis(q.end), "format": "epoch_millis"}}},
    ]
    if s.patterns:
        filters.append({"bool": {
            "should": [{"multi_match": {"query": p, "type": "phrase", "fields": list[JSONValue](s.search_fields)}}
                       for p in s.patterns],
            "minimum_should_match": 1,
        }})
    return {
        "size": s.max_lines,
        "query": {"bool": {"filter": filters}},
        "sort": [{s.fields.time: {"order": "asc", "unmapped_type": "date"}}],
        "_source": list[JSONValue](s.source_fields),
        "track_total_hits": False,
    }


def hit_to_line(hit: Any, s: LogSettings) -> LogLine:
    """One search hit -> LogLine; raises ValueError on a hit that is not a document."""
    if not isinstance(hit, dict) or not isinstance(hit.get("_source", {}), dict):
        raise ValueError("search hit is not an object")
    return doc_to_line(hit.get("_source") or {}, s)


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


class MsearchBackend(LogBackend):
    """A store that answers a whole batch with one ``_msearch`` through an async client.

    Subclasses build the client (:meth:`_new_client`), name the keyword their
    client's ``msearch`` takes the request lines as (``msearch_keyword``) and turn
    the client's exceptions into a short reason (:meth:`_reason`).
    """

    max_batch = 256
    msearch_keyword: str  # what the client's msearch() takes the lines as: "searches" or "body"

    def __init__(self, settings: LogSettings, client: Any = None):
        super().__init__(settings)
        self._client = client

    def client(self) -> Any:
        if self._client is None:
            self._client = self._new_client()
        return self._client

    @abc.abstractmethod
    def _new_client(self) -> Any:
        """The async client for ``settings.urls``, with auth, TLS and the per-request timeout."""

    @abc.abstractmethod
    def _reason(self, exc: Exception) -> str:
        """A short reason for a failed call, as shown on the incident."""

    async def search(self, queries: Sequence[LogQuery]) -> list[list[LogLine] | LogsUnavailable]:
        s = self.settings
        lines: list[JSONObject] = []
        for q in queries:
            lines.append({"index": s.index, "ignore_unavailable": True, "allow_no_indices": True})
            lines.append(es_query(q, s))
        self.requests += 1
        try:
            resp = await self.client().msearch(**{self.msearch_keyword: lines})
        except Exception as exc:  # transport, HTTP, product check, serialization: all "unavailable"
            raise LogsUnavailable(self._reason(exc)) from exc
        # elasticsearch-py 8 wraps the answer (ObjectApiResponse); opensearch-py returns the dict itself.
        return es_responses(getattr(resp, "body", resp), len(queries), s)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


__all__ = ["MsearchBackend", "es_query", "es_responses", "hit_to_line"]
