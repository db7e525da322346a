"""The web server as a part: the last to start (webhooks arrive only once the engine and the store are up),
the first to stop (no request is taken once the service has begun to stop).

Its listening socket serves connections through the webhook lane (alertd/web/webhook_lane.py), which hands
every request that is not a plain webhook, and the rest of its connection, to the aiohttp application."""
from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass

from aiohttp import web

from alertd.web.webhook_lane import Lane

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


class LaneSite(web.BaseSite):
    """A site whose connections start in the webhook lane: on ``listen.sock`` when given, else on its address."""

    __slots__ = ("_listen", "_lane", "_timeout")

    def __init__(self, runner: web.AppRunner, listen: Listen, timeout: float):
        super().__init__(runner, ssl_context=listen.ssl_context)
        self._listen, self._timeout = listen, timeout
        assert runner.server is not None
        self._lane = Lane(runner.app, runner.server)

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._listen.host}:{self._listen.port}"

    async def start(self) -> None:
        await super().start()
        self._lane.start()
        loop = asyncio.get_running_loop()
        if self._listen.sock is not None:
            self._server = await loop.create_server(self._lane, sock=self._listen.sock, ssl=self._ssl_context,
                                                    backlog=self._backlog)
        else:
            self._server = await loop.create_server(self._lane, self._listen.host, self._listen.port,
                                                    ssl=self._ssl_context, backlog=self._backlog)

    async def stop(self) -> None:
        await super().stop()
        await self._lane.shutdown(self._timeout)


class WebServer:
    name = "web"

    def __init__(self, app: web.Application, listen: Listen, *, shutdown_timeout: float = SHUTDOWN_TIMEOUT):
        self.app, self.listen, self._timeout = app, listen, shutdown_timeout
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout)

    async def start(self) -> None:
        await self._runner.setup()
        if not self.listen.bind:
            return
        try:
            await LaneSite(self._runner, self.listen, self._timeout).start()
        except BaseException:  # a port in use: this part did not start, so it cleans up itself
            await self._runner.cleanup()
            raise

    async def stop(self) -> None:
        await self._runner.cleanup()
