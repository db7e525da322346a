"""Choosing the log backend from the settings: apart from logs.py, which the backends import, so the
interface and its implementations do not import each other.

Each backend is imported only when chosen: its client library (elasticsearch, opensearch-py) loads at
startup for the backend in use, not for the others.
"""
from __future__ import annotations

from alertd.enrich.logs import LogBackend
from alertd.enrich.settings import LogSettings


def build_backend(settings: LogSettings) -> LogBackend:
    """The backend ``logs.backend`` names."""
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


__all__ = ["build_backend"]
