"""Enrichment on ``/metrics``: latency histogram, log query outcomes, Kubernetes API calls.

The counters live on the searcher and the Kubernetes client (plain ints, no
Prometheus on the hot path); a collector reads them at scrape time.
"""
from __future__ import annotations

from typing import Iterator, Protocol

from prometheus_client import Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric


from alertd.enrich.host import HasMetrics
from alertd.enrich.kube import KubeContext
from alertd.enrich.searcher import LogSearcher


class Counted(Protocol):
    """What the collector reads from the enricher (enrich/enricher.py): its searcher and Kubernetes context."""

    searcher: LogSearcher | None
    kube: KubeContext | None


def register(enricher: Counted, metrics: HasMetrics) -> Histogram:
    """Register the enricher's metrics with the service's (alertd/core/service_metrics.py); returns the histogram it
    observes latencies in."""
    histogram = metrics.histogram(
        "alertd_enrichment_seconds", "Time from an incident change to its enrichment being written.",
        buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60))
    metrics.add_collector(StatsCollector(enricher))
    return histogram


class StatsCollector:
    """Exposes the searcher's and the Kubernetes client's counters on /metrics."""

    def __init__(self, enricher: Counted):
        self.enricher = enricher

    def collect(self) -> Iterator[Metric]:  # pragma: no cover - exercised through /metrics
        e = self.enricher
        if e.searcher is not None:
            s = e.searcher.stats
            fam = CounterMetricFamily("alertd_enrichment_log_queries", "Log queries by outcome.", labels=["outcome"])
            fam.add_metric(["cache_hit"], s.cache_hits)
            fam.add_metric(["joined"], s.joined)
            fam.add_metric(["searched"], s.searched)
            fam.add_metric(["failed"], s.failures)
            yield fam
            yield CounterMetricFamily("alertd_enrichment_log_requests", "Requests sent to the log backend.",
                                      value=e.searcher.backend.requests)
        if e.kube is not None:
            yield CounterMetricFamily("alertd_enrichment_kube_requests", "Kubernetes API requests.", value=e.kube.stats.calls)
            yield CounterMetricFamily("alertd_enrichment_kube_errors", "Failed Kubernetes API requests.",
                                      value=e.kube.stats.errors)


__all__ = ["StatsCollector", "register"]
