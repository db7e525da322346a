"""What one client connection may cost a real ``alertd serve`` (the ``connections`` section, docs/security.md),
spoken byte by byte on raw loopback sockets: a head trickled a byte a second, empty lines that start no
request, an idle connection aiohttp holds, heads over the limits, and a flood of idle connections at a low
``ulimit -n`` while Alertmanager's next webhook and the readiness probe still get through.

Every loop is bounded in count and in time; the deadlines are configured in seconds so that each test takes a
few."""
from __future__ import annotations

import socket
import time
from datetime import datetime, timezone

import pytest

from testkit import raw_http
from testkit.alertd_proc import AlertdProcess
from testkit.process import http
from testkit.raw_http import Reader, read_answers
from testkit.webhooks import dumps, node_webhook

TOKEN = "limits-token"
AT = datetime(2026, 12, 6, 4, 0, tzinfo=timezone.utc)
HEADER_TIMEOUT = 2.0
KEEPALIVE = 2.0
SLACK = 1.5  # the server checks its deadlines four times per deadline; scheduling on two shared cores


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> AlertdProcess:
    proc = AlertdProcess(tmp_path_factory.mktemp("limits"), {
        "log": {"level": "warning"},
        "receiver": {"auth": {"bearer_token": TOKEN}},
        "connections": {"header_timeout": f"{HEADER_TIMEOUT:g}s", "keepalive_timeout": f"{KEEPALIVE:g}s"},
    })
    proc.start()
    yield proc
    proc.stop()


def valid(i: int) -> bytes:
    return dumps(node_webhook("limits", f"limits-node-{i}", starts_at=AT))


def request(body: bytes, **kwargs) -> bytes:
    return raw_http.request(body, token=TOKEN, **kwargs)


def counter(server: AlertdProcess, name: str) -> float:
    return server.metrics().get(name, 0.0)


