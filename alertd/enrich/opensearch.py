"""OpenSearch log backend: opensearch-py's AsyncOpenSearch, one ``_msearch`` per batch.

Graylog 5+ commonly stores its messages in OpenSearch; the Elasticsearch 8
client refuses to talk to it, so OpenSearch gets its own client.
"""
from __future__ import annotations

from typing import Any, TypedDict

# The client library loads with this module (build_backend, at startup), not on the
# event loop at the first alert.
from opensearchpy import AsyncOpenSearch

from alertd.enrich.msearch import MsearchBackend


class _ClientOptions(TypedDict, total=False):
    """The keyword arguments alertd gives AsyncOpenSearch (which takes ``**kwargs: Any`` and hands them to its
    transport and connection classes)."""

    timeout: float
    max_retries: int
    retry_on_timeout: bool
    http_auth: tuple[str, str]
    headers: dict[str, str]
    use_ssl: bool
    verify_certs: bool
    ssl_show_warn: bool
    ca_certs: str


class OpenSearchBackend(MsearchBackend):
    name = "opensearch"
    msearch_keyword = "body"

    def _new_client(self) -> Any:
        s = self.settings
        kw: _ClientOptions = {"timeout": s.timeout, "max_retries": 1, "retry_on_timeout": False}
        if s.auth.basic is not None:
            kw["http_auth"] = (s.auth.basic.username, s.auth.basic.password)
        if s.auth.api_key:
            kw["headers"] = {"Authorization": f"ApiKey {s.auth.api_key}"}
        if any(u.startswith("https:") for u in s.urls):
            kw["use_ssl"] = True
            kw["verify_certs"] = s.verify_tls
            kw["ssl_show_warn"] = False
            if s.ca_bundle:
                kw["ca_certs"] = s.ca_bundle
        return AsyncOpenSearch(hosts=list(s.urls), **kw)

    def _reason(self, exc: Exception) -> str:
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and status >= 400:
            return f"HTTP {status}: {getattr(exc, 'error', '') or type(exc).__name__}"
        name = type(exc).__name__
        info = getattr(exc, "info", None)
        text = str(info if isinstance(info, Exception) else exc).strip()
        text = text.splitlines()[0] if text else ""
        return f"{name}: {text}"[:200] if text else name
