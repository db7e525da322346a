"""The webhook lane (alertd/web/webhook_lane.py) over raw sockets against a real ``alertd serve``.

The lane answers Alertmanager's plain webhooks itself and hands every other request, with the rest of its
connection, to aiohttp. These tests speak HTTP/1.1 byte by byte (keep-alive, pipelining, split writes,
requests the lane must not take, malformed bytes, a stalled body) and read the answers with httptools'
response parser. Which side answered shows in one header: aiohttp names itself in ``Server``, the lane
sends none. Each answer is checked against what aiohttp's route answers for the same request. The last
tests run the server in process, to make the service fail under the lane.
"""
from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from alertd.app.service import Service
from alertd.config.settings import parse_config
from alertd.rules.ruleset import load_rules
from alertd.store.base import StoreUnavailable
from alertd.store.sqlite import SqliteStore
from alertd.web.server import Listen, WebServer
from testkit import raw_http
from testkit.alertd_proc import AlertdProcess, parse_metrics
from testkit.raw_http import Answer, Reader, closed, read_answers
from testkit.process import free_port
from testkit.served import served
from testkit.webhooks import dumps, node_webhook

TOKEN = "lane-token"
MAX_BODY = 64 * 1024
PATH = raw_http.PATH
AT = datetime(2026, 12, 3, 6, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> AlertdProcess:
    proc = AlertdProcess(tmp_path_factory.mktemp("lane"), {
        "log": {"level": "warning"},
        "receiver": {"max_body_bytes": MAX_BODY, "body_timeout": "1s", "auth": {"bearer_token": TOKEN}},
    }, serve_args=["--receivers", "0"])
    proc.start()
    yield proc
    proc.stop()


def connect(server: AlertdProcess) -> socket.socket:
    return raw_http.connect(server.port)


def request(body: bytes, *, token: str | None = TOKEN, **kwargs: Any) -> bytes:
    return raw_http.request(body, token=token, **kwargs)


def metrics(server: AlertdProcess) -> dict[str, float]:
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as resp:
        return parse_metrics(resp.read().decode())


def handed_over(server: AlertdProcess) -> Counter:
    """alertd_webhook_lane_total by outcome, but for the requests the lane answered."""
    prefix = 'alertd_webhook_lane_total{outcome="'
    return Counter({k[len(prefix):-2]: int(v) for k, v in metrics(server).items()
                    if k.startswith(prefix) and k != prefix + 'answered"}'})


def valid(i: int) -> bytes:
    return dumps(node_webhook("lane", f"lane-node-{i}", starts_at=AT))


def exchange(server: AlertdProcess, data: bytes, n: int = 1) -> list[Answer]:
    with connect(server) as sock:
        sock.sendall(data)
        return read_answers(sock, n)


def test_plain_webhooks_on_one_kept_alive_connection_are_answered_by_the_lane(server):
    before = metrics(server)
    with connect(server) as sock:
        reader = Reader()
        for i in range(5):
            sock.sendall(request(valid(i)))
            got = read_answers(sock, i + 1, reader)
            assert len(got) == i + 1
        answers = reader.done
    assert [a.status for a in answers] == [200] * 5
    assert all(a.from_lane for a in answers), answers[0].headers
    assert answers[0].json() == {"status": "stored", "alerts": 8, "truncatedAlerts": 0}
    assert answers[0].headers["connection"] == "keep-alive" and "date" in answers[0].headers
    after = metrics(server)
    assert after["alertd_webhooks_received_total"] - before["alertd_webhooks_received_total"] == 5
    answered = 'alertd_webhook_lane_total{outcome="answered"}'
    assert after[answered] - before.get(answered, 0) == 5


def test_pipelined_requests_are_answered_in_order_across_the_hand_over(server):
    data = request(valid(10)) + b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + request(valid(11))
    answers = exchange(server, data, 3)
    assert [a.status for a in answers] == [200, 200, 200]
    assert [a.from_lane for a in answers] == [True, False, False]  # once handed over, aiohttp keeps the connection
    assert answers[1].body == b"ok\n"
    assert answers[2].json()["alerts"] == 8


def test_a_request_split_across_many_writes_is_read_whole(server):
    data = request(valid(20)) + request(valid(21))
    with connect(server) as sock:
        for i in range(0, len(data), 97):
            sock.sendall(data[i:i + 97])
            time.sleep(0.001)
        answers = read_answers(sock, 2)
    assert [(a.status, a.from_lane) for a in answers] == [(200, True), (200, True)]


NOT_PLAIN = {  # the request, aiohttp's answer, and why the lane handed it over (alertd_webhook_lane_total)
    "chunked": (dict(extra="Transfer-Encoding: chunked\r\n", length=None), 200, "framing"),
    "expect": (dict(extra="Expect: 100-continue\r\n"), 200, "framing"),
    "wrong token": (dict(token="wrong"), 401, "credentials"),
    "no token": (dict(token=None), 401, "credentials"),
    "text/plain": (dict(content_type="text/plain"), 415, "content_type"),
    "foreign origin": (dict(extra="Origin: https://evil.example\r\n"), 403, "browser"),
    "foreign host": (dict(host="rebind.127.0.0.1.nip.io"), 421, "host"),  # DNS rebinding: a page's own name
    "two hosts": (dict(extra="Host: evil.example\r\n"), 400, "framing"),
    "behind a proxy": (dict(extra="X-Forwarded-Proto: https\r\nX-Forwarded-For: 10.0.0.7\r\n"), 200, "forwarded"),
    "PUT": (dict(method="PUT"), 405, None),  # another route's request: not counted
}


@pytest.mark.parametrize("case", NOT_PLAIN)
def test_what_is_not_plain_is_answered_by_aiohttp(server, case):
    kwargs, status, why = NOT_PLAIN[case]
    body = valid(30)
    if case == "chunked":
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    before = handed_over(server)
    answers = exchange(server, request(body, **kwargs))
    assert [(a.status, a.from_lane) for a in answers] == [(status, False)], answers and answers[0].body
    assert handed_over(server) - before == Counter([why] if why else [])


def test_a_body_over_the_limit_is_refused_by_aiohttp_before_it_is_read(server):
    with connect(server) as sock:
        sock.sendall(request(b"", length=MAX_BODY + 1))
        answers = read_answers(sock, 1)
        assert [(a.status, a.from_lane) for a in answers] == [(413, False)]
        assert "exceeds the limit" in answers[0].json()["error"]


def test_a_wrong_token_after_a_lane_request_on_the_same_connection_gets_401(server):
    answers = exchange(server, request(valid(40)) + request(valid(41), token="nope") + request(valid(42)), 3)
    assert [(a.status, a.from_lane) for a in answers] == [(200, True), (401, False), (200, False)]


def test_malformed_bytes_get_aiohttps_400_and_the_connection_closes(server):
    before = handed_over(server)
    with connect(server) as sock:
        sock.sendall(request(valid(50)) + b"POST \x00garbage HTTP/9\r\n\r\n")
        answers = read_answers(sock, 2)
        assert [(a.status, a.from_lane) for a in answers] == [(200, True), (400, False)]
        assert closed(sock)
    assert handed_over(server) - before == Counter(["malformed"])


def changed(i: int, change) -> bytes:
    doc = json.loads(valid(i))
    change(doc)
    return json.dumps(doc).encode()


BAD_BODIES = [b"{", b"[]", b'{"version": "4"}', changed(60, lambda d: d.update(version="3")),
              changed(61, lambda d: d["alerts"][3].update(startsAt="x" + d["alerts"][3]["startsAt"]))]


@pytest.mark.parametrize("body", BAD_BODIES, ids=["truncated", "array", "no alerts", "version 3", "bad time"])
def test_the_lane_and_aiohttp_answer_a_bad_body_alike(server, body):
    lane = exchange(server, request(body))
    routed = exchange(server, request(body, extra="Transfer-Encoding: chunked\r\n", length=None)
                      .replace(body, b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)))
    assert [a.from_lane for a in lane + routed] == [True, False]
    assert lane[0].status == routed[0].status == 400
    assert lane[0].json() == routed[0].json() and lane[0].json()["error"]
    assert lane[0].headers["content-type"] == routed[0].headers["content-type"]


