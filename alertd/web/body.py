"""Reading request bodies with a deadline: a client that stops sending must not hold a request forever."""
from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web


async def read_body(request: web.Request, timeout: float) -> bytes:
    """The whole body, or asyncio.TimeoutError after ``timeout`` seconds.

    Answer 408 with ``Connection: close``: aiohttp then waits at most its lingering
    time (10 s) for the rest of the body and closes the connection."""
    if request.content.is_eof():  # it came with the headers (most webhooks do): no timer, no task
        return await request.read()
    async with asyncio.timeout(timeout):
        return await request.read()


async def read_form(request: web.Request, timeout: float) -> Any:
    """A form body (urlencoded or multipart); a malformed one is a 400, a stalled one a 408."""
    try:
        return await asyncio.wait_for(request.post(), timeout)
    except asyncio.TimeoutError:
        raise web.HTTPRequestTimeout(text="the form did not arrive in time", headers={"Connection": "close"}) from None
    except (ValueError, UnicodeDecodeError) as exc:  # e.g. multipart without a boundary, bad encoding
        raise web.HTTPBadRequest(text=f"malformed form body: {exc}") from None
