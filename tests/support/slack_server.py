"""A strict stand-in for the Slack Web API, for tests of the Slack notifier.

It answers the way https://slack.com/api/ does for the methods alertd uses, so a
notifier built on the real ``slack_sdk`` client is exercised without Slack:

    server = SlackTestServer()
    base_url = await server.start()           # http://127.0.0.1:PORT/api/
    client = AsyncWebClient(token="xoxb-test", base_url=base_url)
    resp = await client.chat_postMessage(channel="#gpu-alerts", text="Xid 79")
    server.messages[resp["channel"]][resp["ts"]]["text"] == "Xid 79"
    await server.stop()

Methods: ``chat.postMessage``, ``chat.update``, ``auth.test``, ``conversations.info``
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
code), :meth:`down_for` (every call 5xx for a while), ``delay`` (seconds added to every call) and, off by default,
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
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

from aiohttp import web

from tests.support.loopback import LoopbackServer

TEAM_ID = "T0ALERTD01"
BOT_USER_ID = "U0ALERTD01"
BOT_ID = "B0ALERTD01"
APP_ID = "A0ALERTD01"

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_BLOCK_ID = 255
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_MARKDOWN_BLOCK_TEXT = 12000
MAX_IMAGE_URL = 3000
MAX_ALT_TEXT = 2000
MAX_ATTACHMENTS = 100
MAX_TEXT = 40000  # chat.postMessage truncates longer text; chat.update refuses it

BLOCK_TYPES = frozenset({
    "section", "header", "divider", "context", "actions", "image", "rich_text",
    "input", "file", "video", "markdown",
})
TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})

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


class SlackError(Exception):
    def __init__(self, error: str, *, status: int = 200, errors: list[str] | None = None,
                 headers: Mapping[str, str] | None = None):
        super().__init__(error)
        self.error, self.status, self.errors, self.headers = error, status, errors, headers


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


class SlackTestServer(LoopbackServer):
    """The Slack Web API subset alertd uses, served on 127.0.0.1."""

    url_path = "/api/"

    def __init__(self, token: str = "xoxb-test", signing_secret: str | None = None, *,
                 channels: Iterable[str] | Mapping[str, str] | None = None,
                 delay: float = 0.0,
                 rate_limit_per_channel_per_s: float | None = None,
                 rate_limit_burst: int = 1,
                 team: str = "alertd-test"):
        super().__init__(delay=delay)
        self.token = token
        self.signing_secret = signing_secret
        self.rate_limit_per_channel_per_s = rate_limit_per_channel_per_s
        self.rate_limit_burst = rate_limit_burst
        self.team = team
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
                  *, error: str | None = None, count: int = 1, body: bytes | None = None) -> None:
        """Make the next ``count`` calls of ``method`` (``"*"``: any) fail.

        429 answers ``Retry-After: <retry_after rounded up to whole seconds>`` and
        ``ratelimited``; 5xx
        answers ``internal_error`` (or ``error``); any other status answers
        ``{"ok": false, "error": error}`` with that status (200 for a plain
        Slack error such as ``fatal_error``). ``body`` answers those bytes as
        text/html instead, like a load balancer in front of Slack does.
        """
        for _ in range(count):
            self._faults.append(_Fault(method, status, retry_after, error, body))

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
                    return web.Response(body=fault.body, status=fault.status, content_type="text/html")
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
        return web.json_response(body, status=exc.status, headers=exc.headers)

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
        self._check_rate(cid)
        ts = self._next_ts()
        msg = self._bot_message(ts, (text or "")[:MAX_TEXT], blocks, attachments)
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
        stored = self.messages[cid][ts]
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
        "chat.postMessage": _post_message,
        "chat.update": _update,
    }


# ---------------------------------------------------------------- Block Kit


def _text_errors(obj: Any, ptr: str, *, max_len: int, plain_only: bool = False) -> list[str]:
    if not isinstance(obj, dict):
        return [f"must be an object [json-pointer:{ptr}]"]
    errors = []
    kind = obj.get("type")
    allowed = {"plain_text"} if plain_only else TEXT_TYPES
    if kind not in allowed:
        errors.append(f"must be one of {sorted(allowed)} [json-pointer:{ptr}/type]")
    text = obj.get("text")
    if not isinstance(text, str):
        errors.append(f"missing required field: text [json-pointer:{ptr}]")
    elif len(text) == 0:
        errors.append(f"must be more than 0 characters [json-pointer:{ptr}/text]")
    elif len(text) > max_len:
        errors.append(f"must be less than {max_len + 1} characters [json-pointer:{ptr}/text]")
    return errors


def validate_blocks(blocks: list) -> list[str]:
    """Slack's ``invalid_blocks`` reasons for ``blocks`` (empty when valid)."""
    if len(blocks) > MAX_BLOCKS:
        return [f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"]
    errors: list[str] = []
    seen_ids: set[str] = set()
    for i, block in enumerate(blocks):
        ptr = f"/blocks/{i}"
        if not isinstance(block, dict):
            errors.append(f"must be an object [json-pointer:{ptr}]")
            continue
        kind = block.get("type")
        if kind not in BLOCK_TYPES:
            errors.append(f"unsupported type: {kind} [json-pointer:{ptr}/type]")
            continue
        block_id = block.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or not block_id or len(block_id) > MAX_BLOCK_ID:
                errors.append(f"must be 1..{MAX_BLOCK_ID} characters [json-pointer:{ptr}/block_id]")
            elif block_id in seen_ids:
                errors.append(f"duplicate block_id: {block_id} [json-pointer:{ptr}/block_id]")
            else:
                seen_ids.add(block_id)
        if kind == "section":
            if "text" not in block and "fields" not in block:
                errors.append(f"must provide either text or fields [json-pointer:{ptr}]")
            if "text" in block:
                errors += _text_errors(block["text"], f"{ptr}/text", max_len=MAX_SECTION_TEXT)
            if "fields" in block:
                fields = block["fields"]
                if not isinstance(fields, list) or not fields:
                    errors.append(f"must be a non-empty array [json-pointer:{ptr}/fields]")
                elif len(fields) > MAX_SECTION_FIELDS:
                    errors.append(f"no more than {MAX_SECTION_FIELDS} items allowed [json-pointer:{ptr}/fields]")
                else:
                    for j, f in enumerate(fields):
                        errors += _text_errors(f, f"{ptr}/fields/{j}", max_len=MAX_FIELD_TEXT)
        elif kind == "header":
            errors += _text_errors(block.get("text"), f"{ptr}/text", max_len=MAX_HEADER_TEXT, plain_only=True)
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not elements:
                errors.append(f"must be a non-empty array [json-pointer:{ptr}/elements]")
            elif len(elements) > MAX_CONTEXT_ELEMENTS:
                errors.append(f"no more than {MAX_CONTEXT_ELEMENTS} items allowed [json-pointer:{ptr}/elements]")
            else:
                for j, el in enumerate(elements):
                    eptr = f"{ptr}/elements/{j}"
                    if isinstance(el, dict) and el.get("type") == "image":
                        if not el.get("alt_text") or not (el.get("image_url") or el.get("slack_file")):
                            errors.append(f"image needs image_url and alt_text [json-pointer:{eptr}]")
                    else:
                        errors += _text_errors(el, eptr, max_len=MAX_SECTION_TEXT)
        elif kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not elements:
                errors.append(f"must be a non-empty array [json-pointer:{ptr}/elements]")
            elif len(elements) > MAX_ACTIONS_ELEMENTS:
                errors.append(f"no more than {MAX_ACTIONS_ELEMENTS} items allowed [json-pointer:{ptr}/elements]")
        elif kind == "image":
            url = block.get("image_url")
            if not (isinstance(url, str) and 0 < len(url) <= MAX_IMAGE_URL) and not block.get("slack_file"):
                errors.append(f"missing required field: image_url [json-pointer:{ptr}]")
            alt = block.get("alt_text")
            if not isinstance(alt, str) or not alt or len(alt) > MAX_ALT_TEXT:
                errors.append(f"must be 1..{MAX_ALT_TEXT} characters [json-pointer:{ptr}/alt_text]")
        elif kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text or len(text) > MAX_MARKDOWN_BLOCK_TEXT:
                errors.append(f"must be 1..{MAX_MARKDOWN_BLOCK_TEXT} characters [json-pointer:{ptr}/text]")
        elif kind == "rich_text":
            if not isinstance(block.get("elements"), list):
                errors.append(f"missing required field: elements [json-pointer:{ptr}]")
    return errors
