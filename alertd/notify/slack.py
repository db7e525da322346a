"""Slack: one living message per incident and channel, follow-ups in its thread.

Outbox item kinds for target ``slack:<channel>``:

* ``update``   render the incident as stored NOW and post it (first time) or
               ``chat.update`` it; later pending updates of the same incident
               and channel are covered by this one and marked done.
* ``thread``   a reply under the message for timeline events (alerts joined,
               evidence, acknowledged, resolved with a summary); pending
               replies are coalesced into one.
* ``escalate`` (target ``slack:<channel>|escalation``) a thread note that the
               incident was escalated, skipped if it was acknowledged or
               resolved meanwhile.

The message's channel id and ts are saved with ``store.save_ref`` right after
``chat.postMessage`` returns and before anything else, so a crash between the
post and the outbox commit makes the redelivery ``chat.update`` instead of
posting twice. Posts are spaced per channel (about one per second); a 429
pauses the channel for its Retry-After and the item is retried after it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from alertd.durations import format_duration, parse_duration
from alertd.model import CLOSED, OPEN
from alertd.notify.base import Delivered, DeliveryError, Notifier, NotifierSettings, folded_unposted
from alertd.notify.slack_render import RenderContext, render_incident, render_thread
from alertd.store.base import OutboxItem, Store

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


@dataclass(slots=True)
class SlackSettings(NotifierSettings):
    token: str = ""
    base_url: str = DEFAULT_BASE_URL
    signing_secret: str = ""
    default_channel: str = ""
    debounce: timedelta = timedelta(seconds=2)
    per_channel: float = 1.0
    burst: int = 1

    @property
    def enabled(self) -> bool:
        return bool(self.token.strip())

    @classmethod
    def from_config(cls, cfg: Any) -> "SlackSettings":
        doc, shared = cls.read(cfg, "slack")
        rate = doc.get("rate") or {}
        return cls(
            token=doc.get("token", "") or "",
            base_url=doc.get("base_url") or DEFAULT_BASE_URL,
            signing_secret=doc.get("signing_secret", "") or "",
            default_channel=doc.get("default_channel", "") or "",
            debounce=parse_duration(doc.get("debounce", "2s")),
            per_channel=float(rate.get("per_channel", 1.0)),
            burst=int(rate.get("burst", 1)),
            **shared,
        )


class RateLimiter:
    """Per-key spacing (GCRA with a burst) plus pauses from 429 answers.

    ``slot`` hands out the next free time in order (a reservation). A caller
    that would wait long gives its item back to the outbox with that delay and
    keeps the reservation under ``token``, so a busy channel does not hold up
    deliveries to other channels, and the item keeps its place when it returns.
    """

    def __init__(self, rate: float, burst: int = 1, clock: Callable[[], float] = time.monotonic):
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.burst = max(1, burst)
        self.clock = clock
        self._tat: dict[Any, float] = {}
        self._paused: dict[Any, float] = {}
        self._held: dict[Any, tuple[Any, float]] = {}  # token -> (key, reserved slot)
        self._sent: dict[Any, list[float]] = {}  # key -> times of the last ``burst`` sends

    def pause(self, key: Any, seconds: float) -> None:
        until = self.clock() + seconds
        self._paused[key] = max(self._paused.get(key, 0.0), until)
        self._tat[key] = max(self._tat.get(key, 0.0), until)  # reservations made later start after it

    def paused_for(self, key: Any) -> float:
        return max(0.0, self._paused.get(key, 0.0) - self.clock())

    def slot(self, key: Any, token: Any = None) -> float:
        """The time this send may go (reserved now, or earlier under ``token``)."""
        now = self.clock()
        held = self._held.pop(token, None) if token is not None else None
        if held is not None and held[0] == key:
            slot = held[1]
        else:
            tat = max(self._tat.get(key, now), now)
            slot = max(now, tat - (self.burst - 1) * self.interval)
            self._tat[key] = max(tat, slot) + self.interval
        sent = self._sent.get(key, [])
        if len(sent) >= self.burst:  # never closer than the rate to what was really sent
            slot = max(slot, sent[-self.burst] + self.interval * self.burst)
        return max(slot, self._paused.get(key, 0.0))

    def hold(self, token: Any, key: Any, slot: float) -> None:
        self._held[token] = (key, slot)
        if len(self._held) > 100_000:  # tokens of items that never came back (given up, other process)
            self._held.pop(next(iter(self._held)))

    def sent(self, key: Any) -> None:
        times = self._sent.setdefault(key, [])
        times.append(self.clock())
        del times[:-self.burst]

    async def acquire(self, key: Any) -> None:
        await self.wait_until(key, self.slot(key))

    async def wait_until(self, key: Any, slot: float) -> None:
        """Sleep until ``slot`` (or the end of a pause that came meanwhile), then count the send."""
        while True:
            wait = max(slot, self._paused.get(key, 0.0)) - self.clock()
            if wait <= 0:
                self.sent(key)
                return
            await asyncio.sleep(wait)


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


class SlackNotifier(Notifier):
    kind = "slack"

    installation: Callable[[], str] = staticmethod(lambda: "")  # set by build_notifiers: the installation id

    def __init__(self, settings: SlackSettings, store: Store, clock: Callable[[], datetime], *,
                 client: AsyncWebClient | None = None):
        self.settings, self.store, self.clock = settings, store, clock
        self._client = client
        self._session: aiohttp.ClientSession | None = None
        self.posts = RateLimiter(settings.per_channel, settings.burst)
        self.max_wait = 0.5  # longer waits for a busy channel go back to the outbox
        self.calls = 0

    # ----- plumbing -----

    def client(self) -> AsyncWebClient:
        if self._client is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.settings.timeout))
            self._client = AsyncWebClient(
                token=self.settings.token, base_url=self.settings.base_url, timeout=int(max(1, self.settings.timeout)),
                session=self._session, retry_handlers=[AsyncConnectionErrorRetryHandler(max_retry_count=1)])
        return self._client

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            self._client = None

    def _render_context(self, note: str = "") -> RenderContext:
        s = self.settings
        return RenderContext(runbook_base_url=s.runbook_base_url, alertmanager_url=s.alertmanager_url,
                             alertd_url=s.alertd_url, note=note, now=self.clock(), installation_id=self.installation())

    async def _call(self, method: str, limit_channel: str, /, _item: int | None = None, **params: Any) -> dict:
        key = ("post", limit_channel) if method == "chat.postMessage" else ("update", "")
        if method == "chat.postMessage":
            slot = self.posts.slot(key, _item)
            wait = slot - self.posts.clock()
            if wait > self.max_wait and _item is not None:
                # The channel is busy: give the item back to the outbox (its place is kept) instead of
                # holding a delivery slot that other channels could use.
                self.posts.hold(_item, key, slot)
                raise DeliveryError(f"Slack channel {limit_channel} busy (about 1 post/s): posting in {wait:.1f}s",
                                    retry=True, after=wait)
            await self.posts.wait_until(key, slot)
        else:
            wait = self.posts.paused_for(key)
            if wait > 0:
                await asyncio.sleep(wait)
        self.calls += 1
        try:
            resp = await self.client().api_call(method, json=params)
            return dict(resp.data) if isinstance(resp.data, dict) else {}
        except SlackApiError as exc:
            response = exc.response
            status = getattr(response, "status_code", 0)
            error = (response.get("error") if hasattr(response, "get") else None) or ""
            if status == 429 or error == "ratelimited":
                headers = {k.lower(): v for k, v in (getattr(response, "headers", None) or {}).items()}
                raw = headers.get("retry-after", "1")
                after = float(raw[0] if isinstance(raw, list) else raw)
                self.posts.pause(key, after)
                raise DeliveryError(f"Slack {method} rate limited; Retry-After {after:g}s", retry=True, after=after) from None
            if error in GONE:
                raise MessageGone(error) from None
            if error in PERMANENT:
                raise DeliveryError(f"Slack {method}: {error}", retry=False) from None
            raise DeliveryError(f"Slack {method}: HTTP {status} {error or 'error'}", retry=True) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise DeliveryError(f"Slack {method}: {type(exc).__name__}: {exc}", retry=True) from None

    async def _pending(self, item: OutboxItem, kinds: tuple[str, ...]) -> list[OutboxItem]:
        return await self.store.pending_outbox_for(item.incident_id, item.target, after_id=item.id, kinds=kinds)

    async def _covered(self, items: list[OutboxItem]) -> None:
        """Queued items that this delivery made redundant (it rendered the current incident)."""
        if items:
            await self.store.finish_outbox_batch([(i.id, None) for i in items])

    # ----- delivery -----

    async def deliver(self, item: OutboxItem, ref: str | None) -> Delivered:
        channel, sub = parse_target(item.target)
        if sub == "escalation" or item.kind == "escalate":
            return await self._escalate(item, channel, ref)
        if item.kind == "thread":
            return await self._thread(item, channel, ref)
        return await self._update(item, channel, ref)

    async def _update(self, item: OutboxItem, channel: str, ref: str | None) -> Delivered:
        # Read what is queued BEFORE reading the incident: everything queued so far is then in what we render.
        later = await self._pending(item, ("update",))
        inc = await self.store.get_incident(item.incident_id)
        if inc is None:
            await self._covered(later)
            return Delivered()
        payloads = [item.payload] + [i.payload for i in later]
        quiet = all(p.get("only_if_posted") for p in payloads) or folded_unposted(inc, ref)
        note = next((p.get("note") for p in reversed(payloads) if "note" in p), "")
        text, blocks = render_incident(inc, self._render_context(note))
        where = parse_ref(ref)
        if where is not None:
            try:
                await self._call("chat.update", where[0], channel=where[0], ts=where[1], text=text, blocks=blocks)
                await self._covered(later)
                return Delivered(ref=ref)
            except MessageGone:
                log.warning("Slack message for %s in %s was deleted; posting a new one", inc.id, channel)
        if quiet or (inc.status == CLOSED and where is None and not any("opened" in p.get("kinds", []) for p in payloads)):
            # never posted and nothing to say alone (muted, folded into a fleet, or over before it was sent)
            await self._covered(later)
            return Delivered()
        try:
            resp = await self._call("chat.postMessage", channel, _item=item.id, channel=channel, text=text, blocks=blocks,
                                    unfurl_links=False, unfurl_media=False)
        except MessageGone as exc:
            raise DeliveryError(f"Slack chat.postMessage: {exc}", retry=False) from None
        new_ref = f"{resp.get('channel') or channel}|{resp['ts']}"
        await self.store.save_ref(item.incident_id, item.target, new_ref)  # before anything else: no double post
        await self._covered(later)
        return Delivered(ref=new_ref)

    async def _thread(self, item: OutboxItem, channel: str, ref: str | None) -> Delivered:
        where = parse_ref(ref)
        later = await self._pending(item, ("thread",))
        if where is None:  # the message was never posted (muted, failed): its thread has nowhere to go
            await self._covered(later)
            return Delivered()
        events = list(item.payload.get("events", []))
        for i in later:
            events.extend(i.payload.get("events", []))
        inc = await self.store.get_incident(item.incident_id)
        text, blocks = render_thread(events, inc)
        try:
            await self._call("chat.postMessage", channel, _item=item.id, channel=where[0], thread_ts=where[1], text=text,
                             blocks=blocks, unfurl_links=False, unfurl_media=False)
        except MessageGone as exc:
            raise DeliveryError(f"Slack thread reply: {exc}", retry=False) from None
        await self._covered(later)
        return Delivered()

    async def _escalate(self, item: OutboxItem, channel: str, ref: str | None) -> Delivered:
        if ref:
            return Delivered()  # already noted
        inc = await self.store.get_incident(item.incident_id)
        if inc is None or inc.status != OPEN:
            return Delivered()  # acknowledged or resolved in time
        main = parse_ref(await self.store.notify_ref(item.incident_id, f"slack:{channel}"))
        if main is None:
            return Delivered()
        after = format_duration(timedelta(seconds=float(item.payload.get("after", 0))))
        key = item.payload.get("routing_key", "")
        text = f":rotating_light: Not acknowledged within {after}: escalated" + (f" to PagerDuty `{key}`" if key else "") + "."
        try:
            await self._call("chat.postMessage", channel, _item=item.id, channel=main[0], thread_ts=main[1], text=text,
                             reply_broadcast=True)
        except MessageGone as exc:
            raise DeliveryError(f"Slack escalation note: {exc}", retry=False) from None
        await self.store.save_ref(item.incident_id, item.target, "posted")
        return Delivered(ref="posted")
