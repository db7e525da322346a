"""A strict stand-in for the Slack Web API, for tests of the Slack notifier.

It answers the way https://slack.com/api/ does for the methods alertd uses, so a
notifier built on the real ``slack_sdk`` client is exercised without Slack:

    server = SlackTestServer()
    base_url = await server.start()           # http://127.0.0.1:PORT/api/
    client = AsyncWebClient(token="xoxb-test", base_url=base_url)
    resp = await client.chat_postMessage(channel="#gpu-alerts", text="Xid 79")
    server.messages[resp["channel"]][resp["ts"]]["text"] == "Xid 79"
    await server.stop()

Methods: ``chat.postMessage``, ``chat.update``, ``conversations.history``, ``conversations.list`` (and message
``metadata``: testkit/slack_history.py), ``auth.test``, ``conversations.info``
and ``api.test``. Anything else answers ``unknown_method``.

Contract, as documented by Slack and as the real API behaves:

* Every answer is HTTP 200 with ``{"ok": false, "error": ...}`` on failure,
  except rate limiting (HTTP 429, ``Retry-After`` seconds, ``ratelimited``)
  and injected server errors.
* The token comes as ``Authorization: Bearer <token>``; form-encoded and GET
  calls may instead carry a ``token`` argument. A JSON body cannot carry the
  token. No token -> ``not_authed``; a wrong one -> ``invalid_auth``.
* Bodies are ``application/x-www-form-urlencoded`` (``blocks`` and
  ``attachments`` as JSON strings), ``application/json`` or query arguments.
  JSON without ``charset`` is accepted with the ``missing_charset`` warning.
* ``channel`` is a channel ID (``C...``) or a ``#name``; by default any such
  channel exists, ``channels=`` restricts them. Answers always carry the ID.
  ``chat.update`` takes the ID only, like Slack. Unknown -> ``channel_not_found``.
* A message needs ``text``, ``blocks`` or ``attachments`` (else ``no_text``).
  Block Kit limits are enforced with Slack's ``invalid_blocks`` error and an
  ``errors`` list of ``<reason> [json-pointer:/blocks/N/...]`` entries: at most
  50 blocks, section text 1..3000 characters, section fields at most 10 of at
  most 2000 characters, header text plain_text of 1..150 characters, block_id
  up to 255 characters and unique, context up to 10 elements, actions up to 25.
* ``thread_ts`` must be the ``ts`` of a top-level message in that channel
  (else ``thread_not_found``). ``chat.update`` of an unknown ``ts`` ->
  ``message_not_found``.
* ``ts`` values are ``<epoch seconds>.<6 digits>``, unique and increasing.

Recorded for assertions: ``calls`` (every request, as ``(method, params,
monotonic time)``), ``messages`` (channel ID -> ts -> latest message, replies
with ``thread_ts``, every message with an ``updates`` count; ``#name`` keys are
resolved to the ID) and :meth:`replies`.

Faults: :meth:`fail_next` (429 with ``Retry-After``, 5xx, or any Slack error
code), :meth:`lose_reply_next` (the call takes effect, then the connection drops
before the answer), ``after_call`` (called with each successful call, e.g. to
kill the caller before it reads the answer), :meth:`down_for` (every call 5xx for a while), ``delay`` (seconds added to every call) and, off by default,
``rate_limit_per_channel_per_s`` (429 when posts to one channel come faster).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any, Callable, NamedTuple
from urllib.parse import parse_qsl

from aiohttp import web

from testkit.loopback import LoopbackServer
from testkit.slack_blocks import validate_blocks
from testkit.slack_history import DEFAULT_SCOPES, HistoryMethods

TEAM_ID = "T0ALERTD01"
BOT_USER_ID = "U0ALERTD01"
BOT_ID = "B0ALERTD01"
APP_ID = "A0ALERTD01"

MAX_ATTACHMENTS = 100
MAX_TEXT = 40000  # chat.postMessage truncates longer text; chat.update refuses it

_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,}$")
_TS = re.compile(r"^\d+\.\d{6}$")


class SlackCall(NamedTuple):
    """One request as received: Slack method, merged arguments, ``time.monotonic()``."""

    method: str
    params: dict[str, Any]
    at: float


class _Fault(NamedTuple):
    method: str
    status: int
    retry_after: float | None
    error: str | None
    body: bytes | None = None  # a non-JSON answer (a proxy's HTML error page) instead of Slack's JSON
    content_type: str = "text/html"  # of ``body``


class SlackError(Exception):
    def __init__(self, error: str, *, status: int = 200, errors: list[str] | None = None,
                 headers: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None):
        super().__init__(error)
        self.error, self.status, self.errors, self.headers = error, status, errors, headers
        self.extra = dict(extra or {})  # more top-level fields (missing_scope: needed, provided)


def channel_id_for(name: str) -> str:
    """The stable channel ID the server gives the channel ``#name``."""
    digest = hashlib.sha1(name.lstrip("#").encode()).hexdigest().upper()
    return "C0" + digest[:9]


