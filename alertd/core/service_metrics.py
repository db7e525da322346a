"""Prometheus metrics: one registry per service instance (tests run several), or, under ``serve --receivers N``,
prometheus_client's multiprocess mode, so that a scrape answered by any process of the group shows the
whole group once.

Multiprocess mode is on when ``PROMETHEUS_MULTIPROC_DIR`` is set (the engine process sets it for itself and
its receivers, alertd/app/receiver_group.py). Every process then writes its values to its own files in that
directory, and ``/metrics`` merges the files of every process: counters and histograms are summed; each
gauge says how its values combine (``multiprocess_mode`` below, with the reason beside it).
"""
from __future__ import annotations

import logging
import os
from typing import Callable, Final, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from alertd.core.version import python_version, version

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own variable


log = logging.getLogger(__name__)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# How each gauge combines over the processes of a group (ignored without multiprocess mode).
# Engine gauges are set by the engine process only; every other process holds 0 (the value a metric starts
# at) or nothing, so the largest value of the live processes is the engine's. "live": a dead process's
# files are dropped (mark_process_dead), so a restarted receiver never leaves a stale value behind.
ENGINE_ONLY: Final = "livemax"
# Every process loads the rules and reloads them on SIGHUP: the group's worst (0 = a process's last reload
# failed; the oldest success time = every live process has rules at least this recent).
EVERY_PROCESS: Final = "livemin"
# One shared quantity measured by several processes: the store's size by whichever process answers the
# scrape (or the leader's housekeeping on PostgreSQL), the inbox backlog by every receiving process about
# once a second. The freshest measurement wins.
LATEST_MEASUREMENT: Final = "livemostrecent"


# Label values known in advance start at 0: a series first scraped at 1 shows no increase() to an alert
# rule (deploy/prometheus/alertd-alerts.yml), so the first refusal after a start would go unnoticed.
REJECT_REASONS = ("unauthorized", "throttled", "too_large", "body_timeout", "schema", "json", "backlog", "store_unavailable")
STORE_OPERATIONS = ("process", "tick", "housekeeping", "append", "audit", "quarantine")
DELIVERY_OUTCOMES = ("delivered", "skipped", "retry", "failed")
# Why the web server closed a connection itself (alertd/web/connections.py, alertd/web/webhook_lane.py).
CONNECTION_CLOSES = ("evicted", "header_timeout", "idle", "head_too_large")
# One process's own quantity: the group's value is the sum over its live processes.
PER_PROCESS_SUM: Final = "livesum"
# Why the engine set a webhook or alert aside (alertd/app/budget.py, Service.process_pending).
SET_ASIDE_CAUSES = ("unreadable", "failed", "overran", "stuck", "attempts")


# Label values that come from alerts (alert names) are bounded: each new value is a new series in every
# scrape, and a site that names alerts per node or per job would otherwise grow /metrics without end.
MAX_ALERTNAMES = 50
OTHER = "other"


class BoundedLabel:
    """A one-label metric that keeps its first ``limit`` values and counts the rest under ``other``."""

    def __init__(self, metric: Counter, limit: int):
        self.metric, self.limit = metric, limit
        self.known: set[str] = set()

    def labels(self, value: str) -> Counter:
        if value not in self.known:
            if len(self.known) >= self.limit:
                if OTHER not in self.known:
                    log.warning("%s: more than %d label values; later ones are counted as %r",
                                self.metric._name, self.limit, OTHER)
                    self.known.add(OTHER)
                return self.metric.labels(OTHER)
            self.known.add(value)
        return self.metric.labels(value)


def multiprocess_dir() -> str | None:
    """The directory of the group's metric files, or None: plain per-instance registries."""
    return os.environ.get(MULTIPROC_ENV) or None


