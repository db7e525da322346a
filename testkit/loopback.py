"""The start/stop part every in-process aiohttp test server shares.

A subclass builds its application in :meth:`LoopbackServer.app` and may set
:attr:`~LoopbackServer.url_path`; the base serves it on a free 127.0.0.1 port:

    class EchoServer(LoopbackServer):
        url_path = "/api/"

        def app(self) -> web.Application:
            app = web.Application()
            app.router.add_post("/api/echo", self._echo)
            return app

        async def _echo(self, request):
            await self.wait_delay()
            return web.json_response(await request.json())

    async with EchoServer(delay=0.1) as server:
        server.url                          # http://127.0.0.1:PORT/api/
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from typing import Any, Iterator, Self

from aiohttp import web


class LoopbackServer:
    """An aiohttp application served on ``host:port`` (default: a free 127.0.0.1 port).

    ``start()`` is idempotent and returns :attr:`url`; ``stop()`` may be called any
    number of times; ``async with`` does both. ``delay`` is the number of seconds
    :meth:`wait_delay` sleeps, for handlers that simulate a slow upstream; tests may
    change it while the server runs.
    """

    url_path = ""  # appended to http://host:port to make :attr:`url`
    unstarted_url: str | None = None  # :attr:`url` before the first start()

    def __init__(self, *, delay: float = 0.0, host: str = "127.0.0.1", port: int = 0):
        self.delay = delay
        self.host = host
        self.port: int | None = None  # the bound port, once started
        self._requested_port = port
        self._runner: web.AppRunner | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop serving it, once started

    def app(self) -> web.Application:
        """The application to serve; called once per start()."""
        raise NotImplementedError

    @property
    def url(self) -> str | None:
        """``http://host:port`` + :attr:`url_path` once started (kept after stop())."""
        if self.port is None:
            return self.unstarted_url
        return f"http://{self.host}:{self.port}{self.url_path}"

    async def start(self) -> str:
        """Serve on ``host:port`` (port 0: a free one); returns :attr:`url`."""
        if self._runner is None:
            runner = web.AppRunner(self.app(), access_log=None)
            await runner.setup()
            try:
                await web.TCPSite(runner, self.host, self._requested_port).start()
            except BaseException:
                await runner.cleanup()
                raise
            self._runner = runner
            self.port = runner.addresses[0][1]
            self.loop = asyncio.get_running_loop()
        return self.url  # type: ignore[return-value]

    async def refuse_for(self, seconds: float) -> None:
        """An outage: stop listening (connections are refused), then serve again on the same port."""
        await self.stop()
        await asyncio.sleep(seconds)
        self._requested_port = self.port or 0
        await self.start()

    def submit(self, coro: Any) -> "concurrent.futures.Future[Any]":
        """Run a coroutine on the server's loop from another thread (servers run by serving_in_thread)."""
        assert self.loop is not None, "start() the server first"
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_delay(self) -> None:
        """Sleep ``delay`` seconds (no-op when 0)."""
        if self.delay:
            await asyncio.sleep(self.delay)


@contextlib.contextmanager
def serving_in_thread(*servers: LoopbackServer, timeout: float = 10.0) -> Iterator[tuple[LoopbackServer, ...]]:
    """Run servers on a private event loop in a daemon thread, for tests that block (subprocesses, polling)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="loopback-servers", daemon=True)
    thread.start()
    try:
        for server in servers:
            asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout)
        yield servers
    finally:
        for server in servers:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        loop.close()
