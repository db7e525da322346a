"""The incident routes of the API, in one place: list and show (role read); acknowledge, resolve, silence,
unsilence and the RMA handoff (role act); an incident's remediations with their blast radius (read), and
approve, override, cancel and stop (act). A verb's segment is its word in alertd/core/verbs.py
(``POST .../{id}/ack``; a remediation verb's ``POST .../{id}/remediation/approve``), read here for the API and
the UI's forms alike.

Every action is the use case of alertd/app/incident_actions.py for the caller's principal (alertd.web.auth
``acting``: an admin's ``?by=NAME`` is recorded beside it, never instead); the web UI's buttons come through
``perform`` too. A second remediation approval must come from another principal.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from aiohttp import web

from alertd.core.verbs import by_word, declared, words
from alertd.alertmanager.silences import AlertmanagerError, silence_duration
from alertd.app.silence_preview import SilenceOverlap
from alertd.config.credentials import Role
from alertd.core.actor import Actor
from alertd.core.vocabulary import RemediationKind
from alertd.ha.commands import CommandTimeout
from alertd.web import access
from alertd.web.api import _json, _svc, guarded, incident_page
from alertd.web.auth import acting
from alertd.web.keys import INCIDENT_ACTIONS
from alertd.web.params import reject_unknown
from alertd.web.states import routing_notes

KINDS = ("", *RemediationKind)  # "": the one waiting


async def perform(request: web.Request, incident_id: str, verb: str, who: Actor, via: str,
                  duration: str = "", kind: str = "", force: bool = False) -> tuple[int, str]:
    """One verb of alertd/app/incident_actions.py on an incident that must exist: (HTTP status, why not or "").
    A silence that would mute another open incident raises SilenceOverlap unless ``force``."""
    if (spec := declared(verb)) and spec.duration and isinstance(problem := silence_duration(duration), str):
        return 400, problem
    if await _svc(request).store.get_incident(incident_id) is None:
        return 404, f"no incident {incident_id}"
    try:
        problem = await request.app[INCIDENT_ACTIONS].perform(verb, incident_id, who, via, duration=duration,
                                                              kind=kind, force=force)
    except AlertmanagerError as exc:
        return 502, str(exc)
    except CommandTimeout as exc:
        return 503, str(exc)
    return (409 if problem else 200), problem


def _answer(status: int, problem: str) -> web.Response | None:
    """The error answer for a refused action (None when it was done)."""
    if status == 200:
        return None
    return _json({"error": problem}, status, headers={"Retry-After": "5"} if status == 503 else None)


@guarded(Role.READ)
async def list_incidents(request: web.Request) -> web.Response:
    incidents, nxt = await incident_page(_svc(request).store, request.query)
    return _json({"incidents": incidents, "next": nxt})


@guarded(Role.READ)
async def get_incident(request: web.Request) -> web.Response:
    svc = _svc(request)
    inc = await svc.store.get_incident(request.match_info["id"])
    if inc is None:
        return _json({"error": f"no incident {request.match_info['id']}"}, 404)
    # what held its notifications back (a mute window, maintenance), when it opened or now, in words
    notes = routing_notes(svc.cfg, svc.rules.routing, inc, datetime.now(timezone.utc))
    return _json({**inc.to_dict(), "routingNotes": [n for n in notes if " muted by " in n]})


@guarded(Role.ACT)
async def act_on_incident(request: web.Request) -> web.Response:
    """ack, resolve, silence (``?duration=``, up to 7d), unsilence or rma (the RMA handoff: proposed with the
    caller's approval, or a waiting one approved); answers the incident as it is now."""
    incident_id, verb = request.match_info["id"], by_word(request.match_info["action"])
    if verb is None:  # a word declared after the routes were registered
        raise web.HTTPNotFound()
    reject_unknown(request.query, ("duration", "force", "by") if verb.duration else ("by",))
    force = request.query.get("force", "false")
    if force not in ("true", "false"):
        return _json({"error": f"force must be true or false, not {force!r}"}, 400)
    who = acting(request[access.PRINCIPAL], request)
    try:
        status, problem = await perform(request, incident_id, verb.name, who, "api",
                                        request.query.get("duration", ""), force=force == "true")
    except SilenceOverlap as exc:  # asked again: the caller repeats it with force=true to mute them too
        return _json({"error": str(exc), "overlap": [m.to_dict() for m in exc.preview.overlap],
                      "preview": exc.preview.to_dict()}, 409)
    if (refused := _answer(status, problem)) is not None:
        return refused
    inc = await _svc(request).store.get_incident(incident_id)
    return _json(inc.to_dict(with_members=False) if inc else {})


@guarded(Role.READ)
async def silence_preview(request: web.Request) -> web.Response:
    """What ``POST .../silence`` would make now: its matchers, the alerts Alertmanager holds that they match,
    the incident's own muted alerts and the other open incidents it would mute (``overlap``)."""
    reject_unknown(request.query, ())
    incident_id = request.match_info["id"]
    if await _svc(request).store.get_incident(incident_id) is None:
        return _json({"error": f"no incident {incident_id}"}, 404)
    try:
        preview = await request.app[INCIDENT_ACTIONS].preview(incident_id)
    except AlertmanagerError as exc:
        return _json({"error": str(exc)}, 502)
    if isinstance(preview, str):
        return _json({"error": preview}, 409)
    return _json(preview.to_dict())


@guarded(Role.READ)
async def list_remediations(request: web.Request) -> web.Response:
    reject_unknown(request.query, ("state", "cluster"))
    states = tuple(s for s in request.query.get("state", "").split(",") if s)
    docs = await _svc(request).store.list_remediations(states=states, cluster=request.query.get("cluster"))
    return _json({"remediations": docs})


@guarded(Role.READ)
async def incident_remediations(request: web.Request) -> web.Response:
    reject_unknown(request.query, ())
    incident_id = request.match_info["id"]
    svc = _svc(request)
    if await svc.store.get_incident(incident_id) is None:
        return _json({"error": f"no incident {incident_id}"}, 404)
    return _json({"remediations": await svc.remediation.for_incident(incident_id)})


@guarded(Role.ACT)
async def act_on_remediation(request: web.Request) -> web.Response:
    reject_unknown(request.query, ("kind", "by"))
    incident_id, word = request.match_info["id"], request.match_info["verb"]
    kind = request.query.get("kind", "")
    if (verb := by_word(word, remediation=True)) is None:
        return _json({"error": f"unknown remediation action {word!r}; one of {', '.join(words(remediation=True))}"},
                     404)
    if kind not in KINDS:
        return _json({"error": f"kind must be quarantine, uncordon or rma, not {kind!r}"}, 400)
    status, problem = await perform(request, incident_id, verb.name, acting(request[access.PRINCIPAL], request),
                                    "api", kind=kind)
    if (refused := _answer(status, problem)) is not None:
        return refused
    return _json({"remediations": await _svc(request).remediation.for_incident(incident_id)})


def register(app: web.Application) -> None:
    app.router.add_get("/api/v1/incidents", list_incidents)
    app.router.add_get("/api/v1/incidents/{id}", get_incident)
    app.router.add_post(f"/api/v1/incidents/{{id}}/{{action:{'|'.join(map(re.escape, words()))}}}", act_on_incident)
    app.router.add_get("/api/v1/incidents/{id}/silence/preview", silence_preview)
    app.router.add_get("/api/v1/remediations", list_remediations)
    app.router.add_get("/api/v1/incidents/{id}/remediations", incident_remediations)
    app.router.add_post("/api/v1/incidents/{id}/remediation/{verb}", act_on_remediation)


__all__ = ["perform", "register"]
