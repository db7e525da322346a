"""Reading request bodies with a deadline: a client that stops sending must not hold a request forever."""
from __future__ import annotations

import asyncio

from aiohttp import web


async def read_body(request: web.Request, timeout: float) -> bytes:
    """The whole body, or asyncio.TimeoutError after ``timeout`` seconds.

    Answer 408 with ``Connection: close``: aiohttp then waits at most its lingering
    time (10 s) for the rest of the body and closes the connection."""
    return await asyncio.wait_for(request.read(), timeout)