class Metrics:
    def __init__(self) -> None:  # long: one declaration per metric, read as the list of what alertd exports
        self.multiprocess = multiprocess_dir()
        # In multiprocess mode metrics are written to files, not registered: the MultiProcessCollector reads
        # them back (registering them too would export them twice).
        own = None if self.multiprocess else CollectorRegistry()
        self.registry = own or self._multiprocess_registry(self.multiprocess or "")
        self._own = own
        self._before_scrape: list[Callable[[], None]] = []
        self._mirrored: list[Collector] = []
        self._mirrors: dict[str, Counter | Gauge] = {}
        self._mirror_seen: dict[tuple[str, tuple[str, ...]], float] = {}
        self.webhooks = Counter("alertd_webhooks_received_total", "Webhook notifications accepted and stored.", registry=own)
        self.alerts = Counter("alertd_alerts_received_total", "Alerts accepted and stored (redeliveries included: the engine drops them, alertd_alerts_duplicate_total).", registry=own)
        self.rejected = Counter("alertd_webhooks_rejected_total", "Webhook requests refused, by reason.", ["reason"], registry=own)
        self.duplicates = Counter("alertd_alerts_duplicate_total", "Redelivered alerts dropped by the idempotency key.", registry=own)
        self.truncated = Counter("alertd_alerts_truncated_total", "Alerts Alertmanager left out (truncatedAlerts).", registry=own)
        self.webhook_lane = Counter(
            "alertd_webhook_lane_total", "Webhook requests the webhook lane answered itself (outcome \"answered\"), "
            "and connections it handed to aiohttp at a webhook request or at bytes it could not read, by why "
            "(framing, browser, forwarded, too_large, content_type, host, credentials, head, malformed).",
            ["outcome"], registry=own)
        self.connections_open = Gauge("alertd_connections_open", "Client connections open (every route).",
                                      registry=own, multiprocess_mode=PER_PROCESS_SUM)
        self.connections_limit = Gauge(
            "alertd_connections_limit", "The cap on open client connections (connections.max_open, lowered to fit "
            "the file-descriptor limit read at start).", registry=own, multiprocess_mode=PER_PROCESS_SUM)
        self.connections_refused = Counter("alertd_connections_refused_total", "New connections closed at once: the "
                                           "cap was reached and every open connection had proved itself.", registry=own)
        self.connections_closed = Counter(
            "alertd_connections_closed_total", "Connections the server closed itself, by why: evicted (at the cap, "
            "for a new one), header_timeout, idle (keep-alive over), head_too_large (answered 431).", ["reason"],
            registry=own)
        self.log_lines_held_back = Counter(
            "alertd_log_lines_held_back_total", "Warnings and errors a client provoked and that were not written: "
            "one line per cause every 10 s (alertd/web/connections.py), by logger.", ["logger"], registry=own)
        self.accept_errors = Counter("alertd_accept_errors_total", "Failed accepts of new connections (EMFILE: out "
                                     "of file descriptors, ENFILE, ENOBUFS, ENOMEM).", registry=own)
        self.ack_latency = Histogram("alertd_webhook_ack_seconds", "Time from request to stored answer.", buckets=LATENCY_BUCKETS, registry=own)
        self.processing_latency = Histogram(
            "alertd_processing_latency_seconds", "Time from receipt of a webhook to the engine step that took its alerts being committed.",
            buckets=LATENCY_BUCKETS, registry=own)
        self.unclassified_gpu = BoundedLabel(Counter(
            "alertd_unclassified_gpu_alerts_total",
            "Firing alerts that look like GPU alerts (DCGM metric, GPU labels or name) but match no classification "
            f"rule, by alert name (the first {MAX_ALERTNAMES} names; later ones as \"{OTHER}\").",
            ["alertname"], registry=own), MAX_ALERTNAMES)
        self.incidents = Gauge("alertd_incidents", "Incidents held by the engine, by state.", ["state"], registry=own,
                               multiprocess_mode=ENGINE_ONLY)
        self.leader = Gauge("alertd_engine_leader", "1 while this process runs the engine (leader), else 0.", registry=own,
                            multiprocess_mode=ENGINE_ONLY)  # 1 when the group holds the engine
        self.incidents_summarised = Gauge(
            "alertd_incidents_summarised_open", "Open incidents held summarised in memory past processing.detailed_incidents "
            "(node incidents of storms: their timelines in the store only).", registry=own, multiprocess_mode=ENGINE_ONLY)
        self.incidents_summarised_total = Counter(
            "alertd_incidents_summarised_total", "Incidents the engine began to hold summarised (over the budget).",
            registry=own)
        self.incidents_opened = Counter("alertd_incidents_opened_total", "Incidents opened.", registry=own)
        self.incidents_resolved = Counter("alertd_incidents_resolved_total", "Incidents resolved.", registry=own)
        self.inbox_pending = Gauge("alertd_inbox_pending", "Stored alerts not yet through the engine.", registry=own,
                                   multiprocess_mode=ENGINE_ONLY)
        # Every receiving process counts the same store about once a second: the freshest count wins.
        self.inbox_backlog = Gauge("alertd_inbox_backlog_webhooks", "Webhooks stored and not yet taken by the engine "
                                   "(receiver.max_backlog refuses more at its limit).", registry=own,
                                   multiprocess_mode=LATEST_MEASUREMENT)
        self.store_errors = Counter("alertd_store_errors_total", "Store operations that failed.", ["operation"], registry=own)
        self.notifications = Counter("alertd_notifications_total", "Notification deliveries, by target kind and outcome.",
                                     ["target", "outcome"], registry=own)
        self.outbox_pending = Gauge("alertd_outbox_pending", "Notifications waiting for delivery.", registry=own,
                                    multiprocess_mode=ENGINE_ONLY)
        self.reload_ok = Gauge("alertd_rules_last_reload_successful", "Whether the last rule reload succeeded.", registry=own,
                               multiprocess_mode=EVERY_PROCESS)
        self.reload_time = Gauge("alertd_rules_last_reload_success_timestamp_seconds",
                                 "Time of the last successful rule reload.", registry=own, multiprocess_mode=EVERY_PROCESS)
        self.auth_failures = Counter("alertd_auth_failures_total", "Requests refused for missing, wrong or too weak credentials.",
                                     ["surface", "reason"], registry=own)
        self.store_bytes = Gauge("alertd_store_bytes", "Bytes the store takes on disk (SQLite: database, WAL and "
                                 "shared memory; PostgreSQL: the database).", registry=own, multiprocess_mode=LATEST_MEASUREMENT)
        self.set_aside = Counter("alertd_set_aside_total", "Webhooks and alerts the engine set aside (GET "
                                 "/api/v1/quarantine), by cause.", ["cause"], registry=own)
        self.classify_max = Gauge("alertd_classify_seconds_max", "The most CPU seconds one alert's classification "
                                  "took since the engine started.", registry=own, multiprocess_mode=ENGINE_ONLY)
        # Sources besides the webhook (alertd/sources/, docs/sources.md): set on the leader, which runs the watches.
        self.watch_up = Gauge("alertd_source_watch_up", "1 while a source's list-then-watch is connected, by watch "
                              "(0 on a follower, which runs none).", ["watch"], registry=own, multiprocess_mode=ENGINE_ONLY)
        self.watch_relists = Gauge("alertd_source_watch_relists", "Full lists a watch made since the engine started "
                                   "(the first, and one per 410 Gone).", ["watch"], registry=own, multiprocess_mode=ENGINE_ONLY)
        self.cloudevents = Counter("alertd_cloudevents_total", "CloudEvents received, by outcome (stored, invalid).",
                                   ["outcome"], registry=own)
        self.build_info = Gauge("alertd_build_info", "Always 1; the labels say which alertd and Python run.",
                                ["version", "python"], registry=own, multiprocess_mode=EVERY_PROCESS)
        self.build_info.labels(version(), python_version()).set(1)
        for cause in SET_ASIDE_CAUSES:
            self.set_aside.labels(cause)
        for reason in REJECT_REASONS:
            self.rejected.labels(reason)
        for operation in STORE_OPERATIONS:
            self.store_errors.labels(operation)
        for reason in CONNECTION_CLOSES:
            self.connections_closed.labels(reason)

    def expect_deliveries(self, kinds: Iterable[str]) -> None:
        """Each configured notifier's delivery outcomes start at 0 (see REJECT_REASONS)."""
        for kind in kinds:
            for outcome in DELIVERY_OUTCOMES:
                self.notifications.labels(kind, outcome)

    @staticmethod
    def _multiprocess_registry(path: str) -> CollectorRegistry:
        # prometheus_client picks its value class when it is first imported; alertd/cli/main.py sets the variable
        # before that, and this covers an import that came first, the way the library's get_value_class does.
        if not getattr(values.ValueClass, "_multiprocess", False):
            values.ValueClass = values.MultiProcessValue()
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=path)
        return registry

    # ----- what is measured when it is read -----

    def measure_store_bytes(self, measure: Callable[[], float]) -> None:
        """``alertd_store_bytes`` read at each scrape (a few stat() calls). Gauges cannot call back in
        multiprocess mode, so the answering process measures and sets its own value just before."""
        if self._own is not None:
            self.store_bytes.set_function(measure)
        else:
            self._before_scrape.append(lambda: self.store_bytes.set(measure()))

    def histogram(self, name: str, documentation: str, buckets: Iterable[float]) -> Histogram:
        """A histogram of this service's (enrichment's latency); in the group's files in multiprocess mode."""
        return Histogram(name, documentation, buckets=tuple(buckets), registry=self._own)

    def add_collector(self, collector: Collector) -> None:
        """A custom collector (counters kept as plain ints elsewhere). Custom collectors are not read across
        processes, so in multiprocess mode its counters and gauges are copied into the group's files by
        ``publish`` (the engine process calls it every few seconds) and at each scrape."""
        if self._own is not None:
            self._own.register(collector)
        else:
            self._mirrored.append(collector)

    def publish(self) -> None:
        for collector in self._mirrored:
            for family in collector.collect():
                self._mirror(family)

    def _mirror(self, family: Metric) -> None:
        if family.type not in ("counter", "gauge"):
            return
        for sample in family.samples:
            if family.type == "counter" and not sample.name.endswith("_total"):
                continue  # _created: not kept in multiprocess mode
            names = tuple(sorted(sample.labels))
            metric = self._mirrors.get(family.name)
            if metric is None:
                metric = self._mirrors[family.name] = (
                    Counter(family.name, family.documentation, names, registry=None) if family.type == "counter"
                    else Gauge(family.name, family.documentation, names, registry=None, multiprocess_mode=ENGINE_ONLY))
            child = metric.labels(*(sample.labels[n] for n in names)) if names else metric
            if isinstance(child, Gauge):
                child.set(sample.value)
                continue
            key = (family.name, tuple(sample.labels[n] for n in names))
            delta = sample.value - self._mirror_seen.get(key, 0.0)
            if delta > 0:
                child.inc(delta)
                self._mirror_seen[key] = sample.value

    def exposition(self) -> bytes:
        """The text format answer to GET /metrics: what is measured at scrape time first, then the registry."""
        for refresh in self._before_scrape:
            try:
                refresh()
            except Exception:  # a failed measurement leaves the last value; the scrape goes on
                log.exception("measuring a metric before a scrape failed")
        self.publish()
        return generate_latest(self.registry)
