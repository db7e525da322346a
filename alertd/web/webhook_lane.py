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

Requests on a connection are answered in order. Every connection starts here, so the
lane keeps the budgets of docs/security.md ("Connections") for every first request:
a head over aiohttp's limits (``connections.max_line_bytes``, ``max_field_bytes``,
``max_headers``) or over ``max_head_bytes`` gets 431 (414 for the request line) and
the connection closes; a head not complete ``connections.header_timeout`` after its
first byte gets 408 and the connection closes (never handed on); a body that stalls
past ``receiver.body_timeout`` gets 408; a connection that starts no request
``connections.keepalive_timeout`` after it opened or after its last answer closes,
whatever bytes that start no request (empty lines) it sends meanwhile (before its
first request, ``header_timeout`` applies instead). A connection
handed to aiohttp keeps the same head limits and header deadline on every later
request: the lane stays its protocol, passing every event through and its bytes
through a HeadGate (alertd/web/head_gate.py), which holds each head until it is
complete and within the limits, so aiohttp never buffers more; aiohttp keeps its
keep-alive (set on its runner, alertd/web/server.py), and the budget
(alertd/web/connections.py) counts the connection until it closes. On a TLS
listener the lane runs each handshake (``start_tls``), so the budget counts the
connection from its accept.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections import deque
from email.utils import formatdate
from http import HTTPStatus
from typing import Callable

import httptools
from aiohttp import web
from multidict import CIMultiDict

from alertd.config.connections import ConnectionSettings
from alertd.web import alertmanager_webhook as webhook
from alertd.web.auth import ANONYMOUS, AUTH, Authenticator
from alertd.web.connections import ConnectionBudget
from alertd.web.guard import EDGE, SIMPLE_TYPES, WEBHOOK, EdgePolicy, checks_host
from alertd.web.head_gate import Handed, HeadLimits, TooLarge, detached_parser
from alertd.web.host import WebHost
from alertd.web.keys import SERVICE

log = logging.getLogger(__name__)

