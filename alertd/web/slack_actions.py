"""Slack interactivity: POST /api/v1/slack/actions (buttons on incident messages).

Every request is checked before anything happens: its timestamp (Unix seconds,
at most 5 minutes in the past or the future), the ``X-Slack-Signature`` over
the raw body with the signing secret (slack_sdk's SignatureVerifier), and a
signature seen before is a replay: it is remembered until its timestamp's
window has passed, a timestamp ahead of the clock too. Anything else gets 401
and has no effect.

Slack wants an answer within 3 seconds, so the handler answers 200 at once and
does the work in a background task. This is the Slack adapter of the use cases
in alertd/app/incident_actions.py: a click is read into alertd's verb
(alertd/integrations/slack/clicks.py, where the button IDs stay) and performed
for the clicker, principal ``slack:<user id>``; a remediation verb only for the
users the policy names. The answer, when there is one to give, goes back to the
clicker alone.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from datetime import datetime, timedelta, timezone
from typing import Callable, Protocol
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web
from slack_sdk.signature import Clock, SignatureVerifier

from alertd.core.json_types import JSONObject, as_object, objects, text as json_text
from alertd.app.incident_actions import IncidentActions
from alertd.app.silence_preview import SilenceOverlap
from alertd.config.settings import Config
from alertd.core.actor import Actor, stated_name
from alertd.core.installation import unscoped
from alertd.core.vocabulary import REMEDIATION_EVENT
from alertd.integrations.slack.clicks import Click, read_click
from alertd.integrations.slack.integration import SlackSettings
from alertd.integrations.slack.render import overlap_question
from alertd.rules.ruleset import RuleSet
from alertd.store.base import StoreUnavailable
from alertd.web.body import read_body
from alertd.web.keys import INCIDENT_ACTIONS, SERVICE

log = logging.getLogger(__name__)
PATH = "/api/v1/slack/actions"
REPLAY_WINDOW = 5 * 60
SLACK_PRINCIPAL = "slack:"


# Slack's X-Slack-Request-Timestamp: Unix seconds. Twelve digits reach the year 33658; more is not a time
# (and a 400-digit one cannot be compared with a float clock at all).
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


def sent_at(header: str) -> int | None:
    """The request's timestamp in Unix seconds, or None when the header is not one."""
    return int(header) if _TIMESTAMP.fullmatch(header) else None


class ActionStore(Protocol):
    """The store as Slack actions use it: a durable cache of signatures seen."""

    async def remember_once(self, key: str, now: datetime, forget_before: datetime) -> bool: ...


class SlackActionHost(Protocol):
    """The service as the Slack adapter sees it (alertd/app/service.py): its configuration (Slack settings,
    the installation id), the replay cache, the remediation policy's Slack approvers, and the audit trail."""

    @property
    def cfg(self) -> Config: ...

    @property
    def store(self) -> ActionStore: ...

    @property
    def rules(self) -> RuleSet: ...

    async def audit(self, actor: str, action: str, target: str, via: str, outcome: str = "ok",
                    detail: str = "") -> None: ...


class _WallClock(Clock):
    def __init__(self, now: Callable[[], float] = time.time):
        self._now = now

    def now(self) -> float:
        return self._now()


