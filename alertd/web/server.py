"""The web server as a part: the last to start (webhooks arrive only once the engine and the store are up),
the first to stop (no request is taken once the service has begun to stop).

Its listening socket is opened here with ``loop.create_server`` and serves connections through the webhook
lane (alertd/web/webhook_lane.py), which hands every request that is not a plain webhook, and the rest of its
connection, to the aiohttp application's low-level server (``AppRunner.server``). Both paths keep one
connection policy (the ``connections`` section, docs/security.md): the lane enforces it on every connection's
first request and on every webhook it answers, and on every later head of a connection it handed on, before
aiohttp's parser sees it (alertd/web/head_gate.py); aiohttp's runner is given the same keep-alive and header
limits, and the budget (alertd/web/connections.py) caps the open connections of the process."""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from dataclasses import dataclass

from aiohttp import web

from alertd.web.connections import BACKLOG, AcceptErrors, ConnectionBudget, ErrorLogLimit, connection_cap
from alertd.web.keys import SERVICE
from alertd.web.webhook_lane import Lane

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT = 10.0  # seconds requests in flight may take to finish when the server stops


@dataclass(frozen=True)
class Listen:
    """Where the server listens; ``bind=False`` binds nothing (the engine process of a receiver group, whose
    receivers take every connection, so an engine step never holds up a webhook). ``sock``: a listening
    socket to serve on instead of binding (a receiver's, inherited from its engine process)."""

    host: str = "127.0.0.1"
    port: int = 9095
    ssl_context: ssl.SSLContext | None = None
    bind: bool = True
    sock: socket.socket | None = None


class WebServer:
    name = "web"

    def __init__(self, app: web.Application, listen: Listen, *, shutdown_timeout: float = SHUTDOWN_TIMEOUT):
        self.app, self.listen, self._timeout = app, listen, shutdown_timeout
        svc = app[SERVICE]
        self.limits = limits = svc.cfg.connections
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout,
                                     keepalive_timeout=limits.keepalive_timeout, max_line_size=limits.max_line_bytes,
                                     max_field_size=limits.max_field_bytes, max_headers=limits.max_headers)
        self._accept_errors = AcceptErrors(svc.metrics)
        self._error_logs = ErrorLogLimit(svc.metrics)
        self._lane: Lane | None = None
        self._listening: asyncio.Server | None = None

    async def start(self) -> None:
        await self._runner.setup()
        if not self.listen.bind:
            return
        try:
            await self._serve()
        except BaseException:  # a port in use: this part did not start, so it cleans up itself
            await self.stop()
            raise

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        svc, server = self.app[SERVICE], self._runner.server
        assert server is not None  # set up above
        cap = connection_cap(self.limits)
        if cap < self.limits.max_open:
            log.info("at most %d open connections (connections.max_open %d, lowered to fit the file-descriptor "
                     "limit)", cap, self.limits.max_open)
        # A TLS handshake holds a descriptor before any byte of a request: the lane runs it, counted by the
        # budget from the accept, within the header deadline.
        self._lane = lane = Lane(self.app, server, self.limits, ConnectionBudget(cap, svc.metrics),
                                 tls=self.listen.ssl_context)
        lane.start()
        self._accept_errors.install(loop)
        self._error_logs.install()
        if self.listen.sock is not None:
            self._listening = await loop.create_server(lane, sock=self.listen.sock, backlog=BACKLOG)
        else:
            self._listening = await loop.create_server(lane, self.listen.host, self.listen.port, backlog=BACKLOG)

    async def stop(self) -> None:
        if self._listening is not None:
            self._listening.close()  # no new connections; the open ones finish below
            self._listening = None
        if self._lane is not None:
            await self._lane.shutdown(self._timeout)
            self._lane = None
        await self._runner.cleanup()  # aiohttp's connections: in-flight requests get shutdown_timeout
        self._accept_errors.uninstall(asyncio.get_running_loop())
        self._error_logs.uninstall()
