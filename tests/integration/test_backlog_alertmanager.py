"""receiver.max_backlog against a real Alertmanager: the 503s past the limit are retried and no alert is lost.

A receiver process (``serve --role receiver``) on a data directory whose engine is not running yet stores
webhooks until its backlog reaches the limit, then answers 503. Alertmanager sends it one group per node: the
first groups fill the backlog, the later ones are refused, and Alertmanager's notify stage retries each with a
growing backoff until it succeeds or the flush times out (the larger of group_interval and 10 s). With
group_interval an hour, a refused group can only arrive through that retry, not through a later flush of its
group. Once an engine started on the same directory takes the backlog, the retries land: every node has its
incident, every alert posted to Alertmanager is in the inbox exactly once, and Alertmanager counts every
notification sent and none failed. An answer Alertmanager does not retry (a 4xx) leaves the refused nodes
out until the next flush, an hour later, and fails the test.
"""
from __future__ import annotations

import json
from collections import Counter
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from testkit import services
from testkit.alertd_proc import AlertdProcess, inbox_key_counts, parse_metrics
from tests.support.fixtures import require
from testkit.pipeline import wait
from testkit.process import http
from testkit.webhooks import dcgm_labels

pytestmark = pytest.mark.services

LIMIT = 3
# (cluster, node, GPUs): two nodes a cluster, below the storm threshold, so each node keeps its own incident.
NODES = [(f"retry-c{i // 2}", f"retry-gpu-node-{i:02d}", 1 + i % 2) for i in range(10)]
FIRST, LATER = NODES[:LIMIT], NODES[LIMIT:]  # the first fill the backlog, the later ones get 503
BACKLOG = "alertd_inbox_backlog_webhooks"
REFUSED = 'alertd_webhooks_rejected_total{reason="backlog"}'
WEBHOOK = '{integration="webhook"}'
# Alertmanager's counters: notifications (one per flush of a group) and their HTTP requests (one per attempt).
SENT, FAILED = "alertmanager_notifications_total" + WEBHOOK, "alertmanager_notifications_failed_total" + WEBHOOK
REQUESTS = "alertmanager_notification_requests_total" + WEBHOOK
FAILED_REQUESTS = "alertmanager_notification_requests_failed_total" + WEBHOOK


def counts(metrics: dict[str, float]) -> dict[str, float]:
    """The webhook counters of alertd's or Alertmanager's /metrics, for failure messages."""
    return {k: v for k, v in metrics.items() if k.endswith("_total" + WEBHOOK) or k == BACKLOG
            or k.startswith("alertd_webhooks") and "_created" not in k}


def am_config(url: str) -> str:
    return yaml.safe_dump({
        "route": {"receiver": "alertd", "group_by": ["cluster", "node"], "group_wait": "1s",
                  "group_interval": "1h", "repeat_interval": "4h"},
        "receivers": [{"name": "alertd", "webhook_configs": [{"url": url, "send_resolved": True,
                                                               "max_alerts": 0}]}],
    })


def xid_alerts(nodes: list[tuple[str, str, int]], starts_at: datetime) -> list[dict]:
    return [{"labels": {"alertname": "GPUXidError", "severity": "critical", "xid": "79",
                        **dcgm_labels(cluster, node, gpu)},
             "annotations": {"summary": f"Xid 79 on {node} GPU {gpu}"},
             "generatorURL": "http://prometheus.example:9090/graph?g0.expr=xid",
             "startsAt": starts_at.isoformat(), "endsAt": (starts_at + timedelta(hours=2)).isoformat()}
            for cluster, node, gpus in nodes for gpu in range(gpus)]


def am_post(am: services.RunningService, alerts: list[dict]) -> None:
    status, _, body = http("POST", am.url + "/api/v2/alerts", json.dumps(alerts).encode(),
                           {"Content-Type": "application/json"})
    assert status == 200, body


def am_metrics(am: services.RunningService) -> dict[str, float]:
    status, _, body = http("GET", am.url + "/metrics")
    assert status == 200, body
    return parse_metrics(body.decode())


def am_fingerprints(am: services.RunningService) -> dict[str, str]:
    """Alertmanager's fingerprint of every alert it holds -> its node."""
    status, _, body = http("GET", am.url + "/api/v2/alerts")
    assert status == 200, body
    return {a["fingerprint"]: a["labels"]["node"] for a in json.loads(body)}


