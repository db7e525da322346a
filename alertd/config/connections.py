"""The ``connections`` section: what one client connection may cost the process, on every route.

A connection holds a file descriptor and memory until it is closed, so each has deadlines that bytes
which start no request cannot push back, and their number has a cap below the descriptor limit. The web
server (alertd/web/server.py, alertd/web/connections.py) and the webhook lane read these; docs/security.md
lists each with its default and its metric."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from alertd.core.durations import parse_duration


class ConnectionsDoc(TypedDict, total=False):
    """The ``connections`` config section as config.schema.json admits it."""

    max_open: int
    reserved_fds: int
    header_timeout: str
    keepalive_timeout: str
    max_line_bytes: int
    max_field_bytes: int
    max_headers: int
    max_head_bytes: int


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """Deadlines in seconds, sizes in bytes; the header limits are aiohttp's own defaults."""

    max_open: int = 1024  # open connections per process; lowered at start to fit the descriptor limit
    reserved_fds: int = 64  # descriptors kept for the process's own files above those open at start
    header_timeout: float = 10.0  # from a request's first byte to the end of its head
    keepalive_timeout: float = 75.0  # from a connection's start or its last answer to the next request
    max_line_bytes: int = 8190  # the request line
    max_field_bytes: int = 8190  # one header field, name and value
    max_headers: int = 128  # header fields in one head
    max_head_bytes: int = 65536  # the whole head, request line included

    @classmethod
    def from_doc(cls, doc: ConnectionsDoc | None) -> "ConnectionSettings":
        doc, base = doc or {}, cls()

        def secs(value: str | None, default: float) -> float:
            return parse_duration(value).total_seconds() if value is not None else default

        return cls(max_open=doc.get("max_open", base.max_open), reserved_fds=doc.get("reserved_fds", base.reserved_fds),
                   header_timeout=secs(doc.get("header_timeout"), base.header_timeout),
                   keepalive_timeout=secs(doc.get("keepalive_timeout"), base.keepalive_timeout),
                   max_line_bytes=doc.get("max_line_bytes", base.max_line_bytes),
                   max_field_bytes=doc.get("max_field_bytes", base.max_field_bytes),
                   max_headers=doc.get("max_headers", base.max_headers),
                   max_head_bytes=doc.get("max_head_bytes", base.max_head_bytes))


__all__ = ["ConnectionSettings"]
