"""Elasticsearch log backend: the official async client, one ``_msearch`` per batch.

The elasticsearch-py 8 client only talks to servers that identify as
Elasticsearch (it checks the ``X-Elastic-Product`` header); point OpenSearch
clusters at :mod:`alertd.enrich.opensearch` instead.
"""
from __future__ import annotations

from typing import Any, Sequence

from alertd.enrich.logs import LogBackend, LogLine, LogQuery, LogSettings, LogsUnavailable, es_query, es_responses


def _reason(exc: Exception) -> str:
    meta = getattr(exc, "meta", None)
    status = getattr(meta, "status", None) or getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 400:
        err = str(getattr(exc, "message", "") or getattr(exc, "error", "") or type(exc).__name__)
        if status == 406 and "compatible-with" in err:
            err += " (not Elasticsearch 8? OpenSearch needs backend: opensearch)"
        return f"HTTP {status}: {err}"
    name = type(exc).__name__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{name}: {text}"[:200] if text else name


class ElasticsearchBackend(LogBackend):
    name = "elasticsearch"
    max_batch = 256

    def __init__(self, settings: LogSettings, client: Any = None):
        super().__init__(settings)
        self._client = client
        import elasticsearch  # noqa: F401  (imported up front, not on the event loop at the first alert)

    def client(self) -> Any:
        if self._client is None:
            from elasticsearch import AsyncElasticsearch

            s = self.settings
            kw: dict[str, Any] = {
                "request_timeout": s.timeout,
                "max_retries": 1,
                "retry_on_timeout": False,
            }
            if s.username:
                kw["basic_auth"] = (s.username, s.password)
            if s.api_key:
                kw["api_key"] = s.api_key
            if s.ca_bundle:
                kw["ca_certs"] = s.ca_bundle
            if any(u.startswith("https:") for u in s.urls):
                kw["verify_certs"] = s.verify_tls
            self._client = AsyncElasticsearch(list(s.urls), **kw)
        return self._client

    async def search(self, queries: Sequence[LogQuery]) -> list[list[LogLine] | LogsUnavailable]:
        s = self.settings
        searches: list[dict[str, Any]] = []
        for q in queries:
            searches.append({"index": s.index, "ignore_unavailable": True, "allow_no_indices": True})
            searches.append(es_query(q, s))
        self.requests += 1
        try:
            resp = await self.client().msearch(searches=searches)
        except Exception as exc:  # transport, HTTP, product check, serialization: all "unavailable"
            raise LogsUnavailable(_reason(exc)) from exc
        return es_responses(getattr(resp, "body", resp), len(queries), s)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