def test_alertmanager_retries_webhooks_refused_at_the_backlog_limit_and_none_is_lost(tmp_path: Path) -> None:
    config = {"log": {"level": "warning"}, "receiver": {"max_backlog": LIMIT}}
    receiver = AlertdProcess(tmp_path / "receiver", config, serve_args=["--role", "receiver"])
    engine = AlertdProcess(tmp_path / "engine", config, serve_args=["--receivers", "1"])
    engine.data_dir = receiver.data_dir
    am = None
    try:
        receiver.start()  # no engine: nothing takes what it stores
        cfg = tmp_path / "alertmanager.yml"
        cfg.write_text(am_config(receiver.receiver_url))
        am = require(services.start_alertmanager, cfg, tmp_path / "am")
        # Each post starts its alerts now, not in the past: Alertmanager flushes a new group at once when its
        # first alert started more than group_wait ago, possibly before the node's other alerts joined it (they
        # would wait for the next flush, an hour later). The later nodes are posted after the backlog filled.
        starts: dict[str, datetime] = {}

        def post(nodes: list[tuple[str, str, int]]) -> None:
            now = datetime.now(timezone.utc)
            starts_at = now.replace(microsecond=now.microsecond // 1000 * 1000)  # alertd keys startsAt to the ms
            starts.update((node, starts_at) for _, node, _ in nodes)
            am_post(am, xid_alerts(nodes, starts_at))

        post(FIRST)
        wait("the first groups fill the backlog", lambda: receiver.metrics().get(BACKLOG) == LIMIT, 20, 0.2,
             receiver.log_tail)
        post(LATER)

        def refused_and_retried() -> bool:  # every later group refused, and at least one again on a retry
            return (receiver.metrics().get(REFUSED, 0) > len(LATER)
                    and am_metrics(am).get(FAILED_REQUESTS, 0) > len(LATER))
        wait("Alertmanager's webhooks refused with 503, and retried", refused_and_retried, 30, 0.2,
             lambda: (counts(receiver.metrics()), counts(am_metrics(am)), am.log_tail(3)))
        assert receiver.metrics().get("alertd_webhooks_received_total") == len(FIRST)

        posted = am_fingerprints(am)
        assert Counter(posted.values()) == {node: gpus for _, node, gpus in NODES}
        expected = {f"{starts[node].timestamp():.3f}|firing|{fp}" for fp, node in posted.items()}

        engine.start()  # takes the backlog; the receiver takes webhooks again, Alertmanager's retries land

        def incident_nodes() -> Counter:
            status, data = engine.get_json("/api/v1/incidents?limit=100")
            assert status == 200, data
            return Counter(i["node"] for i in data["incidents"])

        def stored() -> Counter:
            with closing(engine.db()) as conn:
                return inbox_key_counts(conn)

        wait("every node's incident", lambda: set(incident_nodes()) == {n for _, n, _ in NODES}, 90, 0.2,
             lambda: (incident_nodes(), counts(receiver.metrics()), counts(am_metrics(am)), am.log_tail(3)))
        engine.wait_drained(30)
        wait("every posted alert in the inbox", lambda: set(stored()) >= expected, 30, 0.2,
             lambda: sorted(expected - set(stored())))

        keys = stored()
        assert set(keys) == expected and all(n == 1 for n in keys.values()), keys  # each alert once, nothing else
        status, data = engine.get_json("/api/v1/incidents?limit=100")
        assert status == 200, data
        members = {i["node"]: i["memberCount"] for i in data["incidents"]}
        assert members == {node: gpus for _, node, gpus in NODES}, data  # one incident per node, none missing
        assert receiver.metrics().get("alertd_webhooks_received_total") == len(NODES)  # each group stored once
        assert not engine.metrics().get("alertd_alerts_duplicate_total")

        am_counts = counts(am_metrics(am))
        assert am_counts[SENT] == len(NODES) and not am_counts.get(FAILED), am_counts  # one per group, all sent
        # Every request that failed was a 503 refusal, retried until one succeeded: one success per group.
        assert am_counts[FAILED_REQUESTS] == receiver.metrics().get(REFUSED), am_counts
        assert am_counts[REQUESTS] == len(NODES) + am_counts[FAILED_REQUESTS], am_counts
    finally:
        if am is not None:
            am.stop()
        receiver.kill9()
        engine.kill9()
