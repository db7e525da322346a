"""Prometheus metrics, one registry per service instance (tests run several)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.webhooks = Counter("alertd_webhooks_received_total", "Webhook notifications accepted and stored.", registry=r)
        self.alerts = Counter("alertd_alerts_received_total", "Alerts accepted and stored (after dedup).", registry=r)
        self.rejected = Counter("alertd_webhooks_rejected_total", "Webhook requests refused, by reason.", ["reason"], registry=r)
        self.duplicates = Counter("alertd_alerts_duplicate_total", "Redelivered alerts dropped by the idempotency key.", registry=r)
        self.truncated = Counter("alertd_alerts_truncated_total", "Alerts Alertmanager left out (truncatedAlerts).", registry=r)
        self.ack_latency = Histogram("alertd_webhook_ack_seconds", "Time from request to stored answer.", buckets=LATENCY_BUCKETS, registry=r)
        self.processing_latency = Histogram(
            "alertd_processing_latency_seconds", "Time from receipt of an alert to its engine step being committed.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.unclassified_gpu = Counter(
            "alertd_unclassified_gpu_alerts_total",
            "Firing alerts that look like GPU alerts (DCGM metric, GPU labels or name) but match no classification rule.",
            ["alertname"], registry=r)
        self.incidents = Gauge("alertd_incidents", "Incidents held by the engine, by state.", ["state"], registry=r)
        self.leader = Gauge("alertd_engine_leader", "1 while this process runs the engine (leader), else 0.", registry=r)
        self.incidents_opened = Counter("alertd_incidents_opened_total", "Incidents opened.", registry=r)
        self.incidents_resolved = Counter("alertd_incidents_resolved_total", "Incidents resolved.", registry=r)
        self.inbox_pending = Gauge("alertd_inbox_pending", "Stored alerts not yet through the engine.", registry=r)
        self.store_errors = Counter("alertd_store_errors_total", "Store operations that failed.", ["operation"], registry=r)
        self.notifications = Counter("alertd_notifications_total", "Notification deliveries, by target kind and outcome.",
                                     ["target", "outcome"], registry=r)
        self.outbox_pending = Gauge("alertd_outbox_pending", "Notifications waiting for delivery.", registry=r)
        self.reload_ok = Gauge("alertd_rules_last_reload_successful", "Whether the last rule reload succeeded.", registry=r)
        self.reload_time = Gauge("alertd_rules_last_reload_success_timestamp_seconds", "Time of the last successful rule reload.", registry=r)
        self.auth_failures = Counter("alertd_auth_failures_total", "Requests refused for missing, wrong or too weak credentials.",
                                     ["surface", "reason"], registry=r)
        self.store_bytes = Gauge("alertd_store_bytes", "Bytes the store takes on disk (SQLite: database, WAL and "
                                 "shared memory; PostgreSQL: the database).", registry=r)
