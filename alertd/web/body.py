"""Reading request bodies with a deadline and a size limit: a client that stops sending must not hold a
request forever, and one that sends too much must not make alertd buffer it.

The body is read from the stream in the chunks the socket delivers, and reading stops
as soon as it passes the route's limit (alertd.web.guard has already refused a larger
``Content-Length`` before the handler ran; this catches chunked bodies, which name no
length). aiohttp's own ``client_max_size`` would buffer up to one app-wide limit.
"""
from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl

from aiohttp import web
from multidict import MultiDict

from alertd.web.guard import EDGE, FORM, SMALL_BODY, route_of

MAX_FIELDS = 50  # a UI form has two or three


async def read_body(request: web.Request, timeout: float, limit: int | None = None) -> bytes:
    """The whole body (at most ``limit`` bytes, by default the route's, else 413), or asyncio.TimeoutError
    after ``timeout`` seconds.

    Answer 408 with ``Connection: close``: aiohttp then waits at most its lingering
    time (10 s) for the rest of the body and closes the connection."""
    if limit is None:
        limit = request.app[EDGE].body_limit(route_of(request)) or SMALL_BODY
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit, request.content_length)
    if request.content.is_eof():  # it came with the headers (most webhooks do): no timer, no task
        return await _drain(request, limit)
    async with asyncio.timeout(timeout):
        return await _drain(request, limit)


async def _drain(request: web.Request, limit: int) -> bytes:
    body = bytearray()
    while chunk := await request.content.readany():
        body += chunk
        if len(body) > limit:
            raise _too_large(limit, len(body))
    return bytes(body)


def _too_large(limit: int, size: int) -> web.HTTPRequestEntityTooLarge:
    return web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size, headers={"Connection": "close"})


async def read_form(request: web.Request, timeout: float, limit: int = SMALL_BODY) -> MultiDict[str]:
    """An urlencoded form (what alertd's pages post); another type is a 415, a malformed one a 400, a stalled
    one a 408, a large one a 413."""
    if request.body_exists and request.content_type != FORM:
        raise web.HTTPUnsupportedMediaType(text=f"this form takes {FORM}, not {request.content_type}")
    try:
        raw = await read_body(request, timeout, limit)
    except asyncio.TimeoutError:
        raise web.HTTPRequestTimeout(text="the form did not arrive in time", headers={"Connection": "close"}) from None
    try:
        fields = parse_qsl(raw.decode(request.charset or "utf-8"), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except (ValueError, LookupError) as exc:  # bad encoding, too many fields, an unknown charset
        raise web.HTTPBadRequest(text=f"malformed form body: {exc}") from None
    return MultiDict(fields)
