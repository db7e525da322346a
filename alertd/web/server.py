"""The web server as a part: the last to start (webhooks arrive only once the engine and the store are up),
the first to stop (no request is taken once the service has begun to stop)."""
from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

from aiohttp import web

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
        self.app, self.listen = app, listen
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout)

    async def start(self) -> None:
        await self._runner.setup()
        if not self.listen.bind:
            return
        try:
            site: web.BaseSite = web.SockSite(self._runner, self.listen.sock, ssl_context=self.listen.ssl_context) \
                if self.listen.sock is not None else \
                web.TCPSite(self._runner, self.listen.host, self.listen.port, ssl_context=self.listen.ssl_context)
            await site.start()
        except BaseException:  # a port in use: this part did not start, so it cleans up itself
            await self._runner.cleanup()
            raise

    async def stop(self) -> None:
        await self._runner.cleanup()
