"""A password guesser behind Alertmanager's own address (a NAT, a shared node) never costs it a webhook.

Alertmanager does not retry a 4xx (notify/util.go ``Retrier.Check`` retries 5xx only; the webhook integration
adds no codes), so a 429 answered to its right token is an alert lost. The guesser tries 21 wrong tokens a
minute, twice the throttle's refill, after a burst that empties its bucket; Alertmanager sends 30 webhooks from
the same address meanwhile. All 30 are stored, while the guesser stays throttled."""
from __future__ import annotations

import http.client
import threading
import time
from datetime import datetime, timezone

import pytest

from testkit.alertd_proc import AlertdProcess
from testkit.webhooks import dumps, node_webhook

TOKEN = "rcv-5b1f0c7e93a24d68be10"
SHARED = "127.0.0.7"  # Alertmanager's address, and the guesser's
WEBHOOKS, EVERY = 30, 0.5  # Alertmanager: one every half second
GUESSES_A_MINUTE = 21
AT = datetime(2026, 12, 6, 4, 0, tzinfo=timezone.utc)


@pytest.fixture
def server(tmp_path) -> AlertdProcess:
    (tmp_path / "receiver.token").write_text(TOKEN + "\n")
    proc = AlertdProcess(tmp_path, {"log": {"level": "warning"},
                                    "receiver": {"auth": {"bearer_token_file": str(tmp_path / "receiver.token")}}},
                         serve_args=["--receivers", "0"])
    proc.start()
    yield proc
    proc.stop()


def post(server: AlertdProcess, body: bytes, token: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=15, source_address=(SHARED, 0))
    try:
        conn.request("POST", "/api/v1/alerts/alertmanager", body, {"Content-Type": "application/json",
                                                                   "Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        return response.status, response.read()
    except OSError:
        return 0, b""
    finally:
        conn.close()


def test_alertmanagers_webhooks_are_all_stored_while_a_guesser_at_its_address_is_throttled(server):
    guesses: list[int] = []
    burst = [post(server, b"{}", f"guess-{i:04d}-0123456789ab")[0] for i in range(10)]
    assert burst == [401] * 10  # the bucket of the shared address is empty now
    stop = threading.Event()

    def guess(n: int) -> None:
        guesses.append(post(server, b"{}", f"guess-{n:04d}-0123456789ab")[0])

    def guesser() -> None:
        threads, n = [], 10
        while not stop.wait(60 / GUESSES_A_MINUTE) and n < 40:  # each try on its own: a 429 is held back
            threads.append(threading.Thread(target=guess, args=(n,)))
            threads[-1].start()
            n += 1
        for thread in threads:
            thread.join(timeout=20)

    running = threading.Thread(target=guesser)
    running.start()
    answers = []
    try:
        for i in range(WEBHOOKS):
            answers.append(post(server, dumps(node_webhook("shared", f"shared-node-{i}", starts_at=AT)), TOKEN))
            time.sleep(EVERY)
    finally:
        stop.set()
        running.join(timeout=30)
    assert [status for status, _ in answers] == [200] * WEBHOOKS, answers
    assert all(b'"stored"' in body for _, body in answers)
    assert guesses.count(429) >= 3 and set(guesses) <= {401, 429}, guesses  # the guesser stayed throttled
    server.wait_drained()
    assert server.metrics().get('alertd_webhooks_rejected_total{reason="throttled"}', 0.0) == guesses.count(429)
