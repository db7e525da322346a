"""Slack: one living message per incident and channel, follow-ups in its thread.

Targets ``slack:<channel>``; intents:

* ``show``     render the incident as stored NOW and post it (first time) or
               ``chat.update`` it; queued ``show`` items of the same incident
               and channel are covered by this one (coalesced by the outbox).
* ``timeline`` a reply under the message for timeline events (alerts joined,
               evidence, acknowledged, resolved with a summary); queued
               replies are coalesced into one; skipped while nothing is posted.
* ``escalate`` (lane ``escalation``) a thread note that the incident was
               escalated, skipped if it was acknowledged or resolved meanwhile.

The message's channel id and ts are saved with ``store.save_ref`` right after
``chat.postMessage`` returns and before anything else, so a crash between the
post and the outbox commit makes the redelivery ``chat.update`` instead of
posting twice. A crash (or a lost answer) DURING the post is covered by
alertd.integrations.slack.lost: a write-ahead ref and message metadata let the next
attempt find the message in the channel's history and adopt it. Top-level
posts are never retried by the client itself (a retry after a dropped
connection is how a post doubles). Posts are spaced per channel (about one per second) by the
outbox's rate-limit stage; a 429 pauses the channel for its Retry-After and
the item is retried after it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Annotated, Any, Callable, ClassVar, Hashable, Mapping

import aiohttp
import msgspec
from msgspec import Meta
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from alertd.core.json_types import JSONObject, JSONValue, obj, strings
from alertd.core.yamlio import Path_
from alertd.core.outbox_items import Escalate, Intent, OutboxItem, Target, Timeline
from alertd.core.durations import format_duration
from alertd.core.sections import Seconds, Section, Span, declared_default, duration, written
from alertd.core.model import CLOSED, OPEN
from alertd.core.vocabulary import EventKind
from alertd.integrations.base import (Delivered, DeliveryError, Integration, Links, Notifier, NotifierSettings,
                                       NotifyStore, Problem, RequestOptions, folded_unposted)
from alertd.integrations.ratelimit import RateLimiter
from alertd.integrations.slack.lost import CHANNEL_ID, UNUSABLE, Unconfirmed, find_channel, find_post, metadata
from alertd.integrations.slack.render import RenderContext, render_incident, render_thread

log = logging.getLogger(__name__)
DEFAULT_BASE_URL = "https://slack.com/api/"
# Errors that no retry can fix: the configuration or the message is wrong.
PERMANENT = frozenset({
    "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "no_permission",
    "missing_scope", "channel_not_found", "not_in_channel", "is_archived", "invalid_blocks", "invalid_blocks_format",
    "msg_too_long", "too_many_attachments", "no_text", "invalid_arguments", "restricted_action", "cant_update_message",
    "edit_window_closed", "team_access_not_granted", "ekm_access_denied", "invalid_arg_name",
})
GONE = frozenset({"message_not_found"})


class SlackRate(Section, frozen=True):
    """How fast posts go out to one channel (Slack allows about one a second)."""

    per_channel: Annotated[float, Meta(gt=0, description="Posts per second per channel.")] = 1.0
    burst: Annotated[int, Meta(ge=1, description="Posts allowed back to back before the rate applies.")] = 1


class SlackLinks(Section, frozen=True):
    """The message's "Incident" link opens that incident's page read-only without a token (docs/security.md)."""

    signing_secret: Annotated[str, Meta(min_length=32, description=(
        "Signs the message's \"Incident\" link so it opens that incident's page read-only without a token "
        "(docs/security.md, \"Signed incident links\"); at least 32 characters, e.g. from `openssl rand -base64 32` "
        "in a file given as signing_secret_file. Not Slack's signing secret. Rotating it revokes every link given "
        "out."))]
    lifetime: Annotated[Span, Meta(description=(
        "How long a link opens the page after the message was last written (every update of the message writes "
        "a fresh one)."))] = written(Span.from_config, "7d")


class SlackSection(RequestOptions, frozen=True):
    """Slack through the Web API (a bot token with chat:write; channels:history and groups:history find a post whose answer was lost). Without a token the console is used."""

    token: Annotated[str, Meta(description="Bot token, e.g. ${SLACK_BOT_TOKEN}. Empty: Slack is off.")] = ""
    base_url: Annotated[str, Meta(description="Web API base URL.")] = DEFAULT_BASE_URL
    signing_secret: Annotated[str, Meta(description=(
        "Verifies button clicks at POST /api/v1/slack/actions, e.g. ${SLACK_SIGNING_SECRET}."))] = ""
    default_channel: Annotated[str, Meta(description=(
        "Where incidents go when the rules have no routing section."))] = ""
    debounce: Annotated[Span, Meta(description=(
        "Updates to a message wait this long and are coalesced; ack and resolve go at once."))] = \
        written(Span.from_config, "2s")
    rate: SlackRate = msgspec.field(default_factory=SlackRate)
    timeout: Annotated[Seconds, Meta(description="Per API call.")] = duration("10s")
    links: SlackLinks | None = None


@dataclass(slots=True)
class SlackSettings(NotifierSettings):
    KIND: ClassVar[str] = "slack"
    token: str = ""
    base_url: str = DEFAULT_BASE_URL
    signing_secret: str = ""
    default_channel: str = ""
    debounce: timedelta = SlackSection().debounce
    per_channel: float = SlackRate().per_channel
    burst: int = SlackRate().burst
    link_secret: str = ""  # links.signing_secret: the "Incident" link opens read-only without a token
    link_lifetime: timedelta = declared_default(SlackLinks, "lifetime", timedelta)

    @property
    def enabled(self) -> bool:
        return bool(self.token.strip())

    @classmethod
    def parse(cls, section: SlackSection, links: Links) -> "SlackSettings":
        """An empty base URL (``${SLACK_URL:-}``) is the default one."""
        signed = section.links or SlackLinks(signing_secret="")
        return cls(
            token=section.token,
            base_url=section.base_url or DEFAULT_BASE_URL,
            signing_secret=section.signing_secret,
            default_channel=section.default_channel,
            debounce=timedelta(seconds=section.debounce.total_seconds()),
            per_channel=float(section.rate.per_channel),
            burst=section.rate.burst,
            link_secret=signed.signing_secret,
            link_lifetime=timedelta(seconds=signed.lifetime.total_seconds()),
            **cls.shared(section, links),
        )


def parse_target(target: str) -> tuple[str, str]:
    """'slack:#gpu|escalation' -> ('#gpu', 'escalation')."""
    rest = target.split(":", 1)[1] if ":" in target else target
    channel, _, sub = rest.partition("|")
    return channel, sub


def parse_ref(ref: str | None) -> tuple[str, str] | None:
    if not ref or "|" not in ref:
        return None
    channel, ts = ref.split("|", 1)
    return channel, ts


class MessageGone(Exception):
    pass


class SlackCallError(DeliveryError):
    """A Web API call answered ``ok: false``; ``error`` is Slack's code."""

    def __init__(self, message: str, error: str, *, retry: bool):
        super().__init__(message, retry=retry)
        self.error = error


