"""The webhook lane's hand-over, byte for byte, on a fake transport: what aiohttp receives when the lane
gives a connection up, that the lane never holds more than a head's worth of bytes it cannot parse, and its
deadlines on an injected clock."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from aiohttp import web

from alertd.config.connections import ConnectionSettings
from alertd.core.service_metrics import Metrics
from alertd.web.connections import ConnectionBudget
from alertd.web.auth import AUTH
from alertd.web.guard import EDGE, EdgePolicy
from alertd.web.keys import SERVICE
from alertd.web.webhook_lane import Lane, LaneConnection

LIMITS = ConnectionSettings()


class Recorder(asyncio.Protocol):
    """Stands in for aiohttp's request handler: keeps what it is given."""

    def __init__(self) -> None:
        self.made = False
        self.data = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True

    def data_received(self, data: bytes) -> None:
        self.data += data


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.protocol: asyncio.BaseProtocol | None = None
        self.written = b""
        self.reading = True
        self.closed = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _handed_over(conn: object, why: str) -> float:
    return conn.lane.svc.metrics.webhook_lane.labels(why)._value.get()  # type: ignore[attr-defined]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _connection(clock: Clock | None = None) -> tuple[LaneConnection, Transport, list[Recorder]]:
    app = web.Application()
    metrics = Metrics()
    app[SERVICE] = SimpleNamespace(cfg=SimpleNamespace(max_body_bytes=1 << 20, body_timeout=30.0),  # type: ignore[assignment]
                                   metrics=metrics, backlog_refusal=lambda: "the inbox is behind")
    app[AUTH] = SimpleNamespace(api=SimpleNamespace(enabled=True), receiver=SimpleNamespace(enabled=False))  # type: ignore[assignment]
    app[EDGE] = EdgePolicy()
    handed: list[Recorder] = []

    def fallback() -> Recorder:
        handed.append(Recorder())
        return handed[-1]

    clock = clock or Clock()
    lane = Lane(app, fallback, LIMITS, ConnectionBudget(16, metrics, clock), clock)  # not started: swept by hand
    conn = lane()
    transport = Transport()
    conn.connection_made(transport)
    return conn, transport, handed


def _closed(conn: LaneConnection, reason: str) -> float:
    return conn.lane.svc.metrics.connections_closed.labels(reason)._value.get()  # type: ignore[attr-defined]


