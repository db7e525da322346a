"""Clients that send a megabyte request head after one cheap request on the same connection, and the server's
resident memory meanwhile (bench/head_memory.py and tests/integration/test_head_memory.py).

The head is 126 header fields of 8.1 KB, each within aiohttp's own field limit, the last without its line
ending, so a server that buffers heads keeps all of it until the keep-alive deadline."""
from __future__ import annotations

import socket
import time
from collections import Counter
from dataclasses import dataclass, field

from testkit import raw_http
from testkit.alertd_proc import AlertdProcess

FIELDS, FIELD_BYTES = 126, 8_100
FIRST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def big_head() -> bytes:
    fields = "\r\n".join(f"X-Padding-{i:03d}: {'a' * FIELD_BYTES}" for i in range(FIELDS))  # no last CRLF
    return f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{fields}".encode()


@dataclass
class Held:
    connections: int
    before_kb: int = 0
    held_kb: int = 0  # with every head sent and the connections still open on the client's side
    closed_kb: int = 0  # a second after the client closed them all
    outcomes: Counter[str] = field(default_factory=Counter)  # per connection: the status answered, or "held"

    def line(self) -> str:
        mb = 1024
        return (f"{self.connections} connections, GET /healthz then a {len(big_head()) / 1e6:.2f} MB head: RSS "
                f"{self.before_kb / mb:.0f} -> {self.held_kb / mb:.0f} MB held (+{(self.held_kb - self.before_kb) / mb:.1f}),"
                f" {self.closed_kb / mb:.0f} MB after closing; outcomes {dict(self.outcomes)}")


def one(port: int, head: bytes) -> socket.socket:
    sock = raw_http.connect(port)
    sock.sendall(FIRST)
    answers = raw_http.read_answers(sock, 1, timeout=5.0)
    assert [a.status for a in answers] == [200], answers
    sock.settimeout(5.0)
    try:
        sock.sendall(head)
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        pass  # refused before the head was all sent
    return sock


def outcome(sock: socket.socket) -> str:
    try:
        answers = raw_http.read_answers(sock, 1, timeout=0.2)
    except (ConnectionResetError, OSError):
        return "reset"
    return str(answers[0].status) if answers else ("closed" if raw_http.closed(sock, 0.05) else "held")


def measure(proc: AlertdProcess, connections: int, warmup: int = 10) -> Held:
    """``warmup`` connections first (closed again), then ``connections`` held open with their heads sent."""
    head = big_head()
    for sock in [one(proc.port, head) for _ in range(warmup)]:
        sock.close()
    time.sleep(1.0)
    got = Held(connections, before_kb=proc.proc_status("VmRSS"))
    socks: list[socket.socket] = []
    try:
        for _ in range(connections):
            socks.append(one(proc.port, head))
        time.sleep(1.0)
        got.held_kb = proc.proc_status("VmRSS")
        got.outcomes.update(outcome(sock) for sock in socks)
    finally:
        for sock in socks:
            sock.close()
    time.sleep(1.0)
    got.closed_kb = proc.proc_status("VmRSS")
    return got
