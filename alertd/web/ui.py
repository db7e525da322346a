"""The web UI: server-rendered pages under /ui/ on the service's own port, with the API's access rules.

Pages: incidents (filters, live refresh), one incident (timeline, members,
evidence, notifications, actions), node, GPU, fleet, RMA candidates, and (admin)
what the engine set aside, with a replay button. Actions are the use cases
Slack and the API call (alertd/app/incident_actions.py), so a click here and a
click in Slack do the same thing and leave the same timeline entry.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from importlib import resources
from typing import Any, Awaitable, Callable
from urllib.parse import quote, unquote, urlsplit

from aiohttp import web

from alertd.alertmanager.silences import AlertmanagerError, silence_duration
from alertd.app.silence_preview import SilenceOverlap
from alertd.config.credentials import Role
from alertd.web import fleet_views as views
from alertd.core import signed_links
from alertd.core.actor import Actor
from alertd.core.json_types import JSONObject, as_object, integer, objects, strings, text
from alertd.core.model import CLOSED, FIRING, INCIDENT_STATES, SEVERITIES
from alertd.core.incident_filters import INCIDENT_FILTERS
from alertd.integrations.presentation import alertmanager_link, ref_words, silence_link
from alertd.integrations.slack.render import SILENCE_CHOICES
from alertd.remediation.blast import summary
from alertd.remediation.decide import rma_refusal
from alertd.store.base import StoreUnavailable
from alertd.web import access, api, triage
from alertd.core.storm_growth import incident_trend
from alertd.core.verdict import action_text
from alertd.core.verbs import by_word
from alertd.integrations.slack.integration import SlackSettings
from alertd.web import incidents as incident_routes
from alertd.web.params import PAGING, BadParam, encode_cursor, limit_of, reject_unknown, sequence_cursor, window
from alertd.web.host import WebHost
from alertd.web.keys import INCIDENT_ACTIONS, SERVICE
from alertd.web.auth import AUTH
from alertd.web.body import read_form
from alertd.web.render import page
from alertd.web.guide import incident_guide
from alertd.web.states import empty_list_text, routing_notes

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATIC = {"style.css": "text/css", "live.js": "text/javascript", "chart.umd.js": "text/javascript",
          "reliability.js": "text/javascript", "chart.js.LICENSE.md": "text/plain"}
LIST_LIMIT = 50


def _svc(request: web.Request) -> WebHost:
    return request.app[SERVICE]


def login_required(role: Role = Role.READ) -> Callable[[Handler], Handler]:
    def wrap(handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            who = access.identify(request) or request.get(access.LINK)
            if who is None:
                raise web.HTTPSeeOther("/ui/login?next=" + quote(request.path_qs, safe=""))
            request[access.PRINCIPAL] = who
            if not who.can(role):
                return page(request, "error.html", 403, title="Not allowed", message=f"This needs the {role} role.")
            try:
                return await handler(request)
            except BadParam as exc:
                return page(request, "error.html", 400, title="Bad request", message=exc.message, field=exc.field)
        return run
    return wrap


def opens_signed(handler: Handler) -> Handler:
    """The incident page opens read-only, without a sign-in, from a link signed for it (the Slack message's;
    alertd/core/signed_links.py): to its reader alone, for that request alone (no session is made). Someone
    signed in gets the page as always. The handler sees the request without the link's own parameters."""
    async def run(request: web.Request) -> web.StreamResponse:
        if "sig" not in request.query:
            return await handler(request)
        why = ""
        if access.identify(request) is None:
            secret = SlackSettings.from_config(_svc(request).cfg).link_secret
            why = signed_links.refusal(secret, request.match_info["id"], request.query.get("exp", ""),
                                       request.query["sig"], datetime.now(timezone.utc))
            if not why:
                request[access.LINK] = access.LINK_READER
        response: web.StreamResponse
        if why:
            response = page(request, "error.html", 403, title="This link does not open the incident",
                            message=why + " Sign in to see the incident.")
        else:
            rest = [(k, v) for k, v in request.query.items() if k not in ("exp", "sig")]
            response = await handler(request.clone(rel_url=request.rel_url.with_query(rest)))
        response.headers["Referrer-Policy"] = "no-referrer"  # the page's links must not carry the signature away
        return response
    return run


