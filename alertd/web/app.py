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
from alertd.app.incident_actions import IncidentActions
from alertd.app.receiver_group import ControlUnavailable
from alertd.core.model import parse_iso
from alertd.web import alertmanager_webhook, api, cloudevents, incidents, report_views, slack_actions, ui
from alertd.web.auth import AUTH, Authenticator, actor_for, authorize
from alertd.web.guard import EDGE, SMALL_BODY, WEBHOOK, EdgePolicy, client_from, edge
from alertd.web.host import WebHost
from alertd.web.keys import INCIDENT_ACTIONS, RELOAD, SERVICE

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
    held = svc.held_summarised
    summarised = f"{held} open incidents held summarised in memory (past processing.detailed_incidents)\n" if held else ""
    return web.Response(text=f"ready: {svc.role_name}\n{summarised}", headers=role)


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
    app[AUTH].client_from = functools.partial(client_from, app[EDGE])
    app[INCIDENT_ACTIONS] = incident_actions = IncidentActions(svc)
    app.on_cleanup.append(lambda _: incident_actions.close())
    app.router.add_post(WEBHOOK, alertmanager_webhook.receive_alertmanager)
    cloudevents.register(app)
    api.register(app)
    incidents.register(app)
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
