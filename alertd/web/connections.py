"""The open-connection budget of one process, and accept errors logged once per interval.

Every connection holds a file descriptor. Without a cap, idle clients take them all: ``accept()`` then fails
with EMFILE, nothing new is served (not /readyz, not Alertmanager's next connection), and asyncio logs every
failed attempt. So the cap sits below the descriptor limit read at start, and at the cap a new connection
takes the place of another, chosen by what each has proven (a connection proves itself when the webhook lane
accepts an authenticated webhook head on it, and then belongs to that principal):

1. a connection that has proven nothing (a TLS handshake in progress counts, it is counted from its accept) of
   the new connection's own client address, when that address holds a quarter of the cap or more of them;
2. else the longest-silent connection that has proven nothing, of any client;
3. else, every open connection having proven itself, the longest-silent one with no request in hand of the
   principal that holds the most: one token's holders cannot keep /readyz or another principal out, and
   Alertmanager, whose kept-alive connection may be closed while idle, resends what failed on it.

Only when every open connection is in the middle of a request is the new one refused at once. A new client
that sends its request straight away is answered while a flood of idle ones holds the cap.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import time
from collections import Counter
from typing import Any, Callable, Protocol

from alertd.config.connections import ConnectionSettings
from alertd.core.service_metrics import Metrics

log = logging.getLogger(__name__)

ACCEPT_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
ACCEPT_LOG_INTERVAL = 10.0  # seconds between two log lines about failed accepts
MIN_CONNECTIONS = 8  # the cap never goes below this, whatever the descriptor limit
# The listen backlog, which is also how many connections asyncio accepts in one round before the first of them
# reaches the budget: the cap leaves room for one round.
BACKLOG = 64
CLIENT_SHARE = 4  # past 1/4 of the cap in unproven connections, a client's new one replaces its own oldest


class Held(Protocol):
    """A connection as the budget sees it."""

    proven: bool  # an authenticated webhook head arrived on it
    principal: str  # whose credentials proved it ("" until then)
    client: str  # the client's address
    last_in: float  # the budget's clock at its last bytes received (or its start)

    @property
    def quiet(self) -> bool:
        """No request in hand: closing it loses nothing sent."""

    def evict(self) -> None: ...


def open_descriptors() -> int:
    """File descriptors open in this process now (Linux: /proc/self/fd; elsewhere /dev/fd)."""
    for path in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(path))
        except OSError:
            continue
    return 0


def connection_cap(settings: ConnectionSettings, soft_limit: int | None = None, in_use: int | None = None) -> int:
    """``max_open``, lowered so that the connections, one round of accepts (``BACKLOG``), the descriptors open
    now and ``reserved_fds`` fit in the soft RLIMIT_NOFILE (read now unless given)."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY or soft_limit < 0:
        return settings.max_open
    room = soft_limit - (open_descriptors() if in_use is None else in_use) - settings.reserved_fds - BACKLOG
    return max(MIN_CONNECTIONS, min(settings.max_open, room))


class ConnectionBudget:
    """The open connections of one listening socket's process, counted; ``admit`` at the start of each."""

    def __init__(self, cap: int, metrics: Metrics, clock: Callable[[], float] = time.monotonic):
        self.cap, self.metrics, self.clock = cap, metrics, clock
        self.held: set[Held] = set()
        metrics.connections_limit.set(cap)

    def admit(self, conn: Held) -> bool:
        """Take ``conn`` in, at the cap closing another (see the module's docstring); False: refuse it."""
        if len(self.held) >= self.cap:
            victim = self.victim(conn.client)
            if victim is None:
                self.metrics.connections_refused.inc()
                return False
            self.release(victim)
            victim.evict()
            self.metrics.connections_closed.labels("evicted").inc()
        self.held.add(conn)
        self.metrics.connections_open.set(len(self.held))
        return True

    def victim(self, client: str) -> Held | None:
        """The connection a new one from ``client`` takes the place of, at the cap."""
        unproven = [c for c in self.held if not c.proven]
        own = [c for c in unproven if c.client == client]
        if len(own) >= max(1, self.cap // CLIENT_SHARE):
            return min(own, key=lambda c: c.last_in)
        if unproven:
            return min(unproven, key=lambda c: c.last_in)
        holders = Counter(c.principal for c in self.held)
        quiet = [c for c in self.held if c.quiet]
        return min(quiet, key=lambda c: (-holders[c.principal], c.last_in), default=None)

    def release(self, conn: Held) -> None:
        if conn in self.held:
            self.held.discard(conn)
            self.metrics.connections_open.set(len(self.held))


class AcceptErrors:
    """The event loop's exception handler while the server runs: a failed ``accept()`` (out of descriptors
    or memory) is counted each time and logged at most once per interval, with the number held back;
    everything else goes to the handler that was there before (or the loop's default)."""

    def __init__(self, metrics: Metrics, interval: float = ACCEPT_LOG_INTERVAL,
                 clock: Callable[[], float] = time.monotonic):
        self.metrics, self.interval, self.clock = metrics, interval, clock
        self.previous: Any = None
        self.held_back = 0
        self.logged_at: float | None = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        self.previous = loop.get_exception_handler()
        loop.set_exception_handler(self)

    def uninstall(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop.get_exception_handler() is self:
            loop.set_exception_handler(self.previous)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in ACCEPT_ERRORS and "socket" in context):
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        self.metrics.accept_errors.inc()
        now = self.clock()
        if self.logged_at is not None and now - self.logged_at < self.interval:
            self.held_back += 1
            return
        log.error("cannot accept new connections: %s (%d more since the last message; raise the file-descriptor "
                  "limit or lower connections.max_open)", exc.strerror or exc, self.held_back)
        self.logged_at, self.held_back = now, 0


# The loggers a client's bytes can make write: aiohttp's server (a traceback per malformed head) and the lane.
CLIENT_LOGGERS = ("aiohttp.server", "aiohttp.web", "alertd.web.webhook_lane")
MAX_CAUSES = 1_000  # causes remembered; past it the oldest are forgotten


class ErrorLogLimit(logging.Filter):
    """Warnings and errors of the loggers a client can provoke, at most one line per cause and interval (a cause
    is the logger, the message's template and the exception's type), the next one saying how many were held
    back; each held back is counted (``alertd_log_lines_held_back_total{logger}``)."""

    def __init__(self, metrics: Metrics, interval: float = ACCEPT_LOG_INTERVAL,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.metrics, self.interval, self.clock = metrics, interval, clock
        self.causes: dict[tuple[str, str, str], tuple[float, int]] = {}  # -> (logged at, held back since)

    def install(self) -> None:
        for name in CLIENT_LOGGERS:
            logging.getLogger(name).addFilter(self)

    def uninstall(self) -> None:
        for name in CLIENT_LOGGERS:
            logging.getLogger(name).removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind = type(record.exc_info[1]).__name__ if record.exc_info and record.exc_info[1] is not None else ""
        cause, now = (record.name, str(record.msg), kind), self.clock()
        logged_at, held = self.causes.get(cause, (None, 0))
        if logged_at is not None and now - logged_at < self.interval:
            self.causes[cause] = (logged_at, held + 1)
            self.metrics.log_lines_held_back.labels(record.name).inc()
            return False
        if len(self.causes) >= MAX_CAUSES:
            del self.causes[next(iter(self.causes))]
        self.causes.pop(cause, None)
        self.causes[cause] = (now, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like this in the last {self.interval:g} s not logged)"
        return True


__all__ = ["BACKLOG", "AcceptErrors", "ConnectionBudget", "ErrorLogLimit", "connection_cap", "open_descriptors"]