# ----- login -----

async def login_form(request: web.Request) -> web.Response:
    return page(request, "login.html", next=_safe_next(request.query.get("next", "")), failed=False)


async def login_submit(request: web.Request) -> web.StreamResponse:
    """A wrong token costs the client and the value tried a unit of their throttle (alertd.web.throttle); a right
    one is taken whatever the client's throttle says."""
    form = await read_form(request, _svc(request).cfg.body_timeout)
    target = _safe_next(str(form.get("next", "")))
    token = str(form.get("token", ""))
    auth = request.app[AUTH]
    if auth.login(token) is None:
        auth.check_throttle(request, token)
    response = web.HTTPSeeOther(target)
    try:
        principal = await access.login(request, token, response)
    except StoreUnavailable:
        return page(request, "error.html", 503, title="Try again", message="Sessions cannot be stored right now.")
    if principal is None:
        auth.throttle.failed(auth.client_of(request), token)
        auth.failed("api", "wrong token", request, "UI login")
        return page(request, "login.html", 401, next=target, failed=True)
    raise response


async def logout(request: web.Request) -> web.StreamResponse:
    response = web.HTTPSeeOther("/ui/login")
    try:
        await access.logout(request, response)
    except StoreUnavailable:
        return page(request, "error.html", 503, title="Try again", message="The session could not be ended; try again.")
    raise response


# A path on this site: "/" then no second "/" or "\\" (browsers read "/\\x" as "//x"), and no whitespace or
# control character anywhere (browsers drop tab and newline from URLs: "/\t/evil.example" becomes "//evil.example").
SAFE_NEXT = re.compile(r"/(?![/\\])[^\s\\\x00-\x1f\x7f]*")
DECODED_NEXT = re.compile(r"/(?![/\\])[^\x00-\x1f\x7f]*")  # the same once percent-decoded ("/%09/x")


def _safe_next(value: str) -> str:
    """Only a local path: a login link must not bounce the user to another site."""
    if not (SAFE_NEXT.fullmatch(value) and DECODED_NEXT.fullmatch(unquote(value))):
        return "/ui/incidents"
    parts = urlsplit(value)
    return value if not parts.scheme and not parts.netloc else "/ui/incidents"


# ----- incidents -----

@login_required()
async def incidents(request: web.Request) -> web.Response:
    query = dict(request.query)
    fragment = query.pop("fragment", "")
    query.setdefault("limit", str(LIST_LIMIT))
    rows, nxt = await triage.triage_page(_svc(request).store, query)
    context: dict[str, Any] = dict(rows=rows, next=nxt, query={k: v for k, v in query.items() if k != "cursor"},
                   states=INCIDENT_STATES, severities=SEVERITIES, filters=INCIDENT_FILTERS, now=datetime.now(timezone.utc),
                   empty=empty_list_text(query), action_text=action_text)
    if fragment == "rows":
        return page(request, "_incident_rows.html", **context)
    return page(request, "incidents.html", **context)


OUTBOX_STATE_WORDS = {"done": "delivered", "pending": "sending", "failed": "failed: gave up retrying"}


def _notifications(state: dict[str, JSONObject]) -> list[JSONObject]:
    out: list[JSONObject] = []
    for target, entry in sorted(state.items()):
        kind = target.split(":", 1)[0]
        link = ""
        if kind == "slack" and text(entry, "ref"):
            from alertd.web.render import slack_link

            link = slack_link(text(entry, "ref"))
        words, key = ("", "") if link else ref_words(kind, text(entry, "ref"))
        shown = OUTBOX_STATE_WORDS.get(text(entry, "state"), text(entry, "state") or "delivered")
        out.append({**entry, "kind": kind, "link": link, "words": words, "key": key, "state_words": shown})
    return out