def test_http_1_0_is_answered_and_closed(server):
    with connect(server) as sock:
        sock.sendall(request(valid(70), version="1.0"))
        answers = read_answers(sock, 1)
        assert [(a.status, a.from_lane) for a in answers] == [(200, True)]
        assert answers[0].headers["connection"] == "close"
        assert closed(sock)


def test_a_stalled_body_gets_408_within_the_body_timeout(server):
    before = metrics(server)
    body = valid(80)
    with connect(server) as sock:
        sock.sendall(request(body)[:-len(body) // 2])
        started = time.monotonic()
        answers = read_answers(sock, 1, timeout=8)
        waited = time.monotonic() - started
        assert [(a.status, a.from_lane) for a in answers] == [(408, True)]
        assert closed(sock)
    assert 0.9 <= waited <= 4.0, waited  # body_timeout 1s, checked every second
    after = metrics(server)
    key = 'alertd_webhooks_rejected_total{reason="body_timeout"}'
    assert after.get(key, 0) - before.get(key, 0) == 1


# In process: the service's failures as the lane answers them.

ROOT = Path(__file__).resolve().parents[2]


async def _lane_answer(svc: Service, body: bytes) -> Answer:
    server = WebServer(served(svc), Listen("127.0.0.1", free_port()))
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.listen.port)
        writer.write(request(body, token=None))
        parsed = Reader()
        while not parsed.done and (data := await asyncio.wait_for(reader.read(65536), 10)):
            parsed.parser.feed_data(data)
        writer.close()
        return parsed.done[0]
    finally:
        await server.stop()


@pytest.mark.parametrize("failure, status", [(StoreUnavailable("disk I/O error"), 503), (RuntimeError("boom"), 500)])
async def test_a_store_that_fails_is_answered_so_alertmanager_retries(tmp_path, failure, status):
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}}, "test")
    svc = Service(cfg, SqliteStore(tmp_path / "db.sqlite3"), load_rules(cfg.rule_paths))

    async def failing(*_args):
        raise failure

    svc.receive = failing  # type: ignore[method-assign]
    answer = await _lane_answer(svc, valid(90))
    assert (answer.status, answer.from_lane, answer.headers["connection"]) == \
        (status, True, "keep-alive" if status == 503 else "close")
    assert "retry" in answer.json()["error"]
    if status == 503:
        assert answer.headers["retry-after"] == "5"

