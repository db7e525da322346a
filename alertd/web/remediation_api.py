"""Remediation over HTTP: an incident's proposals with their blast radius (role read), and approve, override
(lift the circuit breaker's hold and approve), cancel and stop (role act), each audited with its actor.

The same decisions as the Slack buttons (alertd/app/remediate.py); a second approval must come from another
principal (other credentials): an admin's ``?by=`` names who it acts for, and is recorded, but approves once.
"""
from __future__ import annotations

from aiohttp import web

from alertd.app.remediate import VERBS
from alertd.config.credentials import Role
from alertd.web import access
from alertd.web.api import _json, _svc, guarded
from alertd.web.auth import acting
from alertd.web.params import reject_unknown

KINDS = ("", "quarantine", "uncordon")


@guarded(Role.READ)
async def list_for_incident(request: web.Request) -> web.Response:
    reject_unknown(request.query, ())
    incident_id = request.match_info["id"]
    svc = _svc(request)
    if await svc.store.get_incident(incident_id) is None:
        return _json({"error": f"no incident {incident_id}"}, 404)
    return _json({"remediations": await svc.remediation.for_incident(incident_id)})


@guarded(Role.READ)
async def list_all(request: web.Request) -> web.Response:
    reject_unknown(request.query, ("state", "cluster"))
    states = tuple(s for s in request.query.get("state", "").split(",") if s)
    docs = await _svc(request).store.list_remediations(states=states, cluster=request.query.get("cluster"))
    return _json({"remediations": docs})


@guarded(Role.ACT)
async def act(request: web.Request) -> web.Response:
    reject_unknown(request.query, ("kind", "by"))
    incident_id, verb = request.match_info["id"], request.match_info["verb"]
    kind = request.query.get("kind", "")
    if verb not in VERBS:
        return _json({"error": f"unknown remediation action {verb!r}; one of {', '.join(VERBS)}"}, 404)
    if kind not in KINDS:
        return _json({"error": f"kind must be quarantine or uncordon, not {kind!r}"}, 400)
    svc = _svc(request)
    if await svc.store.get_incident(incident_id) is None:
        return _json({"error": f"no incident {incident_id}"}, 404)
    problem = await svc.remediation.act(incident_id, verb, acting(request[access.PRINCIPAL], request), "api", kind=kind)
    if problem:
        return _json({"error": problem}, 409)
    return _json({"remediations": await svc.remediation.for_incident(incident_id)})


def register(app: web.Application) -> None:
    app.router.add_get("/api/v1/remediations", list_all)
    app.router.add_get("/api/v1/incidents/{id}/remediations", list_for_incident)
    app.router.add_post("/api/v1/incidents/{id}/remediation/{verb}", act)
