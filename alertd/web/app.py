"""HTTP edge: the Alertmanager receiver, the read API, health and metrics."""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from datetime import datetime
from importlib import resources
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from alertd.config.credentials import Role
from alertd.ha.commands import CommandTimeout
from alertd.app.receiver_group import ControlUnavailable
from alertd.core.model import parse_iso
from alertd.receive.payload import BadPayload, read_notification
from alertd.store.base import StoreUnavailable
from alertd.web import api, remediation_api, report_views, slack_actions, ui
from alertd.web.auth import AUTH, Authenticator, actor_for, authorize
from alertd.web.body import read_body
from alertd.web.guard import EDGE, SMALL_BODY, EdgePolicy, client_address, edge
from alertd.web.host import WebHost
from alertd.web.keys import RELOAD, SERVICE

log = logging.getLogger(__name__)


def _json(data: Any, status: int = 200, **kw: Any) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str), **kw)


async def receive_alertmanager(request: web.Request) -> web.Response:
    svc = request.app[SERVICE]
    started = time.perf_counter()
    try:
        request.app[AUTH].authorize_webhook(request)
    except web.HTTPUnauthorized:
        svc.metrics.rejected.labels("unauthorized").inc()
        raise
    if request.content_length is not None and request.content_length > svc.cfg.max_body_bytes:
        svc.metrics.rejected.labels("too_large").inc()
        return _json({"error": f"body of {request.content_length} bytes exceeds the limit of {svc.cfg.max_body_bytes}"}, 413,
                     headers={"Connection": "close"})
    if (refusal := svc.backlog_refusal()) is not None:  # before the body is read: shedding load costs little
        svc.metrics.rejected.labels("backlog").inc()
        return _json({"error": refusal}, 503, headers={"Retry-After": "5"})
    try:
        raw = await read_body(request, svc.cfg.body_timeout, svc.cfg.max_body_bytes)  # stops past the limit
    except asyncio.TimeoutError:
        svc.metrics.rejected.labels("body_timeout").inc()
        return _json({"error": f"the body did not arrive within {svc.cfg.body_timeout:g} s"}, 408,
                     headers={"Connection": "close"})
    except web.HTTPRequestEntityTooLarge:
        svc.metrics.rejected.labels("too_large").inc()
        return _json({"error": f"body exceeds the limit of {svc.cfg.max_body_bytes} bytes"}, 413,
                     headers={"Connection": "close"})
    received_at = svc.clock()
    try:
        note = read_notification(raw, received_at, build=False)
    except BadPayload as exc:
        svc.metrics.rejected.labels(exc.reason).inc()
        return _json(exc.to_json(), 400)
    try:
        await svc.receive(raw, note.count, received_at)
    except StoreUnavailable as exc:
        svc.metrics.rejected.labels("store_unavailable").inc()
        log.error("webhook not stored, answering 503 so Alertmanager retries: %s", exc)
        return _json({"error": "alerts could not be stored; retry later"}, 503, headers={"Retry-After": "5"})
    svc.metrics.webhooks.inc()
    if (recorder := getattr(svc, "recorder", None)) is not None:  # alertd serve --record: buffered append
        recorder.write(received_at, raw)
    if note.truncated:
        svc.metrics.truncated.inc(note.truncated)
        log.warning("Alertmanager truncated %d alerts of group %s (raise max_alerts or set it to 0)%s",
                    note.truncated, note.group_key, "; reading the full group from Alertmanager" if svc.reconciler else "")
        if svc.reconciler is not None:
            svc.background(svc.reconciler.fetch_group(note.group_labels, note.receiver))
    svc.metrics.ack_latency.observe(time.perf_counter() - started)
    # Formatted here: the hottest answer alertd gives.
    return web.Response(body=b'{"status": "stored", "alerts": %d, "truncatedAlerts": %d}' % (note.count, note.truncated),
                        content_type="application/json")


def _bad_query(field: str, message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=json.dumps({"error": message, "field": field}), content_type="application/json")


def _since_and_limit(q: Any) -> tuple[datetime | None, int]:
    """The ``since`` (RFC 3339) and ``limit`` (1..1000, default 100) query parameters, or a 400 naming the field."""
    since: datetime | None = None
    if q.get("since"):
        try:
            since = parse_iso(q["since"])
        except (ValueError, OverflowError):
            raise _bad_query("since", "since must be an RFC 3339 timestamp") from None
    try:
        limit = min(1000, max(1, int(q.get("limit", "100"))))
    except ValueError:
        raise _bad_query("limit", "limit must be an integer") from None
    return since, limit


