"""OpenSearch log backend: opensearch-py's AsyncOpenSearch, one ``_msearch`` per batch.

Graylog 5+ commonly stores its messages in OpenSearch; the Elasticsearch 8
client refuses to talk to it, so OpenSearch gets its own client.
"""
from __future__ import annotations

from typing import Any, Sequence

from alertd.enrich.logs import LogBackend, LogLine, LogQuery, LogSettings, LogsUnavailable, es_query, es_responses


def _reason(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 400:
        return f"HTTP {status}: {getattr(exc, 'error', '') or type(exc).__name__}"
    name = type(exc).__name__
    info = getattr(exc, "info", None)
    text = str(info if isinstance(info, Exception) else exc).strip()
    text = text.splitlines()[0] if text else ""
    return f"{name}: {text}"[:200] if text else name


class OpenSearchBackend(LogBackend):
    name = "opensearch"
    max_batch = 256

    def __init__(self, settings: LogSettings, client: Any = None):
        super().__init__(settings)
        self._client = client
        import opensearchpy  # noqa: F401  (imported up front, not on the event loop at the first alert)

    def client(self) -> Any:
        if self._client is None:
            from opensearchpy import AsyncOpenSearch

            s = self.settings
            kw: dict[str, Any] = {"timeout": s.timeout, "max_retries": 1, "retry_on_timeout": False}
            if s.username:
                kw["http_auth"] = (s.username, s.password)
            if s.api_key:
                kw["headers"] = {"Authorization": f"ApiKey {s.api_key}"}
            if any(u.startswith("https:") for u in s.urls):
                kw["use_ssl"] = True
                kw["verify_certs"] = s.verify_tls
                kw["ssl_show_warn"] = False
                if s.ca_bundle:
                    kw["ca_certs"] = s.ca_bundle
            self._client = AsyncOpenSearch(hosts=list(s.urls), **kw)
        return self._client

    async def search(self, queries: Sequence[LogQuery]) -> list[list[LogLine] | LogsUnavailable]:
        s = self.settings
        body: list[dict[str, Any]] = []
        for q in queries:
            body.append({"index": s.index, "ignore_unavailable": True, "allow_no_indices": True})
            body.append(es_query(q, s))
        self.requests += 1
        try:
            resp = await self.client().msearch(body=body)
        except Exception as exc:
            raise LogsUnavailable(_reason(exc)) from exc
        return es_responses(resp, len(queries), s)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
