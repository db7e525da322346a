"""CloudEvents in (HTTP binding): NVSentinel's health events and the generic GPU-health event.

Authenticated as the webhook is (receiver credentials); the same limits and backlog refusal; the
events become alerts (alertd/receive/cloudevents.py) appended to the inbox log as one webhook, so
they take the webhook's path through the engine. 200 only after that write; a bad event is 400
naming the field, and stores nothing of its request; a redelivered event is stored again and its
alert dropped by the engine's delivery key (alertd_alerts_duplicate_total).
"""
from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from alertd.receive.cloudevents import read_cloudevents
from alertd.receive.payload import BadPayload, encode_webhook, read_notification
from alertd.store.base import StoreUnavailable
from alertd.web.alertmanager_webhook import CLOSE, RETRY, error, refusal
from alertd.web.auth import AUTH
from alertd.web.body import read_body
from alertd.web.guard import CLOUDEVENTS
from alertd.web.keys import SERVICE

log = logging.getLogger(__name__)
RECEIVER = "cloudevents"


async def receive_cloudevents(request: web.Request) -> web.Response:
    svc = request.app[SERVICE]
    settings = svc.cfg.sources.cloudevents
    if not settings.enabled:
        raise web.HTTPNotFound()
    try:
        request.app[AUTH].authorize_webhook(request)
    except web.HTTPUnauthorized:
        svc.metrics.rejected.labels("unauthorized").inc()
        raise
    if (refused := refusal(svc, request.content_length)) is not None:
        return refused.response()
    try:
        raw = await read_body(request, svc.cfg.body_timeout, svc.cfg.max_body_bytes)
    except asyncio.TimeoutError:
        return error(408, f"the body did not arrive within {svc.cfg.body_timeout:g} s", CLOSE).response()
    except web.HTTPRequestEntityTooLarge:
        return error(413, f"body exceeds the limit of {svc.cfg.max_body_bytes} bytes", CLOSE).response()
    received_at = svc.clock()
    try:
        alerts = read_cloudevents(request.headers, raw, settings.cluster)
        body = encode_webhook(alerts, RECEIVER)
        read_notification(body, received_at, build=False)  # what the engine will read back, checked as a webhook
    except BadPayload as exc:
        svc.metrics.cloudevents.labels("invalid").inc()
        return web.json_response(exc.to_json(), status=400)
    try:
        await svc.receive(body, len(alerts), received_at)
    except StoreUnavailable as exc:
        svc.metrics.rejected.labels("store_unavailable").inc()
        log.error("CloudEvents not stored, answering 503 so the sender retries: %s", exc)
        return error(503, "events could not be stored; retry later", RETRY).response()
    svc.metrics.cloudevents.labels("stored").inc(len(alerts))
    return web.Response(status=200, body=json.dumps({"status": "stored", "events": len(alerts)}).encode(),
                        content_type="application/json")


def register(app: web.Application) -> None:
    app.router.add_post(CLOUDEVENTS, receive_cloudevents)


__all__ = ["RECEIVER", "receive_cloudevents", "register"]
