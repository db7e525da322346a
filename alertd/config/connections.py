"""The ``connections`` section: what one client connection may cost the process, on every route.

A connection holds a file descriptor and memory until it is closed, so each has deadlines that bytes
which start no request cannot push back, and their number has a cap below the descriptor limit. The web
server (alertd/web/server.py, alertd/web/connections.py) and the webhook lane read these; docs/security.md
lists each with its default and its metric."""
from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from alertd.core.sections import Seconds, Section, duration


class ConnectionSettings(Section, frozen=True):
    """What one client connection may cost, on every route (webhooks, API, UI, scrapes); docs/security.md lists each limit with its metric."""

    max_open: Annotated[int, Meta(ge=8, description=(
        "Open connections per process. Lowered at start to the file-descriptor limit (RLIMIT_NOFILE) less the "
        "descriptors open then and reserved_fds. At the cap a new connection closes the oldest one that has not "
        "yet sent a whole request, or is refused at once when there is none (alertd_connections_refused_total)."))] = 1024
    reserved_fds: Annotated[int, Meta(ge=0, description=(
        "File descriptors kept for the process's own files (databases, log files, outgoing HTTP) above those open "
        "at start: the cap never lets connections take them."))] = 64
    header_timeout: Annotated[Seconds, Meta(description=(
        "A request head not complete this long after its first byte closes the connection with 408 (never "
        "handed on)."))] = duration("10s")
    keepalive_timeout: Annotated[Seconds, Meta(description=(
        "A connection that starts no request this long after it opened or after its last answer is closed; bytes "
        "that start no request (empty lines) do not count. Set on aiohttp's runner too."))] = duration("75s")
    max_line_bytes: Annotated[int, Meta(ge=256, description="Longest request line (aiohttp's max_line_size).")] = 8190
    max_field_bytes: Annotated[int, Meta(ge=256, description=(
        "Longest header field, name and value (aiohttp's max_field_size)."))] = 8190
    max_headers: Annotated[int, Meta(ge=8, description="Most header fields in one request (aiohttp's max_headers).")] = 128
    max_head_bytes: Annotated[int, Meta(ge=1024, description=(
        "Largest request head, request line included; larger gets 431."))] = 65536


__all__ = ["ConnectionSettings"]
