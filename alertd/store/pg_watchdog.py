"""Notices a PostgreSQL link that went dead without the socket saying so, and closes it.

TCP keepalives and TCP_USER_TIMEOUT (set on every connection) end a connection whose peer stopped
answering, but only when the silence is on the wire between alertd and the server. Behind a
middlebox (a connection pooler, a cloud SQL proxy, a sidecar) the socket alertd holds stays healthy
while the path behind it is gone, and a call would wait forever: webhooks would hang instead of
being answered 503, and /readyz would stay green.

Every statement the store sends is stamped (:func:`timed_cursor`); the server cancels any
statement after ``statement_timeout``, so a round trip still unanswered ``deadline`` seconds after
the last stamp means the link is dead: the watchdog shuts the socket down, the call fails with
``OperationalError`` (the store's "unavailable"), and the next call connects again.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any, Callable

import psycopg

log = logging.getLogger(__name__)


class RoundTrip:
    """When the store's current call last sent something (0: no call running)."""

    def __init__(self) -> None:
        self.sent_at = 0.0

    def stamp(self) -> None:
        self.sent_at = time.monotonic()

    def done(self) -> None:
        self.sent_at = 0.0


def timed_cursor(trip: RoundTrip) -> type[psycopg.Cursor[Any]]:
    """A cursor class that stamps ``trip`` each time a statement is sent."""

    class TimedCursor(psycopg.Cursor[Any]):
        def execute(self, *args: Any, **kwargs: Any) -> Any:
            trip.stamp()
            return super().execute(*args, **kwargs)

        def executemany(self, *args: Any, **kwargs: Any) -> Any:
            trip.stamp()
            return super().executemany(*args, **kwargs)

    return TimedCursor


class Watchdog:
    """A daemon thread that shuts down the socket of a call silent for ``deadline`` seconds."""

    def __init__(self, trip: RoundTrip, connection: Callable[[], Any], deadline: float, every: float = 1.0):
        self.trip, self.connection, self.deadline, self.every = trip, connection, deadline, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="alertd-pg-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            sent = self.trip.sent_at
            if sent and time.monotonic() - sent > self.deadline:
                self.trip.done()  # once per silence
                self._cut(time.monotonic() - sent)

    def _cut(self, silent: float) -> None:
        conn = self.connection()
        try:
            fd = conn.pgconn.socket
            with socket.socket(fileno=socket.dup(fd)) as sock:  # the copy shares the connection's socket
                sock.shutdown(socket.SHUT_RDWR)
        except Exception as exc:  # already closed or reconnecting: nothing left to cut
            log.debug("PostgreSQL watchdog: nothing to close (%s)", exc)
            return
        log.warning("no answer from PostgreSQL for %.0fs: closing the connection (the path to the server is dead)",
                    silent)