async def get_incident(request: web.Request) -> web.Response:
    authorize(request, Role.READ)
    inc = await request.app[SERVICE].store.get_incident(request.match_info["id"])
    if inc is None:
        return _json({"error": f"no incident {request.match_info['id']}"}, 404)
    return _json(inc.to_dict())


async def act_on_incident(request: web.Request) -> web.Response:
    principal = authorize(request, Role.ACT)
    svc = request.app[SERVICE]
    incident_id, action = request.match_info["id"], request.match_info["action"]
    actor = actor_for(principal, request)
    try:
        changes = await (svc.acknowledge if action == "ack" else svc.resolve)(incident_id, actor)
    except CommandTimeout as exc:
        return _json({"error": str(exc)}, 503, headers={"Retry-After": "5"})
    if changes:
        await svc.audit(actor, action, incident_id, "api")
        return _json(changes[0].incident.to_dict(with_members=False))
    inc = await svc.store.get_incident(incident_id)
    if inc is None:
        return _json({"error": f"no incident {incident_id}"}, 404)
    await svc.audit(actor, action, incident_id, "api", f"refused: incident is {inc.status}")
    return _json({"error": f"incident {incident_id} is {inc.status}: nothing to {action}"}, 409)


@functools.cache
def openapi_document() -> bytes:
    return resources.files("alertd.web").joinpath("openapi.yaml").read_bytes()


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=openapi_document(), content_type="application/yaml")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    """Ready means webhooks are taken; the role (leader, follower, receiver) is in the body and a header."""
    svc = request.app[SERVICE]
    role = {"X-Alertd-Role": svc.role_name}
    if not svc.ready:
        return web.Response(status=503, text="starting or stopping\n", headers=role)
    if failure := svc.health.failure():
        return web.Response(status=503, text=f"{failure}\n", headers=role)
    return web.Response(text=f"ready: {svc.role_name}\n", headers=role)


async def metrics(request: web.Request) -> web.Response:
    """This process's metrics, or under ``serve --receivers N`` the whole group's (alertd/core/service_metrics.py)."""
    return web.Response(body=request.app[SERVICE].metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def reload(request: web.Request) -> web.Response:
    principal = authorize(request, Role.ADMIN)
    svc = request.app[SERVICE]
    if (forward := request.app.get(RELOAD)) is not None:
        try:
            ok, error = await forward()
        except ControlUnavailable as exc:
            await svc.audit(actor_for(principal, request), "reload", "rules", "api", "failed", str(exc))
            return _json({"error": str(exc)}, 503, headers={"Retry-After": "5"})
    else:
        ok, error = svc.reload_rules()
    await svc.audit(actor_for(principal, request), "reload", "rules", "api", "ok" if ok else "failed", error)
    return _json({"status": "reloaded"} if ok else {"error": error}, 200 if ok else 500)


async def list_audit(request: web.Request) -> web.Response:
    authorize(request, Role.ADMIN)
    q = request.query
    since, limit = _since_and_limit(q)
    entries = await request.app[SERVICE].store.list_audit(since=since, actor=q.get("actor") or None,
                                                          action=q.get("action") or None, limit=limit)
    return _json({"entries": [e.to_dict() for e in entries]})


def build_app(svc: WebHost, auth: Authenticator | None = None) -> web.Application:
    """The routes over ``svc``; starting and stopping the service is its owner's (alertd/app/lifecycle.py).
    ``auth`` defaults to the configuration's credentials (``alertd serve`` passes its own for --insecure-no-auth)."""
    # Bodies are read by alertd.web.body with each route's limit (alertd.web.guard); aiohttp's own cap, for
    # anything that would call request.read(), is the small one.
    app = web.Application(client_max_size=SMALL_BODY, middlewares=[edge])
    app[SERVICE] = svc
    app[EDGE] = EdgePolicy.from_config(svc.cfg)
    app[AUTH] = auth or Authenticator.from_config(svc.cfg, failures=svc.metrics.auth_failures)
    app[AUTH].client_of = client_address
    app.router.add_post("/api/v1/alerts/alertmanager", receive_alertmanager)
    api.register(app)
    remediation_api.register(app)
    app.router.add_get("/api/v1/incidents/{id}", get_incident)
    app.router.add_post("/api/v1/incidents/{id}/{action:ack|resolve}", act_on_incident)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/-/reload", reload)
    app.router.add_get("/api/v1/audit", list_audit)
    app.router.add_get("/api/v1/openapi.yaml", openapi)
    slack_actions.register(app)
    ui.register(app)
    report_views.register(app)
    return app