async def test_empty_lines_past_a_heads_worth_get_431_and_nothing_more_is_held():
    conn, transport, handed = _connection()
    flood = b"\r\n" * (LIMITS.max_head_bytes // 2 + 1)
    for i in range(0, len(flood), 4096):
        conn.data_received(flood[i:i + 4096])
    conn.data_received(b"\r\n" * 1000)
    assert not handed and transport.written.startswith(b"HTTP/1.1 431 ") and transport.closed
    assert len(conn.buf) == 0
    assert _closed(conn, "head_too_large") == 1


async def test_a_head_trickled_past_the_header_deadline_is_closed_with_408_never_handed_on():
    clock = Clock()
    conn, transport, handed = _connection(clock)
    head = b"POST /api/v1/alerts/alertmanager HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    for byte in range(int(LIMITS.header_timeout) + 2):  # one byte a second
        conn.data_received(head[byte:byte + 1])
        clock.now += 1.0
        conn.sweep(clock.now)
        if transport.closed:
            break
    assert not handed and transport.closed and transport.written.startswith(b"HTTP/1.1 408 ")
    assert byte == int(LIMITS.header_timeout)  # closed once the deadline passed, not before
    assert _closed(conn, "header_timeout") == 1


async def test_empty_lines_do_not_keep_a_connection_open():
    clock = Clock()
    conn, transport, handed = _connection(clock)
    conn.data_received(b"POST /api/v1/alerts/alertmanager HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    await asyncio.sleep(0.05)  # answered by the lane (503: the fake inbox is behind): the keep-alive deadline starts
    assert transport.written.startswith(b"HTTP/1.1 503 ") and not transport.closed
    for second in range(int(LIMITS.keepalive_timeout) + 10):
        clock.now += 1.0
        conn.data_received(b"\r\n")
        conn.sweep(clock.now)
        if transport.closed:
            break
    assert transport.closed and second == int(LIMITS.keepalive_timeout)
    assert not handed and _closed(conn, "idle") == 1


async def test_a_request_the_lane_does_not_take_reaches_aiohttp_from_its_first_byte():
    conn, transport, handed = _connection()
    data = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /readyz HTTP/1.1\r\n"
    conn.data_received(data[:10])
    assert not handed
    conn.data_received(data[10:])
    # the lane stays the protocol: a read that ends inside a head waits for the head's end
    assert len(handed) == 1 and handed[0].made and handed[0].data == b"" and transport.written == b""
    conn.data_received(b"Host: 127.0.0.1\r\n\r\n")
    assert handed[0].data == data + b"Host: 127.0.0.1\r\n\r\n"
    assert _handed_over(conn, "route") == 0 and _handed_over(conn, "malformed") == 0  # another route: not counted


# After the hand-over: every later head on aiohttp's connection within the same limits.

FIELD = b"X-Padding: " + b"a" * 8_100 + b"\r\n"  # within max_field_bytes; 126 of them are a megabyte


async def test_a_later_head_over_the_limit_is_refused_before_aiohttp_holds_it():
    conn, transport, handed = _connection()
    first = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    conn.data_received(first)
    conn.data_received(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    sent = 0
    for _ in range(126):  # a 1 MB head without its last line ending, in reads of one field
        if transport.closed:
            break
        conn.data_received(FIELD)
        sent += len(FIELD)
    assert handed[0].data == first  # aiohttp was given nothing of the second head
    assert transport.written.startswith(b"HTTP/1.1 431 ") and b"connections.max_head_bytes" in transport.written
    assert transport.closed and sent <= LIMITS.max_head_bytes + 2 * len(FIELD)  # a field is read at the next line
    assert _closed(conn, "head_too_large") == 1


async def test_a_later_head_too_large_waits_for_aiohttps_answer_in_hand_before_the_431():
    conn, transport, handed = _connection()
    conn.data_received(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    handed[0]._request_in_progress = True  # type: ignore[attr-defined]  # aiohttp is answering the first
    conn.data_received(b"GET /healthz HTTP/1.1\r\n" + b"X-Padding: " + b"a" * 9_000 + b"\r\nX")
    assert transport.written == b"" and not transport.closed and not transport.reading
    conn.sweep(conn.lane.clock())
    assert transport.written == b""
    handed[0]._request_in_progress = False  # type: ignore[attr-defined]
    conn.sweep(conn.lane.clock())
    assert transport.written.startswith(b"HTTP/1.1 431 ") and b"connections.max_field_bytes" in transport.written
    assert transport.closed


async def test_a_later_head_trickled_past_the_header_deadline_gets_408_on_aiohttps_connection():
    clock = Clock()
    conn, transport, handed = _connection(clock)
    conn.data_received(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: b\r\n"
    for byte in head:
        clock.now += 1.0
        conn.data_received(bytes([byte]))
        conn.sweep(clock.now)
        if transport.closed:
            break
    assert transport.written.startswith(b"HTTP/1.1 408 ") and transport.closed
    assert clock.now - 1000.0 <= LIMITS.header_timeout + 2
    assert handed[0].data == b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    assert _closed(conn, "header_timeout") == 1


async def test_one_field_that_never_ends_is_refused_at_the_head_limit():
    conn, transport, handed = _connection()
    conn.data_received(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    conn.data_received(b"GET /readyz HTTP/1.1\r\nX-Padding: ")
    fed = 0
    for _ in range(200):  # 200 reads of 4 KB, no line ending
        if transport.closed:
            break
        conn.data_received(b"a" * 4096)
        fed += 4096
    assert transport.written.startswith(b"HTTP/1.1 431 ") and transport.closed
    assert fed <= LIMITS.max_head_bytes + 4096 and handed[0].data.startswith(b"GET /healthz") and b"X-Pad" not in handed[0].data


async def test_a_declined_upgrade_and_pipelined_heads_pass_through_whole():
    conn, transport, handed = _connection()
    data = (b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
            b"POST /api/v1/incidents HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n{}\r\n"
            b"GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n")
    conn.data_received(data)
    assert handed[0].data == data and transport.written == b""
