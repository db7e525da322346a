"""receiver.max_backlog with real processes: a receiver process (``serve --role receiver``) on a data directory
whose engine is not running yet stores webhooks until the backlog reaches the limit, then answers 503 with
Retry-After naming the backlog and the limit; once an engine started on the same directory (with a receiver
process of its own: the group's gauge is one merged sample) has taken them, the receiver takes webhooks
again. Nothing the receiver refused is stored."""
from __future__ import annotations

from pathlib import Path

from testkit.alertd_proc import AlertdProcess
from testkit.pipeline import wait
from testkit.webhooks import UniqueWebhooks

LIMIT = 5
BACKLOG = "alertd_inbox_backlog_webhooks"
REFUSED = 'alertd_webhooks_rejected_total{reason="backlog"}'


def test_webhooks_past_the_backlog_limit_get_503_until_the_engine_catches_up(tmp_path: Path) -> None:
    config = {"log": {"level": "warning"}, "receiver": {"max_backlog": LIMIT}}
    receiver = AlertdProcess(tmp_path / "receiver", config, serve_args=["--role", "receiver"])
    # The engine with a receiver process of its own: its port's /metrics merges the group's backlog counts.
    engine = AlertdProcess(tmp_path / "engine", config, serve_args=["--receivers", "1"])
    engine.data_dir = receiver.data_dir
    gen = UniqueWebhooks(run="backlog", nodes=20, nodes_per_cluster=2, seed=3)
    try:
        receiver.start()  # no engine: nothing takes what it stores
        for _ in range(LIMIT):
            status, doc, _ = receiver.post(gen.next())
            assert status == 200, doc
        wait("the receiver counts the backlog", lambda: receiver.metrics().get(BACKLOG) == LIMIT, 20, every=0.1)

        refused = gen.next()
        status, doc, headers = receiver.post(refused)
        assert status == 503, doc
        assert headers.get("Retry-After") == "5"
        assert doc == {"error": f"the inbox holds {LIMIT} webhooks not yet processed "
                                f"(receiver.max_backlog {LIMIT}); retry later"}
        assert receiver.post(refused)[0] == 503  # Alertmanager's retry, while the backlog stays
        metrics = receiver.metrics()
        assert metrics.get(REFUSED) == 2 and metrics.get("alertd_webhooks_received_total") == LIMIT
        assert receiver.inbox_pending() == LIMIT  # the refused webhook was not stored
        assert receiver.log_tail().count("is at receiver.max_backlog") == 1  # one warning per 10 s

        engine.start()  # takes the backlog; the receiver reads the engine's mark again
        engine.wait_drained(30)
        wait("the receiver sees the backlog taken", lambda: receiver.metrics().get(BACKLOG) == 0, 20, every=0.1)
        wait("the group's freshest count, one sample", lambda: engine.metrics().get(BACKLOG) == 0, 20, every=0.1)
        status, doc, _ = receiver.post(refused)
        assert status == 200, doc
        assert receiver.metrics().get("alertd_webhooks_received_total") == LIMIT + 1
        engine.wait_drained(30)
        status, data = engine.get_json("/api/v1/incidents?limit=100")
        assert status == 200 and len(data["incidents"]) == LIMIT + 1  # one node each, none lost
    finally:
        receiver.kill9()
        engine.kill9()