class SlackActions:
    def __init__(self, svc: SlackActionHost, incidents: IncidentActions, *,
                 wall_clock: Callable[[], float] = time.time):
        self.svc, self.incidents = svc, incidents
        self.settings = SlackSettings.from_config(svc.cfg)
        self.wall_clock = wall_clock
        secret = self.settings.signing_secret.strip()
        self.verifier = SignatureVerifier(secret, _WallClock(lambda: self.wall_clock())) if secret else None
        self._tasks: set[asyncio.Task[None]] = set()
        self._http: aiohttp.ClientSession | None = None
        self.handled = 0

    # ----- HTTP -----

    async def handle(self, request: web.Request) -> web.Response:
        if self.verifier is None:
            return web.json_response({"error": "Slack interactivity is not configured (notify.slack.signing_secret)"},
                                     status=503)
        try:
            raw = await read_body(request, self.svc.cfg.body_timeout)
        except asyncio.TimeoutError:
            return web.json_response({"error": "the body did not arrive in time"}, status=408,
                                     headers={"Connection": "close"})
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not timestamp or not signature:
            return _denied("unsigned request")
        if not (signature.isascii() and signature.isprintable()):  # hmac compares only ASCII strings
            return _denied("malformed signature")
        sent = sent_at(timestamp)
        if sent is None:
            return _denied("bad timestamp")
        if abs(self.wall_clock() - sent) > REPLAY_WINDOW:
            return _denied("timestamp more than 5 minutes off")
        try:
            valid = self.verifier.is_valid(raw, timestamp, signature)
        except UnicodeDecodeError:
            valid = False
        if not valid:
            return _denied("bad signature or expired timestamp")
        try:
            first = await self._first_time(signature, sent)
        except StoreUnavailable:
            return web.json_response({"error": "cannot check for replays now; try again"}, status=503)
        if not first:
            return _denied("replayed request")
        try:
            form = parse_qs(raw.decode("utf-8"), keep_blank_values=True)
            payload = json.loads(form["payload"][0])
            if not isinstance(payload, dict):
                raise ValueError("payload is not an object")
        except (KeyError, IndexError, ValueError, UnicodeDecodeError) as exc:
            return web.json_response({"error": f"no usable payload: {exc}"}, status=400)
        except RecursionError:  # a signed payload nested a thousand deep: still not a usable one
            return web.json_response({"error": "no usable payload: nested too deeply"}, status=400)
        if payload.get("type") == "block_actions":
            task = asyncio.get_running_loop().create_task(self.process(payload), name="alertd-slack-action")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return web.Response(status=200)

    async def _first_time(self, signature: str, sent: int) -> bool:
        """Signatures seen are kept in the store past the timestamp window, so a restart does not forget them.

        A signature is kept as seen at the later of now and its own timestamp: one sent up to 5 minutes ahead
        stays valid until 5 minutes after that timestamp, and is remembered until 6 minutes after it."""
        now = self.wall_clock()
        seen = datetime.fromtimestamp(max(now, sent), timezone.utc)
        return await self.svc.store.remember_once(
            "slack:" + signature, seen, datetime.fromtimestamp(now, timezone.utc) - timedelta(seconds=REPLAY_WINDOW + 60))

    # ----- the work -----

    async def process(self, payload: JSONObject) -> None:
        who = slack_actor(as_object(payload.get("user")))
        for click in (read_click(a) for a in objects(payload.get("actions"))):
            scoped = unscoped(click.value, self.svc.cfg.installation_id)
            blocks: list[JSONObject] = []
            try:
                message = await self._perform(click, scoped, who)
            except SilenceOverlap as exc:  # asked again, of the clicker alone
                message = f"Silence {exc.preview.incident} for {exc.duration}? {exc}"
                blocks = overlap_question(exc.preview.incident, click.value, exc.duration,
                                          [f"{m.id}: {m.title} ({', '.join(m.alerts)})" for m in exc.preview.overlap])
            except Exception as exc:  # audited by the use case; reported to the clicker; never crash the task
                log.exception("Slack action %s on %s by %s failed", click.button, click.value, who)
                message = f"Could not {click.verb or 'do that to'} {scoped or click.value}: {exc}"
            self.handled += 1
            if message:
                await self._tell(payload, message, blocks)

    async def _perform(self, click: Click, incident_id: str | None, who: Actor) -> str:
        """The click's use case for the clicker: "" when done, else why not (audited either way)."""
        if not click.verb:
            log.info("ignoring unknown Slack action %r", click.button)
            return ""
        if not incident_id:
            why = (f"This button belongs to another alertd installation ({click.value}); nothing done."
                   if incident_id is None else "This button carries no incident id.")
            await self.svc.audit(who.shown, click.verb, click.value, "slack", f"refused: {why}")
            return why
        if click.remediation and who.principal.removeprefix(SLACK_PRINCIPAL) not in \
                self.svc.rules.remediation.slack_approvers:
            why = f"{who} may not {click.verb} remediations: not in the policy's approvers.slack_users"
            await self.svc.audit(who.shown, REMEDIATION_EVENT + click.verb, incident_id, "slack", f"refused: {why}")
            return why
        return await self.incidents.perform(click.verb, incident_id, who, "slack", duration=click.duration,
                                            force=click.force)

    async def _tell(self, payload: JSONObject, text: str, blocks: list[JSONObject] | None = None) -> None:
        """An ephemeral note to the clicker through the payload's response_url (best effort)."""
        url = json_text(payload, "response_url")
        if not url.startswith(("https://", "http://")):
            log.info("Slack action: %s", text)
            return
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        try:
            body: JSONObject = {"response_type": "ephemeral", "replace_original": False, "text": text}
            if blocks:
                body["blocks"] = list(blocks)
            async with self._http.post(url, json=body) as resp:
                await resp.read()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            log.warning("could not answer a Slack action through response_url: %s", exc)

    # ----- lifecycle -----

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait for running actions (tests, shutdown)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def close(self) -> None:
        await self.wait_idle(5.0)
        if self._http is not None:
            await self._http.close()
            self._http = None


def slack_actor(user: JSONObject) -> Actor:
    """The clicker: principal ``slack:<user id>`` (stable; what approvals count), with the user name as stated
    (its owner may change it between two clicks, so it only annotates)."""
    uid = stated_name(json_text(user, "id"))
    name = stated_name(json_text(user, "username") or json_text(user, "name"))
    return Actor(SLACK_PRINCIPAL + (uid or "unknown-user"), name)


def _denied(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=401)


ACTIONS = web.AppKey("slack_actions", SlackActions)


def register(app: web.Application) -> SlackActions:
    """Add the endpoint to an app that already holds the service and its use cases (alertd.web.app.build_app)."""
    actions = SlackActions(app[SERVICE], app[INCIDENT_ACTIONS])
    app[ACTIONS] = actions
    app.router.add_post(PATH, actions.handle)

    async def on_cleanup(_: web.Application) -> None:
        await actions.close()

    app.on_cleanup.append(on_cleanup)
    return actions