@login_required()
async def incident(request: web.Request) -> web.Response:
    reject_unknown(request.query, ("done", "problem", "confirm", "preview"))
    svc = _svc(request)
    inc = await svc.store.get_incident(request.match_info["id"])
    if inc is None:
        return page(request, "error.html", 404, title="Not found", message=f"No incident {request.match_info['id']}.")
    am_url = svc.cfg.alertmanager.web_url
    can_silence = svc.cfg.alertmanager.enabled  # silencing asks Alertmanager: no buttons that must fail
    found = inc.findings
    silence = found.silence
    return page(request, "incident.html", inc=inc, doc=inc.to_dict(), guide=incident_guide(inc, svc.cfg.runbook_base_url),
                confirm=request.query.get("confirm", ""), members=sorted(
        inc.members.values(), key=lambda m: (m.status != FIRING, m.folded, m.starts_at)),
        alertmanager=alertmanager_link(inc, am_url), silence=silence,
        silence_url=silence_link(am_url, silence.id) if silence else "",
        owners=found.owner_lines(), pods=found.pod_lines(), jobs=found.jobs,
        evidence=[e.line for e in found.evidence],
        notifications=_notifications(await svc.store.notification_state(inc.id)),
        routing_notes=routing_notes(svc.cfg, svc.rules.routing, inc, datetime.now(timezone.utc)),
        no_remediation=svc.remediation.why_none(inc),
        rma_targets=[] if rma_refusal(inc) else svc.remediation.rma_targets,
        **_children(await svc.store.incident_docs(inc.children) if inc.children else []),
        can_act=request[access.PRINCIPAL].can(Role.ACT) and inc.status != CLOSED, silences=SILENCE_CHOICES if can_silence else (),
        remediations=await svc.remediation.for_incident(inc.id), may_act=request[access.PRINCIPAL].can(Role.ACT),
        blast_summary=summary, trend=incident_trend(inc.annotations, len(inc.nodes), inc.storm_last) if inc.fleet else "",
        **await _preview(request, inc.id, can_silence and inc.status != CLOSED),
        done=request.query.get("done", ""), problem=request.query.get("problem", ""), now=datetime.now(timezone.utc))


CHILD_ROWS = 50  # node incidents listed on a fleet's page; the counts cover all of them


def _children(docs: list[JSONObject]) -> dict[str, Any]:
    """A fleet's node incidents: the first CHILD_ROWS to list, and the counts over every one of them."""
    return {"children": docs[:CHILD_ROWS], "child_count": len(docs),
            "child_firing": sum(integer(d, "firing") for d in docs),
            "child_alerts": sum(integer(d, "memberCount") for d in docs)}


async def _preview(request: web.Request, incident_id: str, can_silence: bool) -> dict[str, Any]:
    """The page's silence preview (``?preview=4h``): the matchers, the alerts Alertmanager holds that they
    match, and the open incidents the silence would mute, before the person makes it."""
    choice = request.query.get("preview", "")
    none: dict[str, Any] = {"preview": None, "preview_for": "", "preview_rows": [], "preview_problem": ""}
    if not choice or not can_silence or not request[access.PRINCIPAL].can(Role.ACT):
        return none
    if isinstance(problem := silence_duration(choice), str):
        return {**none, "preview_problem": problem}
    try:
        found = await request.app[INCIDENT_ACTIONS].preview(incident_id)
    except AlertmanagerError as exc:
        return {**none, "preview_problem": f"cannot preview the silence: {exc}"}
    if isinstance(found, str):
        return {**none, "preview_problem": found}
    names = [m["name"] for m in found.matchers if m["name"] != "alertname"] + ["gpu"]  # and which GPU
    rows = [{"alertname": text(labels, "alertname"), "state": text(a, "state"),
             "labels": ", ".join(f"{n}={text(labels, n)}" for n in names if text(labels, n))}
            for a in objects(found.to_dict()["alerts"]) for labels in (as_object(a.get("labels")),)]
    rows.sort(key=lambda r: (r["labels"], r["alertname"]))
    return {**none, "preview": found, "preview_for": choice, "preview_rows": rows}


