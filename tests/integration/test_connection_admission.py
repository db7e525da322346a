"""Admission by what a connection has proven, at ``ulimit -n 256`` against a real ``alertd serve``, on raw
loopback sockets: token holders that fill the connection cap with idle kept-alive connections, and TLS
handshakes left half open, each take their share and no more, and the readiness probe and a new webhook are
still answered. Every loop is bounded in count and in time."""
from __future__ import annotations

import socket
import ssl
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.integration.test_tls import client_ctx, make_pki
from testkit import raw_http
from testkit.alertd_proc import AlertdProcess, parse_metrics
from testkit.raw_http import read_answers
from testkit.webhooks import dumps, node_webhook

TOKEN = "admission-token-0123456789"
NOFILE = 256
AT = datetime(2026, 12, 6, 4, 0, tzinfo=timezone.utc)
NEW = 20  # new requests while the cap is held: half readiness probes, half webhooks


def webhook(i: int) -> bytes:
    return raw_http.request(dumps(node_webhook("admission", f"admission-node-{i}", starts_at=AT)), token=TOKEN)


READYZ = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture
def server(tmp_path) -> AlertdProcess:
    proc = AlertdProcess(tmp_path, {"log": {"level": "warning"}, "receiver": {"auth": {"bearer_token": TOKEN}},
                                    "connections": {"header_timeout": "60s"}},
                         serve_args=["--receivers", "0"], nofile=NOFILE)
    proc.start()
    yield proc
    proc.stop()


def test_token_holders_filling_the_cap_leave_readyz_and_new_webhooks_answered(server):
    cap = int(server.metrics()["alertd_connections_limit"])
    held: list[socket.socket] = []
    answered, took = [], []
    try:
        for i in range(cap):  # every slot: a kept-alive connection that sent one authenticated webhook
            sock = raw_http.connect(server.port)
            sock.sendall(webhook(i))
            if [a.status for a in read_answers(sock, 1, timeout=5)] != [200]:
                sock.close()
                break
            held.append(sock)
        assert len(held) >= cap - 2, (len(held), cap)
        for i in range(NEW):
            started = time.monotonic()
            with raw_http.connect(server.port) as sock:
                sock.sendall(READYZ if i % 2 == 0 else webhook(1000 + i))
                answered += [a.status for a in read_answers(sock, 1, timeout=3)]
            took.append(time.monotonic() - started)
    finally:
        for sock in held:
            sock.close()
    assert answered == [200] * NEW, answered
    assert max(took) < 1.0, took


class TlsAlertd(AlertdProcess):
    """alertd serve on HTTPS: ready when /readyz answers over TLS."""

    def __init__(self, workdir: Path, config: dict, pki: Path, **kwargs):
        super().__init__(workdir, config, **kwargs)
        self.pki = pki

    def get(self, path: str, timeout: float = 3.0) -> tuple[int, bytes]:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as raw:
            with client_ctx(self.pki).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
                answers = read_answers(tls, 1, timeout=timeout)
                return (answers[0].status, answers[0].body) if answers else (0, b"")

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.alive(), self.log_tail()
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except (OSError, ssl.SSLError):
                pass
            time.sleep(0.1)
        raise AssertionError(self.log_tail())


def start_tls_server(tmp_path: Path, header_timeout: str) -> TlsAlertd:
    pki = tmp_path / "pki"
    make_pki(pki)
    proc = TlsAlertd(tmp_path, {"log": {"level": "warning"}, "receiver": {"auth": {"bearer_token": TOKEN}},
                                "tls": {"cert_file": str(pki / "server1.crt"), "key_file": str(pki / "server1.key")},
                                "connections": {"header_timeout": header_timeout}},
                     pki, serve_args=["--receivers", "0"], nofile=NOFILE)
    return proc.start()


@pytest.fixture
def tls_server(tmp_path) -> TlsAlertd:
    proc = start_tls_server(tmp_path, "30s")
    yield proc
    proc.stop()


def test_a_tls_handshake_that_never_ends_is_closed_at_the_header_deadline(tmp_path):
    proc = start_tls_server(tmp_path, "2s")
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=5) as sock:
            sock.sendall(b"\x16\x03\x01\x00")  # the first bytes of a ClientHello, and nothing more
            started = time.monotonic()
            assert raw_http.closed(sock, timeout=6)
            waited = time.monotonic() - started
        metrics = parse_metrics(proc.get("/metrics")[1].decode())
    finally:
        proc.stop()
    assert 1.5 <= waited <= 4.0, waited
    assert metrics['alertd_connections_closed_total{reason="header_timeout"}'] >= 1


def test_half_open_tls_handshakes_are_counted_and_leave_room_for_a_new_tls_client(tls_server):
    cap = int(parse_metrics(tls_server.get("/metrics")[1].decode())["alertd_connections_limit"])
    half_open: list[socket.socket] = []
    statuses, took = [], []
    try:
        for _ in range(NOFILE):  # more than the descriptors: connections that never send their ClientHello
            try:
                half_open.append(socket.create_connection(("127.0.0.1", tls_server.port), timeout=2))
            except OSError:
                break
        time.sleep(0.5)
        for _ in range(5):
            started = time.monotonic()
            try:
                statuses.append(tls_server.get("/readyz", timeout=3)[0])
            except (OSError, ssl.SSLError):
                statuses.append(0)
            took.append(time.monotonic() - started)
        metrics = parse_metrics(tls_server.get("/metrics")[1].decode())
    finally:
        for sock in half_open:
            sock.close()
    assert statuses == [200] * 5, (statuses, took)
    assert max(took) < 1.0, took
    assert metrics["alertd_connections_open"] <= cap
    assert metrics['alertd_connections_closed_total{reason="evicted"}'] >= len(half_open) - cap