class ChannelMessages(dict):
    """``channel ID -> {ts -> message}``; lookups by ``#name`` resolve to the ID."""

    def __init__(self, resolve):
        super().__init__()
        self._resolve = resolve

    def _key(self, key):
        if isinstance(key, str) and key.startswith("#"):
            return self._resolve(key) or key
        return key

    def __getitem__(self, key):
        return super().__getitem__(self._key(key))

    def __contains__(self, key):
        return super().__contains__(self._key(key))

    def get(self, key, default=None):
        return super().get(self._key(key), default)


class SlackTestServer(HistoryMethods, LoopbackServer):
    """The Slack Web API subset alertd uses, served on 127.0.0.1."""

    url_path = "/api/"

    def __init__(self, token: str = "xoxb-test", signing_secret: str | None = None, *,
                 channels: Iterable[str] | Mapping[str, str] | None = None,
                 delay: float = 0.0,
                 rate_limit_per_channel_per_s: float | None = None,
                 rate_limit_burst: int = 1,
                 team: str = "alertd-test",
                 scopes: Iterable[str] = DEFAULT_SCOPES,
                 private: Iterable[str] = (),
                 not_member: Iterable[str] = (),
                 max_history_limit: int = 999,
                 history_per_minute: float | None = None):
        super().__init__(delay=delay)
        self.token = token
        self.signing_secret = signing_secret
        self.rate_limit_per_channel_per_s = rate_limit_per_channel_per_s
        self.rate_limit_burst = rate_limit_burst
        self.team = team
        self.scopes = frozenset(scopes)
        self.private, self.not_member = set(private), set(not_member)  # channel ids
        self.max_history_limit, self.history_per_minute = max_history_limit, history_per_minute
        self._history_calls: list[float] = []
        self._lose: list[str] = []  # methods whose next answer is dropped after the call took effect
        self.after_call: Callable[[str, dict, dict], None] | None = None
        # name ("#x") -> ID, and the set of known IDs; None = any well-formed channel exists
        self._names: dict[str, str] = {}
        self._ids: dict[str, str] = {}  # ID -> name ("" when unnamed)
        self._restricted = channels is not None
        if channels is not None:
            items = channels.items() if isinstance(channels, Mapping) else ((c, None) for c in channels)
            for name_or_id, cid in items:
                self.add_channel(name_or_id, cid)
        self.calls: list[SlackCall] = []
        self.messages: ChannelMessages = ChannelMessages(self.channel_id)
        self._faults: list[_Fault] = []
        self._down: tuple[float, int] = (0.0, 503)  # (monotonic end, status) of an outage
        self._buckets: dict[str, tuple[float, float]] = {}  # channel -> (tokens, last refill)
        self._last_ts = 0.0

    # ------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str | None:
        """The API base URL ``http://127.0.0.1:PORT/api/`` (None before start())."""
        return self.url

    def app(self) -> web.Application:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._handle)
        return app

    # ------------------------------------------------------------ test controls

    def add_channel(self, name_or_id: str, channel_id: str | None = None) -> str:
        """Make a channel exist (``#name`` and/or ``C...`` ID); returns its ID."""
        if name_or_id.startswith("#"):
            cid = channel_id or channel_id_for(name_or_id)
            self._names[name_or_id] = cid
            self._ids[cid] = name_or_id[1:]
        else:
            cid = name_or_id
            self._ids.setdefault(cid, "")
        return cid

    def channel_id(self, channel: str) -> str | None:
        """The ID of ``channel`` (``#name`` or ID), or None when it does not exist."""
        if not isinstance(channel, str) or not channel:
            return None
        if channel.startswith("#"):
            if channel in self._names:
                return self._names[channel]
            if self._restricted or len(channel) < 2:
                return None
            return self.add_channel(channel)
        if channel in self._ids:
            return channel
        if self._restricted or not _CHANNEL_ID.match(channel) or not channel.startswith("C"):
            return None
        return self.add_channel(channel)

    def fail_next(self, method: str = "*", status: int = 429, retry_after: float | None = 1,
                  *, error: str | None = None, count: int = 1, body: bytes | None = None,
                  content_type: str = "text/html") -> None:
        """Make the next ``count`` calls of ``method`` (``"*"``: any) fail.

        429 answers ``Retry-After: <retry_after rounded up to whole seconds>`` and
        ``ratelimited``; 5xx
        answers ``internal_error`` (or ``error``); any other status answers
        ``{"ok": false, "error": error}`` with that status (200 for a plain
        Slack error such as ``fatal_error``). ``body`` answers those bytes as
        ``content_type`` (text/html by default) instead, like a load balancer or
        proxy in front of Slack does (nginx's 405 is text/plain).
        """
        for _ in range(count):
            self._faults.append(_Fault(method, status, retry_after, error, body, content_type))

    def lose_reply_next(self, method: str = "chat.postMessage", count: int = 1) -> None:
        """The next ``count`` calls of ``method`` take effect, then the connection is dropped unanswered."""
        self._lose.extend([method] * count)

    def replies(self, channel: str, parent_ts: str) -> list[dict]:
        """The replies in the thread of ``parent_ts``, oldest first."""
        msgs = self.messages.get(channel) or {}
        return sorted((m for m in msgs.values() if m.get("thread_ts") == parent_ts),
                      key=lambda m: m["ts"])

    def calls_of(self, method: str) -> list[SlackCall]:
        return [c for c in self.calls if c.method == method]

    def all_messages(self) -> list[dict]:
        """Every stored message of every channel, in ``ts`` order."""
        return sorted((m for msgs in self.messages.values() for m in msgs.values()),
                      key=lambda m: m["ts"])

    def sign(self, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        """``X-Slack-Request-Timestamp``/``X-Slack-Signature`` headers Slack would send with ``body``."""
        if self.signing_secret is None:
            raise ValueError("SlackTestServer was created without a signing_secret")
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = b"v0:" + ts.encode() + b":" + body
        sig = hmac.new(self.signing_secret.encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + sig}

    # ------------------------------------------------------------ HTTP

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        at = time.monotonic()
        warnings: list[str] = []
        try:
            params, body_token = await self._read_params(request, warnings)
        except SlackError as exc:
            self.calls.append(SlackCall(method, {}, at))
            return self._error(exc)
        self.calls.append(SlackCall(method, dict(params), at))
        await self.wait_delay()
        try:
            fault = self._take_fault(method)
            if fault is not None:
                return fault
            self._authenticate(request, body_token)
            handler = self._METHODS.get(method)
            if handler is None:
                raise SlackError("unknown_method", status=404)
            if request.method not in ("GET", "POST"):
                raise SlackError("invalid_request", status=405)
            result = handler(self, params)
        except SlackError as exc:
            return self._error(exc, warnings)
        if self.after_call is not None:
            self.after_call(method, params, result)
        if method in self._lose:
            self._lose.remove(method)
            if request.transport is not None:
                request.transport.abort()  # Slack did it; the caller never hears
            return web.Response(status=204)  # written nowhere
        if warnings:
            result["response_metadata"] = {"warnings": warnings}
        return web.json_response(result)

    async def _read_params(self, request: web.Request, warnings: list[str]) -> tuple[dict, str | None]:
        params: dict[str, Any] = dict(request.query)
        body_token = params.pop("token", None)
        raw = await request.read()
        ctype = request.headers.get("Content-Type", "")
        mime = ctype.split(";")[0].strip().lower()
        if raw and mime == "application/json":
            if "charset" not in ctype.lower():
                warnings.append("missing_charset")
            try:
                body = json.loads(raw)
            except ValueError:
                raise SlackError("invalid_json") from None
            if not isinstance(body, dict):
                raise SlackError("json_not_object")
            params.update(body)
            if "token" in body:  # Slack ignores a token inside a JSON body
                params.pop("token")
        elif raw and mime == "application/x-www-form-urlencoded":
            try:
                form = dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=True))
            except (ValueError, UnicodeDecodeError):
                raise SlackError("invalid_form_data") from None
            body_token = form.pop("token", body_token)
            params.update(form)
        elif raw:
            raise SlackError("invalid_form_data")
        return params, body_token

    def _authenticate(self, request: web.Request, body_token: str | None) -> None:
        header = request.headers.get("Authorization")
        token = None
        if header:
            scheme, _, value = header.partition(" ")
            if scheme != "Bearer" or not value.strip():
                raise SlackError("invalid_auth")
            token = value.strip()
        elif body_token:
            token = body_token
        if not token:
            raise SlackError("not_authed")
        if token != self.token:
            raise SlackError("invalid_auth")

    def down_for(self, seconds: float, status: int = 503) -> None:
        """An outage: every call answers ``status`` (``internal_error``) for the next ``seconds``."""
        self._down = (time.monotonic() + seconds, status)

    def _take_fault(self, method: str) -> web.Response | None:
        until, status = self._down
        if time.monotonic() < until:
            return web.json_response({"ok": False, "error": "internal_error"}, status=status)
        for i, fault in enumerate(self._faults):
            if fault.method in ("*", method):
                del self._faults[i]
                if fault.body is not None:
                    return web.Response(body=fault.body, status=fault.status, content_type=fault.content_type)
                if fault.status == 429:
                    return self._ratelimited(fault.retry_after if fault.retry_after is not None else 1)
                error = fault.error or ("internal_error" if fault.status >= 500 else "fatal_error")
                return web.json_response({"ok": False, "error": error}, status=fault.status)
        return None

    @staticmethod
    def _ratelimited(retry_after: float) -> web.Response:
        # whole seconds, as Slack sends them (slack_sdk's retry handler int()s the header)
        return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                 headers={"Retry-After": str(max(0, math.ceil(retry_after)))})

    @staticmethod
    def _error(exc: SlackError, warnings: list[str] | None = None) -> web.Response:
        body: dict[str, Any] = {"ok": False, "error": exc.error}
        meta: dict[str, Any] = {}
        if exc.errors:
            body["errors"] = exc.errors
            meta["messages"] = [f"[ERROR] {e}" for e in exc.errors]
        if warnings:
            meta["warnings"] = warnings
        if meta:
            body["response_metadata"] = meta
        body.update(exc.extra)
        return web.json_response(body, status=exc.status, headers=exc.headers)

    def _fail(self, error: str, *, status: int = 200, retry_after: float | None = None, **extra: Any) -> Exception:
        headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if retry_after is not None else None
        return SlackError(error, status=status, headers=headers, extra=extra)

    # ------------------------------------------------------------ validation

    @staticmethod
    def _json_arg(params: dict, name: str, error: str) -> Any:
        value = params.get(name)
        if isinstance(value, str):
            if value == "":
                return None
            try:
                value = json.loads(value)
            except ValueError:
                raise SlackError(error) from None
        return value

    def _content(self, params: dict) -> tuple[str | None, list | None, list | None]:
        text = params.get("text")
        if text is not None and not isinstance(text, str):
            text = str(text)
        blocks = self._json_arg(params, "blocks", "invalid_blocks_format")
        if blocks is not None and not isinstance(blocks, list):
            raise SlackError("invalid_blocks_format")
        attachments = self._json_arg(params, "attachments", "invalid_attachments")
        if attachments is not None:
            if not isinstance(attachments, list) or not all(isinstance(a, dict) for a in attachments):
                raise SlackError("invalid_attachments")
            if len(attachments) > MAX_ATTACHMENTS:
                raise SlackError("too_many_attachments")
        if blocks is not None:
            errors = validate_blocks(blocks)
            if errors:
                raise SlackError("invalid_blocks", errors=errors)
        return text, blocks, attachments

    def _check_rate(self, channel: str) -> None:
        rate = self.rate_limit_per_channel_per_s
        if not rate:
            return
        now = time.monotonic()
        burst = max(1, self.rate_limit_burst)
        tokens, last = self._buckets.get(channel, (float(burst), now))
        tokens = min(float(burst), tokens + (now - last) * rate)
        if tokens < 1.0:
            self._buckets[channel] = (tokens, now)
            wait = (1.0 - tokens) / rate
            raise SlackError("ratelimited", status=429, headers={"Retry-After": str(max(1, math.ceil(wait)))})
        self._buckets[channel] = (tokens - 1.0, now)

    def _next_ts(self) -> str:
        now = round(time.time(), 6)
        if now <= self._last_ts:
            now = round(self._last_ts + 0.000001, 6)
        self._last_ts = now
        return f"{now:.6f}"

    def _bot_message(self, ts: str, text: str, blocks: list | None, attachments: list | None) -> dict:
        msg: dict[str, Any] = {
            "type": "message",
            "subtype": "bot_message",
            "text": text,
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "team": TEAM_ID,
            "ts": ts,
            "bot_profile": {"id": BOT_ID, "app_id": APP_ID, "name": "alertd", "deleted": False,
                            "team_id": TEAM_ID},
        }
        if blocks is not None:
            msg["blocks"] = blocks
        if attachments is not None:
            msg["attachments"] = attachments
        return msg

    # ------------------------------------------------------------ methods

    def _api_test(self, params: dict) -> dict:
        return {"ok": True, "args": {k: v for k, v in params.items() if isinstance(v, str)}}

    def _auth_test(self, params: dict) -> dict:
        return {"ok": True, "url": f"https://{self.team}.slack.com/", "team": self.team,
                "user": "alertd", "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID,
                "is_enterprise_install": False}

    def _conversations_info(self, params: dict) -> dict:
        channel = params.get("channel")
        cid = self.channel_id(channel) if isinstance(channel, str) and not channel.startswith("#") else None
        if cid is None:
            raise SlackError("channel_not_found")
        name = self._ids.get(cid) or cid.lower()
        return {"ok": True, "channel": {
            "id": cid, "name": name, "is_channel": True, "is_group": False, "is_im": False,
            "is_private": False, "is_archived": False, "is_member": True, "created": 1700000000,
            "context_team_id": TEAM_ID, "name_normalized": name,
        }}

    def _post_message(self, params: dict) -> dict:
        channel = params.get("channel")
        cid = self.channel_id(channel) if channel else None
        if cid is None:
            raise SlackError("channel_not_found")
        text, blocks, attachments = self._content(params)
        if not text and not blocks and not attachments:
            raise SlackError("no_text")
        thread_ts = params.get("thread_ts")
        if thread_ts not in (None, ""):
            thread_ts = str(thread_ts)
            parent = self.messages.get(cid, {}).get(thread_ts)
            if parent is None or "thread_ts" in parent:
                raise SlackError("thread_not_found")
        else:
            thread_ts = None
        meta = self._metadata(params)
        self._check_rate(cid)
        ts = self._next_ts()
        msg = self._bot_message(ts, (text or "")[:MAX_TEXT], blocks, attachments)
        if meta is not None:
            msg["metadata"] = meta
        if thread_ts is not None:
            msg["thread_ts"] = thread_ts
            msg["parent_user_id"] = BOT_USER_ID
            parent = self.messages[cid][thread_ts]
            parent["reply_count"] = parent.get("reply_count", 0) + 1
            parent["latest_reply"] = ts
        stored = dict(msg, channel=cid, updates=0)
        if str(params.get("reply_broadcast", "")).lower() in ("1", "true"):
            stored["reply_broadcast"] = True
        self.messages.setdefault(cid, {})[ts] = stored
        return {"ok": True, "channel": cid, "ts": ts, "message": msg}

    def _update(self, params: dict) -> dict:
        channel = params.get("channel")
        # chat.update wants the channel ID; a #name is not accepted
        cid = self.channel_id(channel) if isinstance(channel, str) and not channel.startswith("#") else None
        if cid is None:
            raise SlackError("channel_not_found")
        ts = params.get("ts")
        ts = str(ts) if ts is not None else ""
        if not _TS.match(ts) or ts not in self.messages.get(cid, {}):
            raise SlackError("message_not_found")
        text, blocks, attachments = self._content(params)
        if not text and not blocks and not attachments:
            raise SlackError("no_text")
        if text is not None and len(text) > MAX_TEXT:
            raise SlackError("msg_too_long")
        meta = self._metadata(params)
        stored = self.messages[cid][ts]
        if meta is not None:
            stored["metadata"] = meta
        stored["text"] = text if text is not None else ""
        if blocks is not None:
            stored["blocks"] = blocks
        if attachments is not None:
            stored["attachments"] = attachments
        stored["updates"] += 1
        stored["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
        message = {k: v for k, v in stored.items() if k not in ("channel", "updates", "reply_broadcast")}
        return {"ok": True, "channel": cid, "ts": ts, "text": stored["text"], "message": message}

    _METHODS = {
        "api.test": _api_test,
        "auth.test": _auth_test,
        "conversations.info": _conversations_info,
        "conversations.history": HistoryMethods._conversations_history,
        "conversations.list": HistoryMethods._conversations_list,
        "chat.postMessage": _post_message,
        "chat.update": _update,
    }