@login_required(Role.ACT)
async def incident_action(request: web.Request) -> web.StreamResponse:
    """POST from the incident page's buttons; answers with a redirect back (no resubmission on reload)."""
    incident_id = request.match_info["id"]
    if not access.same_origin(request):
        return page(request, "error.html", 403, title="Not allowed", message="Cross-site request refused.")
    form = await read_form(request, _svc(request).cfg.body_timeout)
    action = str(form.get("action", ""))
    back = f"/ui/incidents/{quote(incident_id, safe='')}"
    if action in ("confirm-resolve", "confirm-rma"):  # the first press asks again, on the page (no script needed)
        raise web.HTTPSeeOther(back + "?confirm=" + action.removeprefix("confirm-"))
    word, _, duration = action.partition("-")  # <word>, <word>-<duration> (alertd/core/verbs.py)
    if word == "remediation":  # remediation-<approve|override|cancel|stop>-<quarantine|uncordon>
        what, _, kind = duration.partition("-")
        if (verb := by_word(what, remediation=True)) is None:
            problem = f"unknown remediation action {what!r}"
        else:
            _, problem = await incident_routes.perform(request, incident_id, verb.name,
                                                       Actor(request[access.PRINCIPAL].name), "web", kind=kind)
        raise web.HTTPSeeOther(back + ("?problem=" + quote(problem) if problem else f"?done={quote(what)}"))
    if (verb := by_word(word)) is None or verb.duration != bool(duration):
        return page(request, "error.html", 400, title="Bad request", message=f"unknown action {action!r}")
    try:
        _, problem = await incident_routes.perform(request, incident_id, verb.name,
                                                   Actor(request[access.PRINCIPAL].name), "web", duration,
                                                   force=form.get("force") == "1")
    except SilenceOverlap:  # asked again on the page, with what else it would mute
        raise web.HTTPSeeOther(back + "?preview=" + quote(duration) + "#silence-preview") from None
    label = {"ack": "acknowledged", "resolve": "resolved", "unsilence": "unsilenced",
             "rma": "RMA handoff asked"}.get(action, action.replace("-", "d for "))
    raise web.HTTPSeeOther(back + ("?problem=" + quote(problem) if problem else "?done=" + quote(label)))


# ----- node, GPU, fleet, RMA -----

@login_required()
async def node(request: web.Request) -> web.Response:
    reject_unknown(request.query, PAGING)
    view = await views.node_view(_svc(request).store, request.match_info["node"], limit=limit_of(request.query, LIST_LIMIT),
                                 before=sequence_cursor(request.query))
    return page(request, "node.html", view=view, next=encode_cursor(view["next"]) if view["next"] else None,
                now=datetime.now(timezone.utc))


@login_required()
async def gpu_search(request: web.Request) -> web.Response:
    reject_unknown(request.query, ("gpu",))
    ident = request.query.get("gpu", "").strip()
    found = await _svc(request).store.find_gpus(ident) if ident else []
    if len(found) == 1:
        raise web.HTTPSeeOther("/ui/gpus/" + quote(text(found[0], "uuid"), safe=""))
    if not found and ident:
        return page(request, "gpus.html", 404, ident=ident, gpus=[])
    if not ident:
        found = await _svc(request).store.list_gpus(limit=200)
    return page(request, "gpus.html", ident=ident, gpus=found)


@login_required()
async def gpu(request: web.Request) -> web.Response:
    reject_unknown(request.query, ())
    store, ident = _svc(request).store, request.match_info["ident"]
    view, found = await views.find_gpu_view(store, ident)
    if view is None:
        return page(request, "gpus.html", 404 if not found else 300, ident=ident, gpus=found)
    return page(request, "gpu.html", view=view, now=datetime.now(timezone.utc))


@login_required()
async def fleet(request: web.Request) -> web.Response:
    reject_unknown(request.query, ("days",))
    days = window(request.query).days
    view = await views.fleet_view(_svc(request).store, datetime.now(timezone.utc), days)
    return page(request, "fleet.html", view=view, choices=(7, 30, 90))


