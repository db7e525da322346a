"""A TCP proxy on loopback that can cut the network between one client and its server, like a partition.

Put it between one alertd replica and PostgreSQL (the replica's DSN names the proxy, see
:meth:`PartitionProxy.dsn`). :meth:`~PartitionProxy.blackhole` stops moving bytes in both directions
while every socket stays open: nothing is refused and nothing is reset, requests and answers simply
get no further, as when packets are lost. :meth:`~PartitionProxy.heal` moves them again; what was
written meanwhile is then delivered, as TCP would retransmit it, and a side that closed meanwhile
(the server ending a session, the client giving up) is then seen closed by the other. Connections
made during a blackhole are accepted (the kernel completes the handshake) but reach the server
only after the heal. :meth:`~PartitionProxy.blackhole_after` cuts at a chosen moment: right after
client bytes with a given pattern went through.

It also times what the client sends (``bytes_up``, ``last_up_at``): the HA test puts one that is
never cut in front of the Slack and PagerDuty test servers to see when a replica last sent to them.

On loopback the proxy's kernel acknowledges every byte, so the client's TCP keepalives and
TCP_USER_TIMEOUT never fire through it, as behind a middlebox (a connection pooler, a cloud SQL
proxy): the client notices a cut only through its own deadlines and the server's timeouts.

Bounded: at most ``max_connections`` at once (more are closed at once), one read of at most 64 KiB
held per direction and connection while blackholed.

    with PartitionProxy(("127.0.0.1", 5432)) as proxy:
        dsn = proxy.dsn("postgresql://postgres@127.0.0.1:5432/alertd")
        proxy.blackhole(); ...; proxy.heal()
"""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import threading
import time
from typing import Self
from urllib.parse import urlsplit, urlunsplit

CHUNK = 65536


class PartitionProxy:
    def __init__(self, target: tuple[str, int], *, max_connections: int = 64):
        if not ipaddress.ip_address(target[0]).is_loopback:
            raise ValueError(f"the proxy only forwards to loopback, not {target[0]}")
        self.target = target
        self.max_connections = max_connections
        self.port = 0
        self.accepted = 0  # connections accepted since start
        self.bytes_up = 0  # client -> server bytes forwarded
        self.last_up_at: float | None = None  # time.monotonic() of the last client -> server bytes forwarded
        self.blackholed_at: float | None = None  # time.monotonic() the last blackhole began
        self.upstream_ports: set[int] = set()  # the proxy's local ports towards the server (the server's client_port)
        self._trigger = b""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="partition-proxy", daemon=True)
        self._open = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._pairs: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    # ----- control (from any thread) -----

    def start(self) -> int:
        self._thread.start()
        return self._call(self._start())

    def blackhole(self) -> None:
        """From now on no byte moves in either direction; every socket stays open."""
        self._loop.call_soon_threadsafe(self._cut)

    def blackhole_after(self, pattern: bytes) -> None:
        """Blackhole as soon as client bytes containing ``pattern`` have been forwarded to the server
        (the partition comes at a chosen moment, e.g. right after a given statement reached the server)."""
        def arm() -> None:
            self._trigger = pattern
        self._loop.call_soon_threadsafe(arm)

    def heal(self) -> None:
        """Bytes move again, those held first."""
        self._loop.call_soon_threadsafe(self._open.set)

    @property
    def connections(self) -> int:
        return len(self._pairs)

    def dsn(self, server_dsn: str) -> str:
        """``server_dsn`` with its host and port replaced by the proxy's."""
        parts = urlsplit(server_dsn)
        auth = parts.netloc.rpartition("@")[0]
        return urlunsplit(parts._replace(netloc=f"{auth + '@' if auth else ''}127.0.0.1:{self.port}"))

    def url(self, server_url: str) -> str:
        """``server_url`` (http://127.0.0.1:PORT/...) pointed at the proxy instead."""
        return self.dsn(server_url)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._call(self._stop())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    # ----- on the proxy's loop -----

    def _cut(self) -> None:
        self._trigger = b""
        self.blackholed_at = time.monotonic()
        self._open.clear()

    async def _start(self) -> int:
        self._open.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pairs):
            task.cancel()
        await asyncio.gather(*self._pairs, return_exceptions=True)
        for writer in list(self._writers):
            writer.transport.abort()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._pairs) >= self.max_connections:
            writer.close()
            return
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._pairs.add(task)
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            await self._open.wait()  # during a blackhole the connection does not reach the server yet
            up_reader, upstream = await asyncio.open_connection(*self.target)
            self._writers.add(upstream)
            self.upstream_ports.add(upstream.get_extra_info("sockname")[1])
            pumps = [asyncio.ensure_future(self._pump(reader, upstream, up=True)), asyncio.ensure_future(self._pump(up_reader, writer))]
            try:
                await asyncio.gather(*pumps)
            finally:  # one direction failed (a reset): the other one stops too
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except (OSError, asyncio.CancelledError):  # a reset, or the proxy stopping
            pass
        finally:
            for w in (writer, upstream):
                if w is not None:
                    self._writers.discard(w)
                    w.close()
            self._pairs.discard(task)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, up: bool = False) -> None:
        """Copy one direction; a blackhole stops it before reading and before writing what was read."""
        while True:
            await self._open.wait()
            data = await reader.read(CHUNK)
            await self._open.wait()
            if not data:
                with contextlib.suppress(OSError):
                    writer.write_eof()  # the other side sees the close once the network is back
                return
            writer.write(data)
            if up:
                self.bytes_up += len(data)
                self.last_up_at = time.monotonic()
                if self._trigger and self._trigger in data:
                    self._cut()
            await writer.drain()