CLOSED_BY = 'alertd_connections_closed_total{reason="%s"}'


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"", every: float = 0.5) -> float | None:
    """Seconds until the peer closed ``sock`` (sending ``trickle`` every ``every`` s meanwhile), or None if it was
    still open after ``seconds``. What the peer answers first is read and dropped."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            if trickle:
                sock.sendall(trickle)
            sock.settimeout(every)
            while sock.recv(65536):  # an answer before the close (a 408): read on
                pass
            return time.monotonic() - started
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
    return None


def test_a_webhook_head_sent_a_byte_a_second_is_closed_at_the_header_deadline(server):
    before = counter(server, CLOSED_BY % "header_timeout")
    head = request(valid(1)).split(b"\r\n\r\n")[0] + b"\r\n\r\n"
    reader = Reader()
    with raw_http.connect(server.port) as sock:
        started = time.monotonic()
        for byte in head[:20]:  # one byte a second, for at most 20 s; the deadline is 2 s
            sock.sendall(bytes([byte]))
            answers = read_answers(sock, 1, reader, timeout=1.0)
            if answers:
                break
        waited = time.monotonic() - started
        assert [(a.status, a.from_lane) for a in reader.done] == [(408, True)]
        assert "head" in reader.done[0].json()["error"]
        assert raw_http.closed(sock)
    assert waited <= HEADER_TIMEOUT + SLACK, waited
    assert counter(server, CLOSED_BY % "header_timeout") - before == 1


def test_a_connection_that_sends_nothing_is_closed_at_the_header_deadline(server):
    with raw_http.connect(server.port) as sock:
        waited = closed_within(sock, 10)
    assert waited is not None and HEADER_TIMEOUT - 0.5 <= waited <= HEADER_TIMEOUT + SLACK, waited


def test_empty_lines_after_a_webhook_do_not_keep_the_connection_open(server):
    before = counter(server, CLOSED_BY % "idle")
    with raw_http.connect(server.port) as sock:
        sock.sendall(request(valid(2)))
        assert [(a.status, a.from_lane) for a in read_answers(sock, 1)] == [(200, True)]
        waited = closed_within(sock, 12, trickle=b"\r\n", every=0.25)  # CRLF four times a second
    assert waited is not None and KEEPALIVE - 0.5 <= waited <= KEEPALIVE + SLACK, waited
    assert counter(server, CLOSED_BY % "idle") - before == 1


def test_a_connection_handed_to_aiohttp_keeps_the_configured_keep_alive_not_3630_s(server):
    with raw_http.connect(server.port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answers = read_answers(sock, 1)
        assert [(a.status, a.from_lane) for a in answers] == [(200, False)]  # aiohttp's answer
        waited = closed_within(sock, 12, trickle=b"\r\n", every=0.25)
    assert waited is not None and waited <= KEEPALIVE + SLACK, waited


def _headers(count: int, size: int) -> str:
    return "".join(f"X-Padding-{i}: {'a' * size}\r\n" for i in range(count))


OVERSIZED = {  # the request, the answer; the webhook's own path with the right token unless said otherwise
    "one 100 KB header": (dict(extra=_headers(1, 100_000)), 431),
    "8,000 headers": (dict(extra=_headers(8_000, 4)), 431),
    "100 headers of 700 bytes: each within aiohttp's limits, the head over 64 KiB": (dict(extra=_headers(100, 700)), 431),
    "a 9,000-byte request line": (dict(path=raw_http.PATH + "?" + "a" * 9_000), 414),
    "a 100 KB header on another route": (dict(method="GET", path="/healthz", extra=_headers(1, 100_000)), 431),
}


@pytest.mark.parametrize("case", OVERSIZED)
def test_a_head_over_the_limits_is_refused_and_the_connection_closed(server, case):
    kwargs, status = OVERSIZED[case]
    before = counter(server, CLOSED_BY % "head_too_large")
    with raw_http.connect(server.port) as sock:
        try:
            sock.sendall(request(valid(3), **kwargs))
        except (ConnectionResetError, BrokenPipeError):
            pass  # refused before the last bytes were sent: the answer is still there to read
        answers = read_answers(sock, 1)
        assert [(a.status, a.from_lane) for a in answers] == [(status, True)]
        assert answers[0].headers["connection"] == "close" and "connections.max_" in answers[0].json()["error"]
        assert raw_http.closed(sock)
    assert counter(server, CLOSED_BY % "head_too_large") - before == 1


def test_heads_within_the_limits_still_reach_both_paths(server):
    near = _headers(100, 500)  # 100 headers, 50 KB: under every limit
    with raw_http.connect(server.port) as sock:
        sock.sendall(request(valid(4), extra=near) + f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{near}\r\n".encode())
        answers = read_answers(sock, 2)
    assert [(a.status, a.from_lane) for a in answers] == [(200, True), (200, False)]


# At a low descriptor limit: the cap below it, a flood of idle connections, the next webhook.

NOFILE = 256
FLOOD = 240


@pytest.fixture
def low_nofile(tmp_path) -> AlertdProcess:
    proc = AlertdProcess(tmp_path, {
        "log": {"level": "info"},
        "receiver": {"auth": {"bearer_token": TOKEN}},
        "connections": {"header_timeout": "60s"},  # the flood stays for the whole test
    }, nofile=NOFILE)
    proc.start()
    yield proc
    proc.stop()


def test_idle_connections_at_a_low_nofile_leave_room_for_the_next_webhook_and_the_probe(low_nofile):
    flood: list[socket.socket] = []
    try:
        for _ in range(FLOOD):  # 240 connections that never send a byte
            flood.append(socket.create_connection(("127.0.0.1", low_nofile.port), timeout=5))
        time.sleep(0.5)  # every one accepted (or refused) by now
        for i in range(3):
            started = time.monotonic()
            status, _, body = http("POST", low_nofile.receiver_url, valid(10 + i),
                                   {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}, timeout=5)
            took = time.monotonic() - started
            assert status == 200 and took < 1.0, (status, body, took)
            started = time.monotonic()
            assert http("GET", low_nofile.url + "/readyz", timeout=5)[0] == 200
            assert time.monotonic() - started < 1.0
        metrics = low_nofile.metrics()
    finally:
        for sock in flood:
            sock.close()
    cap = metrics["alertd_connections_limit"]
    assert 8 <= cap < NOFILE - 64  # below the limit, less what the process holds and the reserve
    assert metrics["alertd_connections_open"] <= cap
    assert metrics[CLOSED_BY % "evicted"] >= FLOOD - cap
    log = low_nofile.log_path.read_text(errors="replace")
    assert "Too many open files" not in log and "out of system resource" not in log


@pytest.fixture
def small_cap(tmp_path) -> AlertdProcess:
    proc = AlertdProcess(tmp_path, {
        "log": {"level": "warning"},
        "receiver": {"auth": {"bearer_token": TOKEN}},
        "connections": {"max_open": 8},
    }, serve_args=["--receivers", "0"])
    proc.start()
    yield proc
    proc.stop()


def test_at_the_cap_with_every_connection_proven_the_longest_idle_makes_room(small_cap):
    held: list[socket.socket] = []
    try:
        for i in range(8):  # kept-alive connections of one principal: each has sent an authenticated webhook
            sock = raw_http.connect(small_cap.port)
            sock.sendall(request(valid(20 + i)))
            assert [a.status for a in read_answers(sock, 1)] == [200]
            held.append(sock)
        with raw_http.connect(small_cap.port) as extra:
            started = time.monotonic()
            extra.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert [a.status for a in read_answers(extra, 1, timeout=2)] == [200]
            assert time.monotonic() - started < 1.0
        assert raw_http.closed(held[0], timeout=2)  # the longest idle of the principal holding the most
        held[1].sendall(request(valid(30)))  # the others keep working
        assert [a.status for a in read_answers(held[1], 1)] == [200]
        metrics = small_cap.metrics()
    finally:
        for sock in held:
            sock.close()
    assert metrics['alertd_connections_closed_total{reason="evicted"}'] >= 1
    assert metrics["alertd_connections_limit"] == 8