@login_required()
async def rma_page(request: web.Request) -> web.StreamResponse:
    reject_unknown(request.query, ())
    svc = _svc(request)
    candidates = await views.rma_candidates(svc.store, svc.rules.rma, datetime.now(timezone.utc))
    fmt = request.match_info.get("fmt", "")
    if fmt == ".csv":
        return api.rma_csv(candidates)
    if fmt == ".json":
        return api._json({"candidates": [c.to_dict() for c in candidates]})
    return page(request, "rma.html", candidates=candidates, rules=svc.rules.rma)


@login_required()
async def fleet_nodes(request: web.Request) -> web.Response:
    """A fleet incident's node incidents, the worst first, a hundred a page."""
    reject_unknown(request.query, ("cursor",))
    store = _svc(request).store
    found = await store.incident_docs([request.match_info["id"]])  # the document alone: not the timeline
    if not found or not found[0].get("fleet"):
        return page(request, "error.html", 404, title="Not found", message=f"No fleet incident {request.match_info['id']}.")
    ids = strings(found[0].get("children"))
    children = await store.incident_docs(ids)
    rows, nxt, offset = triage.fleet_nodes(children, request.query)
    return page(request, "fleet_nodes.html", inc=found[0], fleet=triage.fleet_of(children, await triage.labels_of(store, ids)),
                rows=rows, next=nxt, offset=offset, now=datetime.now(timezone.utc))


# ----- quarantine -----

@login_required(Role.ADMIN)
async def quarantine(request: web.Request) -> web.Response:
    """What the engine set aside, with the reason; each can be replayed after a rule fix."""
    reject_unknown(request.query, PAGING + ("done", "problem"))
    limit, cursor = limit_of(request.query, LIST_LIMIT), sequence_cursor(request.query)
    rows = await _svc(request).store.list_set_aside(limit=limit + 1, before=cursor)
    return page(request, "quarantine.html", items=[r.to_dict(body_chars=4096) for r in rows[:limit]],
                next=encode_cursor(rows[limit - 1].id) if len(rows) > limit else None,
                done=request.query.get("done", ""), problem=request.query.get("problem", ""))


@login_required(Role.ADMIN)
async def quarantine_replay(request: web.Request) -> web.StreamResponse:
    if not access.same_origin(request):
        return page(request, "error.html", 403, title="Not allowed", message="Cross-site request refused.")
    raw = request.match_info["id"]
    found = await _svc(request).replay(int(raw)) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None
    if found is None:
        raise web.HTTPSeeOther("/ui/quarantine?problem=" + quote(f"nothing set aside with id {raw}"))
    item, hook_id = found
    await _svc(request).audit(request[access.PRINCIPAL].name, "replay", f"quarantine:{item.id}", "web", "ok",
                              f"appended as webhook {hook_id}")
    raise web.HTTPSeeOther("/ui/quarantine?done=" + quote(f"{item.kind} {item.id} replayed as webhook {hook_id}"))


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC:
        raise web.HTTPNotFound()
    body = resources.files("alertd.web").joinpath("static", name).read_bytes()
    return web.Response(body=body, content_type=STATIC[name], headers={"Cache-Control": "max-age=300"})


async def root(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/ui/incidents")


def register(app: web.Application) -> None:
    access.install(app)
    app.router.add_get("/", root)
    app.router.add_get("/ui", root)
    app.router.add_get("/ui/", root)
    app.router.add_get("/ui/login", login_form)
    app.router.add_post("/ui/login", login_submit)
    app.router.add_post("/ui/logout", logout)
    app.router.add_get("/ui/incidents", incidents)
    app.router.add_get("/ui/incidents/{id}", opens_signed(incident))
    app.router.add_get("/ui/incidents/{id}/nodes", fleet_nodes)
    app.router.add_post("/ui/incidents/{id}/action", incident_action)
    app.router.add_get("/ui/nodes/{node}", node)
    app.router.add_get("/ui/gpus", gpu_search)
    app.router.add_get("/ui/gpus/{ident}", gpu)
    app.router.add_get("/ui/fleet", fleet)
    app.router.add_get(r"/ui/rma{fmt:(\.csv|\.json)?}", rma_page)
    app.router.add_get("/ui/quarantine", quarantine)
    app.router.add_post("/ui/quarantine/{id}/replay", quarantine_replay)
    app.router.add_get("/ui/static/{name}", static)

