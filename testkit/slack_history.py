"""``conversations.history`` and message metadata for the Slack test server, to Slack's documented contract.

* ``chat.postMessage`` / ``chat.update`` take ``metadata``: an object (or its JSON
  text) with a string ``event_type`` and an object ``event_payload``; anything
  else is ``invalid_metadata_format``. ``chat.update`` without it keeps the old one.
* ``conversations.history`` needs a channel ID (a ``#name`` is
  ``channel_not_found``), the ``channels:history`` scope (``groups:history`` for
  a private channel; else ``missing_scope`` with ``needed`` and ``provided``) and
  a bot that is a member of the channel (else ``not_in_channel``). It returns
  top-level messages (and broadcast replies), newest first, with ``ts`` strictly
  between ``oldest`` and ``latest`` (``inclusive`` includes them); ``limit``
  defaults to 100, at most 999 (``max_history_limit``: 15 for apps outside the
  Marketplace); ``has_more`` and ``response_metadata.next_cursor`` page on; an
  unknown cursor is ``invalid_cursor``, a malformed ``oldest``/``latest``
  ``invalid_ts_oldest``/``invalid_ts_latest``. A message carries ``metadata``
  only when ``include_all_metadata`` is true. ``history_per_minute`` answers
  429 with ``Retry-After`` past that rate (Slack's tier 3 is ~50; 1 for apps
  outside the Marketplace).
* ``conversations.list`` (``types`` default ``public_channel``, ``exclude_archived``,
  ``limit`` at most 1000, cursor paging) lists the channels the server knows, with
  ``channels:read`` (``groups:read`` for private ones) else ``missing_scope``.
"""
from __future__ import annotations

import base64
import json
import math
import re
import time
from typing import Any

DEFAULT_SCOPES = frozenset({"chat:write", "channels:read", "groups:read", "channels:history", "groups:history"})
CHANNEL_TYPES = frozenset({"public_channel", "private_channel", "mpim", "im"})
_TS_ARG = re.compile(r"^\d+(\.\d+)?$")


def truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("1", "true")


class HistoryMethods:
    """Mixed into SlackTestServer: ``metadata`` checks and ``conversations.history``."""

    scopes: frozenset[str] = DEFAULT_SCOPES
    private: set[str]  # channel ids of private channels (groups:history)
    not_member: set[str]  # channel ids the bot was not invited to
    max_history_limit: int = 999
    history_per_minute: float | None = None
    messages: Any
    _ids: dict[str, str]  # channel id -> name
    _history_calls: list[float]

    def _fail(self, error: str, *, status: int = 200, retry_after: float | None = None,
              **extra: Any) -> Exception:  # the server's SlackError
        raise NotImplementedError

    def channel_id(self, channel: str) -> str | None:
        raise NotImplementedError

    def _metadata(self, params: dict) -> dict | None:
        value = params.get("metadata")
        if value is None or value == "":
            return None
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise self._fail("invalid_metadata_format") from None
        if not (isinstance(value, dict) and isinstance(value.get("event_type"), str) and value["event_type"]
                and isinstance(value.get("event_payload"), dict)):
            raise self._fail("invalid_metadata_format")
        return {"event_type": value["event_type"], "event_payload": value["event_payload"]}

    def _conversations_history(self, params: dict) -> dict:
        channel = params.get("channel")
        cid = self.channel_id(channel) if isinstance(channel, str) and not channel.startswith("#") else None
        if cid is None:
            raise self._fail("channel_not_found")
        needed = "groups:history" if cid in self.private else "channels:history"
        if needed not in self.scopes:
            raise self._fail("missing_scope", needed=needed, provided=",".join(sorted(self.scopes)))
        if cid in self.not_member:
            raise self._fail("not_in_channel")
        self._history_rate()
        oldest = self._ts_arg(params, "oldest", 0.0)
        latest = self._ts_arg(params, "latest", math.inf)
        inclusive = truthy(params.get("inclusive"))
        try:
            limit = int(params.get("limit", 100) or 100)
        except (TypeError, ValueError):
            raise self._fail("invalid_arguments") from None
        limit = max(1, min(limit, 999, self.max_history_limit))
        before = math.inf
        if params.get("cursor"):
            try:
                before = float(base64.urlsafe_b64decode(str(params["cursor"]).encode()).decode().removeprefix("before:"))
            except (ValueError, UnicodeDecodeError):
                raise self._fail("invalid_cursor") from None
        rows = sorted((m for m in (self.messages.get(cid) or {}).values()
                       if ("thread_ts" not in m or m.get("reply_broadcast"))
                       and (oldest <= float(m["ts"]) if inclusive else oldest < float(m["ts"]))
                       and (float(m["ts"]) <= latest if inclusive else float(m["ts"]) < latest)
                       and float(m["ts"]) < before), key=lambda m: float(m["ts"]), reverse=True)
        page, more = rows[:limit], len(rows) > limit
        with_meta = truthy(params.get("include_all_metadata"))
        out = [{k: v for k, v in m.items() if k not in ("channel", "updates", "reply_broadcast")
                and (with_meta or k != "metadata")} for m in page]
        cursor = base64.urlsafe_b64encode(f"before:{page[-1]['ts']}".encode()).decode() if more else ""
        return {"ok": True, "messages": out, "has_more": more, "pin_count": 0,
                "response_metadata": {"next_cursor": cursor}}

    def _conversations_list(self, params: dict) -> dict:
        types = [t.strip() for t in str(params.get("types") or "public_channel").split(",") if t.strip()]
        if not types or not set(types) <= CHANNEL_TYPES:
            raise self._fail("invalid_types")
        for kind, scope in (("public_channel", "channels:read"), ("private_channel", "groups:read")):
            if kind in types and scope not in self.scopes:
                raise self._fail("missing_scope", needed=scope, provided=",".join(sorted(self.scopes)))
        try:
            limit = max(1, min(int(params.get("limit", 100) or 100), 1000))
        except (TypeError, ValueError):
            raise self._fail("invalid_limit") from None
        after = ""
        if params.get("cursor"):
            try:
                after = base64.urlsafe_b64decode(str(params["cursor"]).encode()).decode().removeprefix("after:")
            except (ValueError, UnicodeDecodeError):
                raise self._fail("invalid_cursor") from None
        rows = [{"id": cid, "name": name or cid.lower(), "is_channel": True, "is_private": cid in self.private,
                 "is_archived": False, "is_member": cid not in self.not_member}
                for cid, name in sorted(self._ids.items()) if cid > after
                and ("private_channel" if cid in self.private else "public_channel") in types]
        page, more = rows[:limit], len(rows) > limit
        cursor = base64.urlsafe_b64encode(f"after:{page[-1]['id']}".encode()).decode() if more else ""
        return {"ok": True, "channels": page, "response_metadata": {"next_cursor": cursor}}

    def _ts_arg(self, params: dict, name: str, default: float) -> float:
        value = params.get(name)
        if value in (None, ""):
            return default
        if not _TS_ARG.match(str(value)):
            raise self._fail(f"invalid_ts_{name}")
        return float(value)

    def _history_rate(self) -> None:
        if not self.history_per_minute:
            return
        now = time.monotonic()
        window = [t for t in self._history_calls if now - t < 60.0]
        if len(window) >= self.history_per_minute:
            wait = 60.0 - (now - window[0])
            self._history_calls[:] = window
            raise self._fail("ratelimited", status=429, retry_after=wait)
        window.append(now)
        self._history_calls[:] = window
