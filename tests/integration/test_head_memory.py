"""Memory per connection on every path: after one cheap request, a connection is aiohttp's, and a megabyte
head on it (126 fields each within aiohttp's own field limit, the last line never ended) must be refused at
``connections.max_head_bytes`` before the server spends the memory, for 400 connections at once."""
from __future__ import annotations

import pytest

from testkit.alertd_proc import AlertdProcess
from testkit.big_heads import measure

CONNECTIONS = 400
BOUND_MB = 50


@pytest.fixture
def server(tmp_path) -> AlertdProcess:
    proc = AlertdProcess(tmp_path, {"log": {"level": "warning"}}, serve_args=["--receivers", "0"], nofile=4096)
    proc.start()
    yield proc
    proc.stop()


def test_400_megabyte_heads_after_a_first_request_cost_under_50_mb(server):
    got = measure(server, CONNECTIONS)
    print(got.line())
    assert (got.held_kb - got.before_kb) / 1024 < BOUND_MB, got.line()
    assert got.outcomes["held"] == 0, got.line()  # every one refused, none left holding its head
    assert server.metrics()['alertd_connections_closed_total{reason="head_too_large"}'] >= CONNECTIONS
