"""A lane beside aiohttp for Alertmanager's plain webhooks: parsed by httptools, answered without a web.Request.

Alertmanager sends alertd the same request thousands of times a minute in a storm:
a POST to one path with a Content-Length and a JSON body, on a kept-alive
connection. aiohttp spends more on that request (its Request, middleware, routing,
the response's headers) than alertd spends checking and storing the body. The lane
reads each connection's requests with httptools (llhttp, the parser of Node.js, as
uvicorn does) and answers the plain ones itself through alertd/web/alertmanager_webhook.py,
the same code aiohttp's route ends in.

Whatever is not plain is handed to aiohttp, with every byte from the first byte of
that request on: the connection becomes an ordinary aiohttp connection for the rest
of its life, so every other route, every refusal of the edge (alertd/web/guard.py)
and every error answer stay aiohttp's. Plain means: ``POST`` to the webhook's path
over HTTP/1.0 or 1.1, one ``Content-Length`` within the limit, no
``Transfer-Encoding``, ``Expect`` or ``Upgrade``, nothing a browser adds
(``Origin``, ``Sec-Fetch-Site``, ``Cookie``), no ``X-Forwarded-Proto``, a
Content-Type a page cannot send without a preflight, an allowed Host when the edge
checks it, and credentials the receiver accepts (a wrong one gets aiohttp's 401,
counted and logged as before).

Requests on a connection are answered in order. A body that stalls past
``receiver.body_timeout`` gets 408 and the connection is closed; an idle connection
is closed after 75 s, aiohttp's keep-alive time.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from email.utils import formatdate
from http import HTTPStatus
from typing import Callable

import httptools
from aiohttp import web
from multidict import CIMultiDict

from alertd.web import alertmanager_webhook as webhook
from alertd.web.auth import AUTH, Authenticator
from alertd.web.guard import EDGE, SIMPLE_TYPES, WEBHOOK, EdgePolicy, checks_host
from alertd.web.host import WebHost
from alertd.web.keys import SERVICE

log = logging.getLogger(__name__)

IDLE = 75.0  # seconds a kept-alive connection may wait for its next request (aiohttp's keepalive_timeout)
MAX_HEAD = 64 * 1024  # a head this long is no webhook's: aiohttp judges it
MAX_QUEUED = 16  # requests read ahead of their answers before the connection stops reading
SWEEP = 1.0  # seconds between the checks for stalled bodies and idle connections
PATH = WEBHOOK.encode()
REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}
ROUTE = "route"  # another method, path or HTTP version than the webhook's: aiohttp's, not counted
# Headers that make a request aiohttp's, and the reason counted for each (alertd_webhook_lane_total).
NOT_PLAIN = {b"transfer-encoding": "framing", b"expect": "framing", b"upgrade": "framing",
             b"origin": "browser", b"sec-fetch-site": "browser", b"cookie": "browser",
             b"x-forwarded-proto": "forwarded"}


class HandOver(Exception):
    """This request is aiohttp's, and why: raised from a parser callback, which stops the parse (httptools raises
    HttpParserCallbackError with this as its context)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class Lane:
    """The protocol factory for a listening socket (``loop.create_server(lane, ...)``), and what its connections
    share: the service, the credentials, the edge's policy, the aiohttp server they hand over to."""

    def __init__(self, app: web.Application, fallback: web.Server, clock: Callable[[], float] = time.monotonic):
        self.svc: WebHost = app[SERVICE]
        self.auth: Authenticator = app[AUTH]
        self.edge: EdgePolicy = app[EDGE]
        self.fallback, self.clock = fallback, clock
        self.connections: set[LaneConnection] = set()
        self._date: tuple[int, bytes] = (0, b"")
        self._sweeper: asyncio.Task[None] | None = None

    def __call__(self) -> LaneConnection:
        return LaneConnection(self)

    def start(self) -> None:
        """Begin checking for stalled bodies and idle connections (the listening socket is about to open)."""
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def host_allowed(self, host: bytes) -> bool:
        """The edge's Host check (under a microsecond for an allowed name: nothing to remember)."""
        return not checks_host(self.auth) or self.edge.host_allowed(host.decode("latin-1"))

    def date(self) -> bytes:
        """The Date header's value, formatted once a second."""
        now = int(time.time())
        if self._date[0] != now:
            self._date = (now, formatdate(now, usegmt=True).encode())
        return self._date[1]

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP)
            now = self.clock()
            for conn in list(self.connections):
                conn.sweep(now)

    async def shutdown(self, timeout: float) -> None:
        """Close idle connections now; let those with requests in hand answer them, for ``timeout`` seconds."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        deadline = self.clock() + timeout
        while True:
            for conn in list(self.connections):
                if conn.idle:
                    conn.close()
            if not self.connections or self.clock() >= deadline:
                break
            await asyncio.sleep(0.05)
        for conn in list(self.connections):
            conn.close()


class LaneConnection(asyncio.Protocol):
    """One client connection while its requests are plain webhooks."""

    def __init__(self, lane: Lane):
        self.lane = lane
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None
        self.buf = bytearray()  # every byte from the first of the request being read
        self.queue: deque[tuple[bytes, float, bool]] = deque()  # body, start, keep-alive: waiting for answers
        self.busy = False
        self.handing_over = False
        self.paused = False
        self._reset()
        self.last = lane.clock()

    def _reset(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.head_length = 0
        self.length = 0
        self.begun: float | None = None  # lane.clock() at the request's first byte
        self.started = 0.0  # time.perf_counter() at the same moment, for the acknowledgement latency

    @property
    def idle(self) -> bool:
        return not self.busy and not self.queue and self.begun is None and not self.handing_over

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else None
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.lane.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lane.connections.discard(self)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.last = self.lane.clock()
        self.buf += data
        if self.handing_over:  # waiting for the lane's answers before aiohttp takes over: hold, within bounds
            if len(self.buf) > MAX_HEAD and not self.paused and self.transport is not None:
                self.transport.pause_reading()
                self.paused = True
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # HandOver: a request the lane does not take
            self._hand_over(exc.__context__.why if isinstance(exc.__context__, HandOver) else "malformed")
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            self._hand_over("malformed")  # bytes aiohttp will answer with 400
        else:
            if len(self.buf) > MAX_HEAD and not self.head_length:  # a head this long (or empty lines) is aiohttp's
                self._hand_over("long_head")

    # httptools callbacks

    def on_message_begin(self) -> None:
        self.begun, self.started = self.lane.clock(), time.perf_counter()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        if why := self._not_plain():
            raise HandOver(why)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        keep_alive = self.parser.should_keep_alive()
        self.queue.append((b"".join(self.body), self.started, keep_alive))
        del self.buf[:self.head_length + self.length]
        self._reset()
        if len(self.queue) >= MAX_QUEUED and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True
        if not self.busy:
            self.busy = True
            asyncio.get_running_loop().create_task(self._answer_all())

    # the lane's decisions

    def _not_plain(self) -> str:
        """Why this request is not plain (see the module's docstring), or "" when it is: then its head's length
        and its body's are known."""
        p = self.parser
        if p.get_method() != b"POST" or self.url != PATH or p.get_http_version() not in ("1.1", "1.0"):
            return ROUTE
        lengths, hosts, kind = [], [], b""
        for name, value in self.headers:
            if name == b"content-length":
                lengths.append(value)
            elif name == b"host":
                hosts.append(value)
            elif name == b"content-type":
                kind = value
            elif name in NOT_PLAIN:
                return NOT_PLAIN[name]
            elif name == b"connection" and b"upgrade" in value.lower():
                return "framing"
        if len(lengths) != 1 or not lengths[0].isdigit() or len(hosts) > 1:
            return "framing"
        self.length = int(lengths[0])
        if self.length > self.lane.svc.cfg.max_body_bytes:
            return "too_large"
        if kind.split(b";", 1)[0].strip().lower().decode("latin-1") in SIMPLE_TYPES:
            return "content_type"
        if not self.lane.host_allowed(hosts[0] if hosts else b""):
            return "host"
        if not self._credentials_accepted():
            return "credentials"
        end = self.buf.find(b"\r\n\r\n")
        # The head as llhttp read it: from the buffer's first byte, every line ended by CRLF.
        if end < 0 or not self.buf.startswith(b"POST ") or self.buf.count(b"\n", 0, end) != self.buf.count(b"\r\n", 0, end):
            return "head"
        self.head_length = end + 4
        return ""

    def _credentials_accepted(self) -> bool:
        receiver = self.lane.auth.receiver
        if not receiver.enabled:
            return True
        headers = CIMultiDict((n.decode("latin-1"), v.decode("latin-1")) for n, v in self.headers)
        return self.lane.auth.receiver_accepts(self.peer or "", headers)

    async def _answer_all(self) -> None:
        try:
            while self.queue and self.transport is not None:
                raw, started, keep_alive = self.queue.popleft()
                if self.paused and len(self.queue) < MAX_QUEUED // 2:
                    self.transport.resume_reading()
                    self.paused = False
                svc = self.lane.svc
                answer = webhook.refusal(svc, None) or await webhook.accept(svc, raw, started)
                svc.metrics.webhook_lane.labels("answered").inc()
                self._write(answer, keep_alive and not answer.closes)
        except Exception:  # noqa: BLE001 - answered 500 as aiohttp would, so Alertmanager retries
            log.exception("webhook lane: answering failed")
            self.queue.clear()
            self._write(webhook.error(500, "internal error; retry later"), keep_alive=False)
        finally:
            self.busy = False
        if self.handing_over and self.transport is not None:
            self._switch()

    def _write(self, answer: webhook.Answer, keep_alive: bool) -> None:
        if self.transport is None:
            return
        head = [b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nDate: %s\r\n"
                % (answer.status, REASONS[answer.status], answer.content_type.encode(), len(answer.body), self.lane.date())]
        head += [b"%s: %s\r\n" % (n.encode(), v.encode()) for n, v in answer.headers if n != "Connection"]
        head.append(b"Connection: keep-alive\r\n\r\n" if keep_alive else b"Connection: close\r\n\r\n")
        self.transport.write(b"".join(head) + answer.body)
        self.last = self.lane.clock()
        if not keep_alive:
            self.close()

    def _hand_over(self, why: str) -> None:
        """The request at the buffer's start, and all after it, go to aiohttp once the lane's answers are out.
        Counted by why, unless it is another route's (every API call and scrape is)."""
        if why != ROUTE:
            self.lane.svc.metrics.webhook_lane.labels(why).inc()
        self.handing_over = True
        if not self.busy and not self.queue:
            self._switch()

    def _switch(self) -> None:
        transport = self.transport
        assert transport is not None
        self.lane.connections.discard(self)
        handler = self.lane.fallback()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        if self.buf:
            handler.data_received(bytes(self.buf))
        self.buf.clear()
        if self.paused:
            transport.resume_reading()

    def sweep(self, now: float) -> None:
        """A body stalled past the deadline gets 408; a head stalled so gets aiohttp; an idle connection closes."""
        if self.transport is None or self.handing_over or self.busy:
            return
        if self.begun is not None:
            if now - self.begun <= self.lane.svc.cfg.body_timeout:
                return
            if self.head_length:
                self._write(webhook.timed_out(self.lane.svc), keep_alive=False)
            else:
                self._hand_over("stalled_head")
        elif not self.queue and now - self.last > IDLE:
            self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None
        self.lane.connections.discard(self)


__all__ = ["Lane", "LaneConnection"]
