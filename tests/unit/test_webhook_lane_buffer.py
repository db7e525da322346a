"""The webhook lane's hand-over, byte for byte, on a fake transport: what aiohttp receives when the lane
gives a connection up, and that the lane never holds more than a head's worth of bytes it cannot parse."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from aiohttp import web

from alertd.core.service_metrics import Metrics
from alertd.web.auth import AUTH
from alertd.web.guard import EDGE, EdgePolicy
from alertd.web.keys import SERVICE
from alertd.web.webhook_lane import MAX_HEAD, Lane


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
        pass


def _handed_over(conn: object, why: str) -> float:
    return conn.lane.svc.metrics.webhook_lane.labels(why)._value.get()  # type: ignore[attr-defined]


def _connection() -> tuple[object, Transport, list[Recorder]]:
    app = web.Application()
    app[SERVICE] = SimpleNamespace(cfg=SimpleNamespace(max_body_bytes=1 << 20, body_timeout=30.0),  # type: ignore[assignment]
                                   metrics=Metrics())
    app[AUTH] = SimpleNamespace(api=SimpleNamespace(enabled=True), receiver=SimpleNamespace(enabled=False))  # type: ignore[assignment]
    app[EDGE] = EdgePolicy()
    handed: list[Recorder] = []

    def fallback() -> Recorder:
        handed.append(Recorder())
        return handed[-1]

    lane = Lane(app, fallback)  # type: ignore[arg-type]  # not started: no sweeping in these tests
    conn = lane()
    transport = Transport()
    conn.connection_made(transport)
    return conn, transport, handed


async def test_empty_lines_past_a_heads_worth_are_handed_to_aiohttp_whole():
    conn, transport, handed = _connection()
    flood = b"\r\n" * (MAX_HEAD // 2 + 1)
    for i in range(0, len(flood), 4096):
        conn.data_received(flood[i:i + 4096])
    assert len(handed) == 1 and handed[0].made and transport.protocol is handed[0]
    assert handed[0].data == flood  # every byte, in order, none held back
    assert len(conn.buf) == 0
    assert _handed_over(conn, "long_head") == 1


async def test_a_request_the_lane_does_not_take_reaches_aiohttp_from_its_first_byte():
    conn, transport, handed = _connection()
    data = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /readyz HTTP/1.1\r\n"
    conn.data_received(data[:10])
    assert not handed
    conn.data_received(data[10:])
    assert len(handed) == 1 and handed[0].data == data and transport.written == b""
    assert _handed_over(conn, "route") == 0 and _handed_over(conn, "malformed") == 0  # another route: not counted
