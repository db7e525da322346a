"""Enrichment: kernel-log evidence (Elasticsearch, OpenSearch, Graylog) and Kubernetes context.

``Enricher.from_settings(cfg.enrich)`` builds it; the service calls
``bind``, ``submit(changes)`` after each committed step, and ``close``.
See docs/enrichment.md.
"""
from alertd.enrich.enricher import Enricher
from alertd.enrich.settings import EnrichSettings

__all__ = ["Enricher", "EnrichSettings"]
