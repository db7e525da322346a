"""Alertmanager's webhook: what alertd answers a notification, whichever way the request arrived.

Two ways lead here. aiohttp's route (``receive_alertmanager``) takes every request
to the webhook's path; the lane (alertd/web/webhook_lane.py) takes the plain ones,
which is every one Alertmanager sends, without building an aiohttp request. Both
end in ``refusal`` and ``accept``, so an answer, a metric or a log line cannot
differ between them.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from aiohttp import web

from alertd.receive.payload import BadPayload, read_notification
from alertd.store.base import StoreUnavailable
from alertd.web.auth import AUTH
from alertd.web.body import read_body
from alertd.web.host import WebHost
from alertd.web.keys import SERVICE

log = logging.getLogger(__name__)

JSON = "application/json; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Answer:
    """A response as data: the lane writes it on the socket, aiohttp's route turns it into a web.Response."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def closes(self) -> bool:
        return ("Connection", "close") in self.headers

    def response(self) -> web.Response:
        return web.Response(status=self.status, body=self.body, headers={"Content-Type": self.content_type,
                                                                          **dict(self.headers)})


def error(status: int, message: str, *headers: tuple[str, str]) -> Answer:
    return Answer(status, json.dumps({"error": message}).encode(), headers=headers)


CLOSE = ("Connection", "close")
RETRY = ("Retry-After", "5")


def refusal(svc: WebHost, content_length: int | None) -> Answer | None:
    """What is refused before the body is read: a body over the limit, or any while the inbox is too far behind
    (shedding load before reading it costs little)."""
    if content_length is not None and content_length > svc.cfg.max_body_bytes:
        svc.metrics.rejected.labels("too_large").inc()
        return error(413, f"body of {content_length} bytes exceeds the limit of {svc.cfg.max_body_bytes}", CLOSE)
    if (backlog := svc.backlog_refusal()) is not None:
        svc.metrics.rejected.labels("backlog").inc()
        return error(503, backlog, RETRY)
    return None


def timed_out(svc: WebHost) -> Answer:
    svc.metrics.rejected.labels("body_timeout").inc()
    return error(408, f"the body did not arrive within {svc.cfg.body_timeout:g} s", CLOSE)


async def accept(svc: WebHost, raw: bytes, started: float) -> Answer:
    """Check a whole body, store it, and say so: the answer Alertmanager waits for. ``started``: when the request
    arrived (time.perf_counter), for the acknowledgement latency."""
    received_at = svc.clock()
    try:
        note = read_notification(raw, received_at, build=False)
    except BadPayload as exc:
        svc.metrics.rejected.labels(exc.reason).inc()
        return Answer(400, json.dumps(exc.to_json()).encode())
    try:
        await svc.receive(raw, note.count, received_at)
    except StoreUnavailable as exc:
        svc.metrics.rejected.labels("store_unavailable").inc()
        log.error("webhook not stored, answering 503 so Alertmanager retries: %s", exc)
        return error(503, "alerts could not be stored; retry later", RETRY)
    svc.metrics.webhooks.inc()
    if (recorder := svc.recorder) is not None:  # alertd serve --record: buffered append
        recorder.write(received_at, raw)
    if note.truncated:
        svc.metrics.truncated.inc(note.truncated)
        log.warning("Alertmanager truncated %d alerts of group %s (raise max_alerts or set it to 0)%s",
                    note.truncated, note.group_key, "; reading the full group from Alertmanager" if svc.reconciler else "")
        if svc.reconciler is not None:
            svc.background(svc.reconciler.fetch_group(note.group_labels, note.receiver))
    svc.metrics.ack_latency.observe(time.perf_counter() - started)
    # Formatted here: the hottest answer alertd gives.
    return Answer(200, b'{"status": "stored", "alerts": %d, "truncatedAlerts": %d}' % (note.count, note.truncated),
                  "application/json")


async def receive_alertmanager(request: web.Request) -> web.Response:
    """The route: credentials, the refusals, the body within its deadline and limit, then ``accept``."""
    svc = request.app[SERVICE]
    started = time.perf_counter()
    try:
        request.app[AUTH].authorize_webhook(request)
    except web.HTTPUnauthorized:
        svc.metrics.rejected.labels("unauthorized").inc()
        raise
    except web.HTTPTooManyRequests:
        svc.metrics.rejected.labels("throttled").inc()
        raise
    if (refused := refusal(svc, request.content_length)) is not None:
        return refused.response()
    try:
        raw = await read_body(request, svc.cfg.body_timeout, svc.cfg.max_body_bytes)  # stops past the limit
    except asyncio.TimeoutError:
        return timed_out(svc).response()
    except web.HTTPRequestEntityTooLarge:
        svc.metrics.rejected.labels("too_large").inc()
        return error(413, f"body exceeds the limit of {svc.cfg.max_body_bytes} bytes", CLOSE).response()
    return (await accept(svc, raw, started)).response()


__all__ = ["Answer", "accept", "receive_alertmanager", "refusal", "timed_out"]
