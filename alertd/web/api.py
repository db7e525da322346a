"""Read API over the fleet (GPUs, nodes, RMA candidates), the quarantine, and what the API's routes share.

The incident routes are alertd/web/incidents.py's.

Every list answers ``{"<items>": [...], "next": cursor-or-null}``; pass ``next`` back as
``?cursor=`` for the following page. Unknown parameters answer 400 naming them.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Mapping

from aiohttp import web

from alertd.config.credentials import Role
from alertd.core.json_types import JSONObject, text
from alertd.rules import rma
from alertd.web import fleet_views as views
from alertd.store.base import StoreUnavailable
from alertd.store.reads import IncidentQuery
from alertd.web import access
from alertd.web.fleet_views import FleetReads
from alertd.web.host import WebHost
from alertd.web.keys import SERVICE
from alertd.web.auth import actor_for, authorize
from alertd.core.incident_filters import FILTER_NAMES, SORTS
from alertd.web.worst_first import cursor_of, worst_first_page
from alertd.web.params import (PAGING, BadParam, decode_cursor, encode_cursor, incident_query, limit_of, reject_unknown,
                               sequence_cursor)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200, **kw: Any) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str), **kw)


def guarded(role: Role) -> Callable[[Handler], Handler]:
    """401 without credentials, 403 without the role (alertd.web.auth), 400 for a BadParam from the handler."""
    def wrap(handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            request[access.PRINCIPAL] = authorize(request, role)
            try:
                return await handler(request)
            except BadParam as exc:
                return _json(exc.to_json(), 400)
        return run
    return wrap


def _svc(request: web.Request) -> WebHost:
    return request.app[SERVICE]


async def resolve_gpu_filter(store: FleetReads, q: IncidentQuery, ident: str) -> bool:
    """Turn ?gpu= (UUID, serial or PCI id) into UUIDs on the query; False when no GPU is known by it."""
    if not ident:
        return True
    q.gpus = [text(g, "uuid") for g in await store.find_gpus(ident)]
    return bool(q.gpus)




async def incident_page(store: FleetReads, query: Mapping[str, str]) -> tuple[list[JSONObject], str | None]:
    """One page of incidents for these query parameters, the worst first unless ``sort=newest`` (raises
    BadParam)."""
    sort = query.get("sort", "") or SORTS[0]
    if sort not in SORTS:
        raise BadParam("sort", f"sort must be one of {', '.join(SORTS)}")
    worst = sort == "worst"
    cursor = cursor_of(query) if worst else (0, None)
    q, ident = incident_query({k: v for k, v in query.items() if not (worst and k == "cursor")},
                              allowed=FILTER_NAMES + PAGING + ("sort",))
    if not await resolve_gpu_filter(store, q, ident):
        return [], None
    if worst:
        rows, nxt = await worst_first_page(store, q, cursor)
        return [doc for _, doc in rows], nxt
    limit = q.limit
    q.limit = limit + 1
    rows = await store.query_incidents(q)
    page = rows[:limit]
    return [doc for _, doc in page], encode_cursor(page[-1][0]) if len(rows) > limit else None


@guarded(Role.READ)
async def list_gpus(request: web.Request) -> web.Response:
    reject_unknown(request.query, ("node", "gpu") + PAGING)
    store, limit = _svc(request).store, limit_of(request.query)
    if request.query.get("gpu"):
        return _json({"gpus": await store.find_gpus(request.query["gpu"]), "next": None})
    cursor = decode_cursor(request.query, 2)
    rows = await store.list_gpus(node=request.query.get("node", ""), before=(cursor[0], cursor[1]) if cursor else None,
                                 limit=limit + 1)
    page = rows[:limit]
    nxt = encode_cursor(page[-1]["last_seen"], page[-1]["uuid"]) if len(rows) > limit else None
    return _json({"gpus": page, "next": nxt})


@guarded(Role.READ)
async def show_gpu(request: web.Request) -> web.Response:
    """By UUID; a serial or PCI id naming exactly one GPU works too (several: 409 with the list)."""
    reject_unknown(request.query, ())
    store, ident = _svc(request).store, request.match_info["uuid"]
    view, found = await views.find_gpu_view(store, ident)
    if view is None and found:
        return _json({"error": f"{ident} names {len(found)} GPUs; use a UUID", "gpus": found}, 409)
    if view is None:
        return _json({"error": f"no GPU known by {ident} (UUID, serial or PCI id)"}, 404)
    return _json(view)


@guarded(Role.READ)
async def show_node(request: web.Request) -> web.Response:
    reject_unknown(request.query, PAGING)
    cursor = sequence_cursor(request.query)
    view = await views.node_view(_svc(request).store, request.match_info["node"], limit=limit_of(request.query),
                                 before=cursor)
    if not view["incidents"] and not view["gpus"] and cursor is None:
        return _json({"error": f"no incident or GPU known on node {request.match_info['node']}"}, 404)
    view["next"] = encode_cursor(view["next"]) if view["next"] is not None else None
    return _json(view)


def rma_csv(candidates: list[rma.Candidate]) -> web.Response:
    return web.Response(text=rma.to_csv(candidates), content_type="text/csv", charset="utf-8",
                        headers={"Content-Disposition": 'attachment; filename="rma-candidates.csv"'})


@guarded(Role.READ)
async def rma_candidates(request: web.Request) -> web.Response:
    """All candidates in one page (a fleet has few); ``format=csv`` for the vendor ticket."""
    reject_unknown(request.query, ("format",) + PAGING)
    fmt = request.query.get("format", "json")
    if fmt not in ("json", "csv"):
        raise BadParam("format", "format must be json or csv")
    svc = _svc(request)
    candidates = await views.rma_candidates(svc.store, svc.rules.rma, datetime.now(timezone.utc))
    limit = limit_of(request.query)
    cursor = decode_cursor(request.query, 1)
    start = int(cursor[0]) if cursor and cursor[0].isdigit() else 0
    page = candidates[start:start + limit]
    if fmt == "csv":
        return rma_csv(page)
    nxt = encode_cursor(start + limit) if start + limit < len(candidates) else None
    return _json({"candidates": [c.to_dict() for c in page], "next": nxt})


@guarded(Role.ADMIN)
async def list_quarantine(request: web.Request) -> web.Response:
    """Webhooks and alerts the engine set aside (poison, failures), newest first, with the reason and body."""
    reject_unknown(request.query, PAGING)
    limit, cursor = limit_of(request.query), sequence_cursor(request.query)
    rows = await _svc(request).store.list_set_aside(limit=limit + 1, before=cursor)
    page = rows[:limit]
    return _json({"items": [r.to_dict() for r in page],
                  "next": encode_cursor(page[-1].id) if len(rows) > limit else None})


@guarded(Role.ADMIN)
async def replay_quarantined(request: web.Request) -> web.Response:
    """Send a set-aside webhook or alert through the engine again (after a rule fix); audited."""
    reject_unknown(request.query, ())
    raw = request.match_info["id"]
    svc = _svc(request)
    try:
        found = await svc.replay(int(raw)) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None
    except StoreUnavailable as exc:  # marked replayed but not appended: replaying it again appends it
        return _json({"error": f"the store refused the replay, retry: {exc}"}, 503, headers={"Retry-After": "5"})
    actor = actor_for(request[access.PRINCIPAL], request)
    if found is None:
        return _json({"error": f"nothing set aside with id {raw}"}, 404)
    item, hook_id = found
    await svc.audit(actor, "replay", f"quarantine:{item.id}", "api", "ok", f"appended as webhook {hook_id}")
    return _json({"item": item.to_dict(body_chars=0), "webhook": hook_id}, 202)


def register(app: web.Application) -> None:
    app.router.add_get("/api/v1/quarantine", list_quarantine)
    app.router.add_post("/api/v1/quarantine/{id}/replay", replay_quarantined)
    app.router.add_get("/api/v1/gpus", list_gpus)
    app.router.add_get("/api/v1/gpus/{uuid}", show_gpu)
    app.router.add_get("/api/v1/nodes/{node}", show_node)
    app.router.add_get("/api/v1/rma-candidates", rma_candidates)
