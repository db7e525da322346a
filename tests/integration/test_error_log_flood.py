"""A flood of malformed heads, without credentials, writes a bounded log: aiohttp writes an ERROR traceback for
each head it cannot parse, on a connection it took over after a first request; the server keeps one line per
cause every 10 s and counts the rest."""
from __future__ import annotations

import time

import pytest

from testkit import raw_http
from testkit.alertd_proc import AlertdProcess

HEADS = 300
SECONDS = 30.0  # the flood stops at whichever bound comes first
FIRST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
# A field line without a colon, as a broken client or a scanner sends it: aiohttp answers 400 and logs
MALFORMED = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Broken header line\r\n\r\n"


@pytest.fixture
def server(tmp_path) -> AlertdProcess:
    proc = AlertdProcess(tmp_path, {"log": {"level": "warning"}}, serve_args=["--receivers", "0"])
    proc.start()
    yield proc
    proc.stop()


def test_malformed_heads_after_a_first_request_write_a_bounded_log(server):
    before = server.log_path.stat().st_size
    started, statuses = time.monotonic(), []
    for _ in range(HEADS):
        if time.monotonic() - started > SECONDS:
            break
        with raw_http.connect(server.port) as sock:
            sock.sendall(FIRST)
            statuses += [a.status for a in raw_http.read_answers(sock, 1, timeout=5.0)]
            sock.sendall(MALFORMED)
            statuses += [a.status for a in raw_http.read_answers(sock, 1, timeout=5.0)]
    sent = len(statuses) // 2
    written = server.log_path.stat().st_size - before
    assert sent >= 100 and statuses == [200, 400] * sent, statuses[:6]
    assert written < 16_000, (written, server.log_tail(20))  # about two tracebacks, not one per head
    held = server.metrics().get('alertd_log_lines_held_back_total{logger="aiohttp.server"}', 0.0)
    assert held >= sent - 10