class SlackNotifier(Notifier):
    kind = "slack"
    coalesce = frozenset({Intent.SHOW, Intent.TIMELINE})
    needs_ref = frozenset({Intent.TIMELINE})
    limiter: RateLimiter  # always: each channel's posts are spaced

    def __init__(self, settings: SlackSettings, store: NotifyStore, clock: Callable[[], datetime], *,
                 client: AsyncWebClient | None = None, installation: Callable[[], str] = lambda: ""):
        self.settings, self.store, self.clock = settings, store, clock
        self.installation = installation  # the installation id (prefixes button values), known once the store is open
        self._client = client
        self._once: AsyncWebClient | None = client  # top-level posts: no retry by the client itself
        self._session: aiohttp.ClientSession | None = None
        self.limiter = RateLimiter(settings.per_channel, settings.burst)
        self.calls = 0
        self._channel_ids: dict[str, str] = {}  # target address (#name or id) -> channel id, from Slack's answers
        self._told: set[str] = set()  # history problems already logged (once each)

    @property
    def posts(self) -> RateLimiter:
        return self.limiter

    # ----- plumbing -----

    def client(self, *, once: bool = False) -> AsyncWebClient:
        if self._client is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.settings.timeout))
            retry: AsyncRetryHandler = AsyncConnectionErrorRetryHandler(max_retry_count=1)
            self._client, self._once = (AsyncWebClient(
                token=self.settings.token, base_url=self.settings.base_url, timeout=int(max(1, self.settings.timeout)),
                session=self._session, retry_handlers=handlers)
                for handlers in ([retry], []))
        return (self._once or self._client) if once else self._client

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            self._client = self._once = None

    def _render_context(self, note: str = "") -> RenderContext:
        s = self.settings
        return RenderContext(runbook_base_url=s.runbook_base_url, alertmanager_url=s.alertmanager_url,
                             alertd_url=s.alertd_url, note=note, now=self.clock(), installation_id=self.installation(),
                             buttons=bool(s.signing_secret.strip()), silences=s.silences)

    def rate_key(self, items: list[OutboxItem], ref: str | None) -> Hashable | None:
        """Posts are spaced per channel; edits are not (they only honour a 429 pause)."""
        head = items[0]
        if head.intent == Intent.SHOW and parse_ref(ref) is not None:
            return None
        if head.intent == Intent.ESCALATE and ref:
            return None  # noted already: nothing is sent
        return ("post", head.target.address)

    async def _call(self, method: str, limit_channel: str, /, *, once: bool = False, get: bool = False,
                    args: Mapping[str, object] | None = None, **named: object) -> JSONObject:
        """``once``: no retry after a dropped connection (the call is not idempotent); ``get``: query arguments;
        the method's arguments are ``args`` and the ``named`` ones."""
        params = {**(args or {}), **named}
        key = {"chat.postMessage": ("post", limit_channel),
               "conversations.history": ("history", limit_channel),
               "conversations.list": ("list", "")}.get(method, ("update", ""))
        if key[0] == "post":  # posts are spaced as they leave, whatever came between their slot and now
            await self.limiter.at_wire(key)
        elif (wait := self.limiter.paused_for(key)) > 0:
            await asyncio.sleep(wait)
        self.calls += 1
        try:
            client = self.client(once=once)
            resp = await (client.api_call(method, http_verb="GET", params=params) if get
                          else client.api_call(method, json=params))
            data: JSONObject = dict(resp.data) if isinstance(resp.data, dict) else {}
            if data.get("channel") and isinstance(data["channel"], str):
                self._channel_ids[limit_channel] = data["channel"]
            return data
        except SlackApiError as exc:
            raise self._failure(method, key, exc.response) from None
        except AttributeError:
            # slack_sdk reads every answer as a JSON object: a text/plain or non-object JSON body (a proxy's
            # or load balancer's error page, an nginx 405) fails inside it with "'str' object has no attribute
            # 'get'". Nothing was taken by Slack's API: retried like a 5xx.
            raise SlackCallError(f"Slack {method}: the answer is not Slack's JSON (an error page from a proxy or "
                                 "load balancer in front of Slack?); retrying", "not_json", retry=True) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise DeliveryError(f"Slack {method}: {type(exc).__name__}: {exc}", retry=True) from None

    def _failure(self, method: str, key: tuple[str, str], response: Any) -> DeliveryError | MessageGone:
        """What a failed call means: rate limited (the key pauses), gone, permanent, or worth a retry. The answer
        may be Slack's JSON or, through a proxy, any other body (then ``error`` is empty and it is retried)."""
        status = getattr(response, "status_code", None) or getattr(response, "status", 0)
        data = getattr(response, "data", None)
        error = str(data.get("error") or "") if isinstance(data, dict) else ""
        if status == 429 or error == "ratelimited":
            headers = {k.lower(): v for k, v in (getattr(response, "headers", None) or {}).items()}
            raw = headers.get("retry-after", "1")
            try:
                after = max(0.0, min(3600.0, float(raw[0] if isinstance(raw, list) else raw)))
            except ValueError:
                after = 1.0
            self.limiter.pause(key, after)
            return DeliveryError(f"Slack {method} rate limited; Retry-After {after:g}s", retry=True, after=after)
        if error in GONE:
            return MessageGone(error)
        if error in PERMANENT:
            return SlackCallError(f"Slack {method}: {error}", error, retry=False)
        if not isinstance(data, dict) or "ok" not in data:  # every answer of Slack's API says ok: true or false
            return SlackCallError(f"Slack {method}: HTTP {status} with an answer that is not Slack's JSON (an error "
                                  "page from a proxy or load balancer in front of Slack?); retrying", "not_json",
                                  retry=True)
        return SlackCallError(f"Slack {method}: HTTP {status} {error or 'error'}", error, retry=True)

    # ----- delivery -----

    async def post_text(self, channel: str, text: str) -> None:
        """A message of its own, about no incident (the weekly reliability digest): posted once, no retry."""
        await self._call("chat.postMessage", channel, once=True, channel=channel, text=text,
                         blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}])

    async def deliver(self, items: list[OutboxItem], ref: str | None) -> Delivered:
        head = items[0]
        channel = head.target.address
        if head.target.lane == "escalation" or head.intent == Intent.ESCALATE:
            return await self._escalate(head, channel, ref)
        if head.intent == Intent.TIMELINE:
            return await self._thread(items, channel, ref)
        return await self._update(items, channel, ref)

    async def _update(self, items: list[OutboxItem], channel: str, ref: str | None) -> Delivered:
        # The outbox read what is queued BEFORE this reads the incident: all of it is in what we render.
        head = items[0]
        inc = await self.store.get_incident(head.incident_id)
        if inc is None:
            return Delivered()
        unconfirmed = Unconfirmed.parse(ref)
        if unconfirmed is not None:  # a post was started and its answer never kept: is it in the channel?
            ref = await self._adopt(head, channel, unconfirmed)
        payloads = [i.payload for i in items]
        quiet = all(p.only_if_posted for p in payloads) or folded_unposted(inc, ref)
        note = payloads[-1].note
        text, blocks = render_incident(inc, replace(self._render_context(note), link_secret=self.settings.link_secret,
                                                    link_lifetime=self.settings.link_lifetime))
        where = parse_ref(ref)
        if where is not None:
            try:
                await self._call("chat.update", where[0], channel=where[0], ts=where[1], text=text, blocks=blocks)
                return Delivered(ref=ref)
            except MessageGone:
                log.warning("Slack message for %s in %s was deleted; posting a new one", inc.id, channel)
        if quiet or (inc.status == CLOSED and where is None and not any(EventKind.OPENED in p.kinds for p in payloads)):
            # never posted and nothing to say alone (muted, folded into a fleet, or over before it was sent)
            return Delivered()
        if where is not None:  # the message was deleted: this post was not spaced by the outbox
            await self.limiter.acquire(("post", channel))
        if unconfirmed is None:  # write-ahead: from here until the ts is saved, a post may be out there
            unconfirmed = Unconfirmed(self._channel_ids.get(channel, channel if CHANNEL_ID.match(channel) else ""),
                                      time.time())
            await self.store.save_ref(head.incident_id, head.target, unconfirmed.ref)
        try:
            resp = await self._call("chat.postMessage", channel, once=True, channel=channel, text=text, blocks=blocks,
                                    unfurl_links=False, unfurl_media=False,
                                    metadata=metadata(self.installation(), inc.id))
        except MessageGone as exc:
            raise DeliveryError(f"Slack chat.postMessage: {exc}", retry=False) from None
        new_ref = f"{resp.get('channel') or channel}|{resp['ts']}"
        await self.store.save_ref(head.incident_id, head.target, new_ref)  # before anything else: no double post
        return Delivered(ref=new_ref)

    async def _adopt(self, head: OutboxItem, channel: str, lost: Unconfirmed) -> str | None:
        """The ref of the message an earlier attempt posted (saved at once), or None when there is none (or it
        cannot be looked for: then it is logged once and the caller posts, as it would without the lookup)."""
        try:
            channel_id = lost.channel_id or await self._channel_id(head, channel)
            if not channel_id:
                self._tell(f"id:{channel}", "Slack channel %s is not in conversations.list: a post to it whose "
                           "answer was lost cannot be looked for and is posted again", channel)
                return None

            async def history(args: JSONObject) -> JSONObject:
                return await self._call("conversations.history", channel_id, get=True, args=args)

            ts = await find_post(history, channel_id, lost.started, self.installation(), head.incident_id)
        except SlackCallError as exc:
            if exc.error not in UNUSABLE:
                raise  # rate limited, Slack down: try again later rather than risk a second post
            self._tell(f"{exc.error}:{channel}", "%s in %s; alertd cannot look for a post whose answer was lost "
                       "and posts again. Give the bot token the channels:history and groups:history scopes (and "
                       "channels:read, groups:read for channels configured by name) and invite the bot to the "
                       "channel", exc, channel)
            return None
        if ts is None:
            return None
        ref = f"{channel_id}|{ts}"
        await self.store.save_ref(head.incident_id, head.target, ref)
        log.info("Slack: %s in %s was posted by an earlier attempt whose answer was lost; using it (ts %s)",
                 head.incident_id, channel, ts)
        return ref

    async def _channel_id(self, head: OutboxItem, channel: str) -> str:
        """The id of the target's channel: given, learnt from an answer, saved with another incident's message,
        or, for a name alertd never had an answer for, from conversations.list."""
        found = self._channel_ids.get(channel) or (channel if CHANNEL_ID.match(channel) else "")
        if not found and (known := parse_ref(await self.store.any_ref(str(head.target), "%|%"))):
            found = known[0]
        if not found and channel.startswith("#"):
            async def listing(args: JSONObject) -> JSONObject:
                return await self._call("conversations.list", channel, get=True, args=args)

            found = await find_channel(listing, channel) or ""
        if found:
            self._channel_ids[channel] = found
        return found

    def _tell(self, key: str, message: str, *args: Any) -> None:
        if key not in self._told:
            self._told.add(key)
            log.error(message, *args)

    async def _thread(self, items: list[OutboxItem], channel: str, ref: str | None) -> Delivered:
        where = parse_ref(ref)
        if where is None:  # the message was never posted (muted, failed): its thread has nowhere to go
            return Delivered()
        events = [e for i in items if isinstance(i.payload, Timeline) for e in i.payload.events]
        inc = await self.store.get_incident(items[0].incident_id)
        text, blocks = render_thread(events, inc)
        try:
            await self._call("chat.postMessage", channel, channel=where[0], thread_ts=where[1], text=text,
                             blocks=blocks, unfurl_links=False, unfurl_media=False)
        except MessageGone as exc:
            raise DeliveryError(f"Slack thread reply: {exc}", retry=False) from None
        return Delivered()

    async def _escalate(self, item: OutboxItem, channel: str, ref: str | None) -> Delivered:
        if ref:
            return Delivered()  # already noted
        inc = await self.store.get_incident(item.incident_id)
        if inc is None or inc.status != OPEN:
            return Delivered()  # acknowledged or resolved in time
        main = parse_ref(await self.store.notify_ref(item.incident_id, item.target.main))
        if main is None:
            return Delivered()
        esc = item.payload
        if not isinstance(esc, Escalate):
            raise DeliveryError(f"Slack escalation note: a {esc.intent} payload", retry=False)
        after = format_duration(timedelta(seconds=esc.after))
        key = esc.routing_key
        text = f":rotating_light: Not acknowledged within {after}: escalated" + (f" to PagerDuty `{key}`" if key else "") + "."
        try:
            await self._call("chat.postMessage", channel, channel=main[0], thread_ts=main[1], text=text,
                             reply_broadcast=True)
        except MessageGone as exc:
            raise DeliveryError(f"Slack escalation note: {exc}", retry=False) from None
        await self.store.save_ref(item.incident_id, item.target, "posted")
        return Delivered(ref="posted")


class Slack(Integration[SlackSettings, SlackSection]):
    name = "slack"
    intents = frozenset({Intent.SHOW, Intent.TIMELINE, Intent.ESCALATE})
    conversation = True
    receiver_schema = {
        "description": "One channel (\"#gpu-oncall\" or a channel ID), or {channels: [...]}.",
        "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": {
                "channel": {"type": "string", "minLength": 1},
                "channels": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}}},
        ],
    }
    section = SlackSection

    def targets(self, doc: JSONValue, problem: Problem, path: Path_) -> list[Target]:
        if isinstance(doc, str):
            return [self.target(doc)]
        part = obj(doc, "slack receiver")
        one = part.get("channel")
        channels = strings(part.get("channels")) + ([one] if isinstance(one, str) and one else [])
        return [self.target(c) for c in dict.fromkeys(channels)]

    def settings(self, section: SlackSection, links: Links) -> SlackSettings:
        return SlackSettings.parse(section, links)

    def notifier(self, settings: SlackSettings, store: NotifyStore, clock: Callable[[], datetime], *,
                 installation: Callable[[], str] = lambda: "") -> Notifier:
        return SlackNotifier(settings, store, clock, installation=installation)


INTEGRATION = Slack()
