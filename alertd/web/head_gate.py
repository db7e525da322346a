"""The head limits of docs/security.md ("Connections"), kept on every request of a connection.

The webhook lane reads each connection's first request itself and checks its head as it arrives
(``HeadLimits``). A connection the lane hands to aiohttp is served by aiohttp's parser from then on, which
buffers a whole head before it checks anything but the length of one line and the number of fields: 128
fields of 8 KB, a megabyte per connection, all of it held while the head stays incomplete. So the lane stays
in front of it: a ``HeadGate`` parses the same bytes (httptools, without keeping them), holds the bytes of each
head until the head is complete and within the limits, and only then passes them on. aiohttp never holds
more than one head within the limits; a head over a limit is refused by the lane (431, or 414 for the request
line) before its bytes cost more than ``max_head_bytes`` and one read of the socket."""
from __future__ import annotations

import asyncio
from typing import Callable

import httptools

from alertd.config.connections import ConnectionSettings

READ_BYTES = 256 * 1024  # the most one read of a socket delivers (asyncio's selector transports)


def held_at_most(limits: ConnectionSettings) -> int:
    """The most one connection's head may hold: the head's limit and the read that began it."""
    return limits.max_head_bytes + READ_BYTES


class TooLarge(Exception):
    """A head over one of the limits: the lane answers it (431, or 414 for the request line) and closes."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class HeadLimits:
    """One head's size as it arrives, against ``connections.max_line_bytes``, ``max_field_bytes``,
    ``max_headers`` and ``max_head_bytes``; each check raises TooLarge past its limit."""

    def __init__(self, limits: ConnectionSettings):
        self.limits = limits
        self.url = self.fields = self.size = 0

    def reset(self) -> None:
        self.url = self.fields = self.size = 0

    def on_url(self, part: bytes) -> None:
        self.url += len(part)
        if self.url > self.limits.max_line_bytes:
            raise TooLarge(414, f"the request line exceeds {self.limits.max_line_bytes} bytes "
                                "(connections.max_line_bytes)")

    def on_header(self, name: bytes, value: bytes) -> None:
        limits = self.limits
        if len(name) + len(value) > limits.max_field_bytes:
            raise TooLarge(431, f"a header field exceeds {limits.max_field_bytes} bytes (connections.max_field_bytes)")
        if self.fields >= limits.max_headers:
            raise TooLarge(431, f"more than {limits.max_headers} header fields (connections.max_headers)")
        self.fields += 1
        self.size += len(name) + len(value) + 4  # ": " and CRLF
        if self.size + self.url > limits.max_head_bytes:
            raise self.too_large()

    def too_large(self) -> TooLarge:
        return TooLarge(431, f"the request head exceeds {self.limits.max_head_bytes} bytes "
                             "(connections.max_head_bytes)")


class HeadGate:
    """The bytes of a connection aiohttp serves, on their way to it: ``feed`` returns what may pass now and holds
    a read that ends inside a head until that head is complete (requests pipelined ahead of it in the same read
    wait with it: browsers, scrapers and Alertmanager do not pipeline); it raises TooLarge for a head over a
    limit, or held bytes over ``max_head_bytes`` and the read the head began in. Bytes httptools cannot parse
    pass unchecked: aiohttp answers them 400 and closes."""

    def __init__(self, limits: ConnectionSettings, clock: Callable[[], float]):
        self.head, self.clock = HeadLimits(limits), clock
        self.parser = httptools.HttpRequestParser(self)
        self.held = bytearray()
        self.begun: float | None = None  # clock() at the first byte of a head not yet complete
        self.off = False  # malformed: aiohttp answers and closes, nothing more to check
        self.slack = 0  # the length of the read in which the open head began

    def feed(self, data: bytes) -> bytes:
        if self.off:
            return data
        opened = self.begun is not None
        self.held += data
        refused: TooLarge | None = None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, TooLarge):
                raise
            refused = exc.__context__.with_traceback(None)  # the parser keeps it: let it hold no frame
        except httptools.HttpParserUpgrade as exc:  # aiohttp declines upgrades and reads on: so does the gate
            at = int(exc.args[0])
            done = bytes(self.held[:len(self.held) - len(data) + at])
            self.held.clear()
            self.parser, self.begun = httptools.HttpRequestParser(self), None
            return done + self.feed(data[at:]) if at < len(data) else done
        except httptools.HttpParserError:
            self.off, self.begun = True, None
        if refused is not None:  # raised afresh, out of the handler: no chain back to this frame's bytes
            raise TooLarge(refused.status, refused.message)
        if self.begun is not None:
            if not opened:  # this read began the head: what came before it in the read is allowed on top
                self.slack = len(data)
            if len(self.held) > self.head.limits.max_head_bytes + self.slack:  # a line that never ends
                raise self.head.too_large()
            return b""
        out = bytes(self.held)
        self.held.clear()
        return out

    def close(self) -> None:
        """Let go of what is held, and of the parser, which refers back to this gate: freed now, not at the
        next collection of cycles."""
        self.held.clear()
        self.parser = detached_parser()

    # httptools callbacks

    def on_message_begin(self) -> None:
        self.begun = self.clock()
        self.head.reset()

    def on_url(self, url: bytes) -> None:
        self.head.on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head.on_header(name, value)

    def on_headers_complete(self) -> None:
        self.begun = None


class Handed:
    """A connection handed to aiohttp's ``handler``: its bytes through a HeadGate. A head over a limit, or one
    held past ``header_timeout``, is answered with ``refuse(status, message, reason)`` (which writes and closes)
    once aiohttp has answered the requests it was given; meanwhile the connection reads nothing more."""

    def __init__(self, handler: asyncio.Protocol, transport: asyncio.Transport, limits: ConnectionSettings,
                 clock: Callable[[], float], refuse: Callable[[int, str, str], None]):
        self.handler, self.transport, self.limits, self.refuse = handler, transport, limits, refuse
        self.gate = HeadGate(limits, clock)
        self.refusal: tuple[int, str, str] | None = None  # waiting for aiohttp's answers

    @property
    def busy(self) -> bool:
        """aiohttp's handler has a request in hand or queued (aiohttp keeps no public word for it)."""
        return bool(getattr(self.handler, "_request_in_progress", False) or getattr(self.handler, "_messages", None))

    def feed(self, data: bytes) -> None:
        if self.refusal is not None:
            return
        try:
            data = self.gate.feed(data)
        except TooLarge as why:
            self.gate.held.clear()
            self._refuse((why.status, why.message, "head_too_large"))
            return
        if data:
            self.handler.data_received(data)

    def _refuse(self, refusal: tuple[int, str, str]) -> None:
        self.refusal = refusal
        self.transport.pause_reading()
        if not self.busy:
            self.refuse(*refusal)

    def sweep(self, now: float) -> None:
        """A refusal whose turn came; a head held past its deadline."""
        if self.transport.is_closing():
            return
        if self.refusal is not None:
            if not self.busy:
                self.refuse(*self.refusal)
        elif self.gate.begun is not None and now - self.gate.begun > self.limits.header_timeout:
            self._refuse((408, f"the request head did not arrive within {self.limits.header_timeout:g} s",
                          "header_timeout"))

    def close(self) -> None:
        self.gate.close()


def detached_parser() -> httptools.HttpRequestParser:
    """A parser that calls nothing back: what a closed connection keeps instead of its own."""
    return httptools.HttpRequestParser(_NO_CALLBACKS)


_NO_CALLBACKS = object()

__all__ = ["Handed", "HeadGate", "HeadLimits", "TooLarge", "detached_parser", "held_at_most"]