MAX_QUEUED = 16  # requests read ahead of their answers before the connection stops reading
SWEEP = 1.0  # seconds between the checks for stalled heads and bodies and idle connections, at most
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
    share: the service, the credentials, the edge's policy, the connection budget, the aiohttp server they hand
    over to."""

    def __init__(self, app: web.Application, fallback: Callable[[], asyncio.Protocol], limits: ConnectionSettings,
                 budget: ConnectionBudget, clock: Callable[[], float] = time.monotonic, tls: ssl.SSLContext | None = None):
        self.tls = tls  # the listener's: each connection's handshake is the lane's, counted from its accept
        self.svc: WebHost = app[SERVICE]
        self.auth: Authenticator = app[AUTH]
        self.edge: EdgePolicy = app[EDGE]
        self.fallback, self.limits, self.budget, self.clock = fallback, limits, budget, clock
        self.connections: set[LaneConnection] = set()  # those still in the lane (not handed to aiohttp)
        self.gated: set[LaneConnection] = set()  # those handed to aiohttp, behind a HeadGate
        self._date: tuple[int, bytes] = (0, b"")
        self._sweeper: asyncio.Task[None] | None = None

    def __call__(self) -> LaneConnection:
        return LaneConnection(self)

    def start(self) -> None:
        """Begin checking for stalled heads and bodies and idle connections (the listening socket is about to
        open)."""
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
        shortest = min(self.limits.header_timeout, self.limits.keepalive_timeout, self.svc.cfg.body_timeout)
        every = max(0.05, min(SWEEP, shortest / 4))  # a deadline is kept to within a quarter of itself
        while True:
            await asyncio.sleep(every)
            now = self.clock()
            for conn in [*self.connections, *self.gated]:
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
    """One client connection: its requests while they are plain webhooks, then the pipe to aiohttp's handler."""

    def __init__(self, lane: Lane):
        self.lane = lane
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.handler: asyncio.Protocol | None = None  # aiohttp's, once handed over: every event goes to it
        self.handed: Handed | None = None  # in front of aiohttp's handler: its heads, within the limits
        self.head = HeadLimits(lane.limits)
        self.peer: str | None = None
        self.buf = bytearray()  # every byte from the first of the request being read
        self.queue: deque[tuple[bytes, float, bool]] = deque()  # body, start, keep-alive: waiting for answers
        self.busy = False
        self.handing_over = False
        self.paused = False
        self.last_answer: webhook.Answer | None = None  # a refusal written after the queued answers, then close
        self.proven = False  # an authenticated webhook head arrived: evicted only when every connection is proven
        self.principal = ""  # whose credentials proved it
        self.client = ""  # the peer's address, for the budget's share per client
        self.raw: asyncio.Transport | None = None  # the TCP transport while its TLS handshake runs
        self.shaking: asyncio.Task[None] | None = None  # that handshake (held here: the loop keeps tasks weakly)
        self.early = bytearray()  # bytes decrypted before the handshake's end was seen here
        self.answered = False  # an answer was written: from then on the keep-alive deadline applies between requests
        self.last_in = self.idle_since = lane.clock()
        self._reset()

    def _reset(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.head_length = 0
        self.head.reset()
        self.length = 0
        self.head_done: float | None = None  # lane.clock() when the head was complete
        self.begun: float | None = None  # lane.clock() at the request's first byte
        self.started = 0.0  # time.perf_counter() at the same moment, for the acknowledgement latency

    @property
    def quiet(self) -> bool:
        """No request in hand, here or in aiohttp's handler (the budget may close it for room)."""
        return self.raw is None and (self.idle if self.handed is None else not self.handed.busy)

    @property
    def idle(self) -> bool:
        return not self.busy and not self.queue and self.begun is None and not self.handing_over

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else None
        self.client = self.peer or ""
        if not self.lane.budget.admit(self):  # at the cap, and every connection has a request in hand
            transport.close()
            return
        if self.lane.tls is not None:
            self.raw = transport
            self.shaking = asyncio.get_running_loop().create_task(self._handshake(transport, self.lane.tls))
            return
        self._serve(transport)

    async def _handshake(self, raw: asyncio.Transport, tls: ssl.SSLContext) -> None:
        """TLS, within ``header_timeout`` of the accept; the budget counts the connection meanwhile."""
        try:
            transport = await asyncio.get_running_loop().start_tls(
                raw, self, tls, server_side=True, ssl_handshake_timeout=self.lane.limits.header_timeout)
        except OSError as exc:  # SSLError, a reset, an eviction, the deadline (asyncio aborts the connection)
            if isinstance(exc, (TimeoutError, ConnectionAbortedError)):
                self.lane.svc.metrics.connections_closed.labels("header_timeout").inc()
            self.raw = None
            raw.close()
            self.lane.budget.release(self)
            return
        self.raw = None
        if transport is None or transport.is_closing():  # evicted at the very end of its handshake
            self.lane.budget.release(self)
            return
        self._serve(transport)
        if self.early:
            early, self.early = bytes(self.early), bytearray()
            self.data_received(early)

    def _serve(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.lane.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lane.connections.discard(self)
        self.lane.gated.discard(self)
        self.lane.budget.release(self)
        self.transport = None
        # The parsers and this connection refer to each other: freed now, not at the next full collection of
        # cycles (until then hundreds of closed connections would pin the heap between them).
        self.buf.clear()
        self.parser = detached_parser()
        if self.handed is not None:
            self.handed.close()
            self.handed = None
        if self.handler is not None:
            self.handler.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return self.handler.eof_received() if self.handler is not None else None

    def pause_writing(self) -> None:
        if self.handler is not None:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.handler is not None:
            self.handler.resume_writing()

    def data_received(self, data: bytes) -> None:
        self.last_in = self.lane.clock()  # for the budget's choice of whom to evict; no deadline moves
        if self.raw is not None:  # decrypted before start_tls returned here
            self.early += data
            return
        if self.transport is None or self.last_answer is not None:
            return  # refused or closing: nothing more is read
        if self.handed is not None:
            self.handed.feed(data)
            return
        self.buf += data
        if self.handing_over:  # waiting for the lane's answers before aiohttp takes over: hold, within bounds
            if len(self.buf) > self.lane.limits.max_head_bytes and not self.paused:
                self.transport.pause_reading()
                self.paused = True
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # HandOver or TooLarge, raised by a callback
            why = exc.__context__
            if why is not None:  # the parser keeps it: let it hold no frame (and so no read) of this connection
                why.with_traceback(None)
            if isinstance(why, TooLarge):
                self._refuse(why)
            else:
                self._hand_over(why.why if isinstance(why, HandOver) else "malformed")
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            self._hand_over("malformed")  # bytes aiohttp will answer with 400
        else:
            if self.head_done is None and len(self.buf) > self.lane.limits.max_head_bytes:  # or empty lines
                self._refuse(self.head.too_large())

    def evict(self) -> None:
        """Closed by the budget to make room for a new connection."""
        if self.transport is not None:
            self.transport.close()
        elif self.raw is not None:
            self.raw.close()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self.begun, self.started = self.lane.clock(), time.perf_counter()

    def on_url(self, url: bytes) -> None:
        self.head.on_url(url)
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head.on_header(name, value)
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.head_done = self.lane.clock()
        if why := self._not_plain():
            raise HandOver(why)
        self.proven = True  # and self.principal, set by _not_plain

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
        if self.lane.auth.receiver.enabled:
            headers = CIMultiDict((n.decode("latin-1"), v.decode("latin-1")) for n, v in self.headers)
            principal = self.lane.auth.receiver_principal(self.peer or "", headers)
        else:
            principal = ANONYMOUS
        if principal is None:
            return False
        self.principal = principal
        return True

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
        if self.last_answer is not None:
            self._write(self.last_answer, keep_alive=False)
        elif self.handing_over and self.transport is not None:
            self._switch()

    def _write(self, answer: webhook.Answer, keep_alive: bool) -> None:
        if self.transport is None:
            return
        head = [b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nDate: %s\r\n"
                % (answer.status, REASONS[answer.status], answer.content_type.encode(), len(answer.body), self.lane.date())]
        head += [b"%s: %s\r\n" % (n.encode(), v.encode()) for n, v in answer.headers if n != "Connection"]
        head.append(b"Connection: keep-alive\r\n\r\n" if keep_alive else b"Connection: close\r\n\r\n")
        self.transport.write(b"".join(head) + answer.body)
        self.idle_since, self.answered = self.lane.clock(), True
        if not keep_alive:
            self.close()

    def _refuse(self, why: TooLarge) -> None:
        """A head over a limit: answered after the answers before it, then the connection closes."""
        self.lane.svc.metrics.connections_closed.labels("head_too_large").inc()
        self._close_with(webhook.error(why.status, why.message, webhook.CLOSE))

    def _close_with(self, answer: webhook.Answer) -> None:
        self.last_answer = answer
        self.buf.clear()
        if self.transport is not None and not self.paused:
            self.transport.pause_reading()
            self.paused = True
        if not self.busy and not self.queue:
            self._write(answer, keep_alive=False)

    def _hand_over(self, why: str) -> None:
        """The request at the buffer's start, and all after it, go to aiohttp once the lane's answers are out.
        Counted by why, unless it is another route's (every API call and scrape is)."""
        if why != ROUTE:
            self.lane.svc.metrics.webhook_lane.labels(why).inc()
        self.handing_over = True
        if not self.busy and not self.queue:
            self._switch()

    def _switch(self) -> None:
        """aiohttp's handler takes the connection: the lane stays its protocol to pass every event on, and its
        bytes through a HeadGate (alertd/web/head_gate.py ``Handed``)."""
        transport = self.transport
        assert transport is not None
        self.lane.connections.discard(self)
        self.lane.gated.add(self)
        self.handler = handler = self.lane.fallback()
        handler.connection_made(transport)
        self.handed = Handed(handler, transport, self.lane.limits, self.lane.clock, self._refuse_handed)
        data = bytes(self.buf)
        self.buf.clear()
        if self.paused:
            self.paused = False
            transport.resume_reading()
        if data:
            self.handed.feed(data)

    def _refuse_handed(self, status: int, message: str, reason: str) -> None:
        self.lane.svc.metrics.connections_closed.labels(reason).inc()
        self._write(webhook.error(status, message, webhook.CLOSE), keep_alive=False)

    def sweep(self, now: float) -> None:
        """A head or a body stalled past its deadline gets 408 and the connection closes; so does an idle one,
        without an answer. Nothing here is reset by bytes that start no request."""
        if self.handed is not None:
            self.handed.sweep(now)
            return
        if self.transport is None or self.handing_over or self.busy or self.queue or self.last_answer is not None:
            return
        limits = self.lane.limits
        if self.head_done is not None:
            if now - self.head_done > self.lane.svc.cfg.body_timeout:
                self._close_with(webhook.timed_out(self.lane.svc))
        elif self.begun is not None:
            if now - self.begun > limits.header_timeout:
                self.lane.svc.metrics.connections_closed.labels("header_timeout").inc()
                self._close_with(webhook.error(408, f"the request head did not arrive within "
                                                    f"{limits.header_timeout:g} s", webhook.CLOSE))
        elif now - self.idle_since > (limits.keepalive_timeout if self.answered else limits.header_timeout):
            # before its first answer a connection is waiting for its first head: the header deadline applies
            self.lane.svc.metrics.connections_closed.labels("idle" if self.answered else "header_timeout").inc()
            self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None
        self.lane.connections.discard(self)


__all__ = ["Lane", "LaneConnection"]
