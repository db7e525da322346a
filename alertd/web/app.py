"""HTTP edge: the Alertmanager receiver, the read API, health and metrics."""
from __future__ import annotations

import functools
import json
import logging
from datetime import datetime
from importlib import resources
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from alertd.config.credentials import Role
from alertd.ha.commands import CommandTimeout
from alertd.app.receiver_group import ControlUnavailable
from alertd.core.model import parse_iso
from alertd.web import alertmanager_webhook, api, cloudevents, remediation_api, report_views, slack_actions, ui
from alertd.web.auth import AUTH, Authenticator, actor_for, authorize
from alertd.web.guard import EDGE, SMALL_BODY, WEBHOOK, EdgePolicy, client_address, edge
from alertd.web.host import WebHost
from alertd.web.keys import RELOAD, SERVICE

log = logging.getLogger(__name__)


def _json(data: Any, status: int = 200, **kw: Any) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str), **kw)


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
    app.router.add_post(WEBHOOK, alertmanager_webhook.receive_alertmanager)
    cloudevents.register(app)
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
