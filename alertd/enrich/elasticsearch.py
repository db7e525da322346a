"""Elasticsearch log backend: the official async client, one ``_msearch`` per batch.

The elasticsearch-py 8 client only talks to servers that identify as
Elasticsearch (it checks the ``X-Elastic-Product`` header); point OpenSearch
clusters at :mod:`alertd.enrich.opensearch` instead.
"""
from __future__ import annotations

from typing import Any, TypedDict

# The client library loads with this module (build_backend, at startup), not on the
# event loop at the first alert.
from elasticsearch import AsyncElasticsearch

from alertd.enrich.msearch import MsearchBackend


class _ClientOptions(TypedDict, total=False):
    """The keyword arguments alertd gives AsyncElasticsearch (checked against its annotated signature)."""

    request_timeout: float
    max_retries: int
    retry_on_timeout: bool
    basic_auth: tuple[str, str]
    api_key: str
    ca_certs: str
    verify_certs: bool


class ElasticsearchBackend(MsearchBackend):
    name = "elasticsearch"
    msearch_keyword = "searches"

    def _new_client(self) -> Any:
        s = self.settings
        kw: _ClientOptions = {
            "request_timeout": s.timeout,
            "max_retries": 1,
            "retry_on_timeout": False,
        }
        if s.auth.basic is not None:
            kw["basic_auth"] = (s.auth.basic.username, s.auth.basic.password)
        if s.auth.api_key:
            kw["api_key"] = s.auth.api_key
        if s.ca_bundle:
            kw["ca_certs"] = s.ca_bundle
        if any(u.startswith("https:") for u in s.urls):
            kw["verify_certs"] = s.verify_tls
        return AsyncElasticsearch(list(s.urls), **kw)

    def _reason(self, exc: Exception) -> str:
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
