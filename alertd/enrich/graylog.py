"""Graylog log backend: Graylog's REST search API over aiohttp.

Two documented endpoints:

- ``messages`` (default, Graylog 4.3+): ``POST /api/search/messages`` with a
  JSON body (``query``, ``streams``, ``fields``, ``size``, ``timerange`` absolute,
  ``sort``, ``sort_order``); the answer is a table: ``schema`` (one entry per
  column, naming its ``field``) and ``datarows``.
- ``universal`` (older Graylog): ``GET /api/search/universal/absolute`` with
  ``query``, ``from``, ``to``, ``limit``, ``fields``, ``sort``, ``filter``; the
  answer lists ``messages[].message`` documents.

Graylog wants ``X-Requested-By`` on every modifying request (POST included)
and basic auth: user:password, or an access token as ``<token>:token``.
Graylog has no multi-search: each node+window is one request (the searcher
still coalesces and caches them).
"""
from __future__ import annotations

import base64
import json
import ssl
from typing import Any, Sequence

import aiohttp

from alertd.core.json_types import JSONObject, JSONValue
from alertd.enrich.logs import LogBackend, LogLine, LogQuery, LogsUnavailable, doc_to_line
from alertd.enrich.settings import LogSettings
from alertd.enrich.timestamps import iso_millis

REQUESTED_BY = "alertd"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def graylog_query(q: LogQuery, s: LogSettings) -> str:
    """Lucene query: host is one of the node's names AND any pattern matches."""
    hosts = q.hosts(s.match_short_hostname)
    host_terms = " OR ".join(f"{f}:{_quote(h)}" for f in s.fields.hosts for h in hosts)
    parts = [f"({host_terms})"]
    if s.patterns:
        pattern_terms = " OR ".join(f"{f}:{_quote(p)}" for f in s.search_fields for p in s.patterns)
        parts.append(f"({pattern_terms})")
    return " AND ".join(parts)


class GraylogBackend(LogBackend):
    name = "graylog"
    max_batch = 1

    def __init__(self, settings: LogSettings, session: aiohttp.ClientSession | None = None):
        super().__init__(settings)
        self._session = session
        self._own_session = session is None
        self._next = 0

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            s = self.settings
            headers = {"X-Requested-By": REQUESTED_BY, "Accept": "application/json"}
            if s.auth.token:
                headers["Authorization"] = _basic(s.auth.token, "token")
            elif s.auth.basic is not None:
                headers["Authorization"] = _basic(s.auth.basic.username, s.auth.basic.password)
            ssl_ctx: Any = True
            if s.ca_bundle:
                ssl_ctx = ssl.create_default_context(cafile=s.ca_bundle)
            elif not s.verify_tls:
                ssl_ctx = False
            self._session = aiohttp.ClientSession(
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=s.timeout),
                connector=aiohttp.TCPConnector(ssl=ssl_ctx, limit=max(1, s.concurrency) * 2),
            )
            self._own_session = True
        return self._session

    def _base(self) -> str:
        urls = self.settings.urls
        base = urls[self._next % len(urls)]
        self._next += 1
        return base.rstrip("/")

    async def search(self, queries: Sequence[LogQuery]) -> list[list[LogLine] | LogsUnavailable]:
        return [await self._one(q) for q in queries]

    async def _one(self, q: LogQuery) -> list[LogLine]:
        s = self.settings
        self.requests += 1
        try:
            if s.graylog.api == "universal":
                params = {
                    "query": graylog_query(q, s), "from": iso_millis(q.start), "to": iso_millis(q.end),
                    "limit": str(s.max_lines), "offset": "0", "fields": ",".join(s.source_fields),
                    "sort": f"{s.fields.time}:asc", "decorate": "false",
                }
                if s.graylog.streams:
                    params["filter"] = " OR ".join(f"streams:{sid}" for sid in s.graylog.streams)
                async with self.session().get(self._base() + "/api/search/universal/absolute", params=params) as resp:
                    body = await self._body(resp)
                return self._universal(body)
            payload: JSONObject = {
                "query": graylog_query(q, s),
                "fields": list[JSONValue](s.source_fields),
                "from": 0,
                "size": s.max_lines,
                "timerange": {"type": "absolute", "from": iso_millis(q.start), "to": iso_millis(q.end)},
                "sort": s.fields.time,
                "sort_order": "asc",
            }
            if s.graylog.streams:
                payload["streams"] = list[JSONValue](s.graylog.streams)
            async with self.session().post(self._base() + "/api/search/messages", json=payload) as resp:
                body = await self._body(resp)
            return self._table(body)
        except LogsUnavailable:
            raise
        except aiohttp.ClientError as exc:
            raise LogsUnavailable(f"{type(exc).__name__}: {exc}"[:200]) from exc

    @staticmethod
    async def _body(resp: aiohttp.ClientResponse) -> Any:
        raw = await resp.read()
        if resp.status >= 400:
            text = raw.decode(errors="replace").strip().replace("\n", " ")
            try:
                text = json.loads(raw).get("message", text)
            except (ValueError, AttributeError):
                pass
            raise LogsUnavailable(f"HTTP {resp.status}: {text[:160]}")
        try:
            return json.loads(raw)
        except ValueError:
            raise LogsUnavailable(f"bad answer: not JSON ({resp.content_type})") from None

    def _table(self, body: Any) -> list[LogLine]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), list) or not isinstance(body.get("datarows"), list):
            raise LogsUnavailable("bad answer: no schema/datarows table")
        names: list[str] = []
        for col in body["schema"]:
            if not isinstance(col, dict):
                raise LogsUnavailable("bad answer: schema entry is not an object")
            name = col.get("field") or str(col.get("name", "")).removeprefix("field: ")
            names.append(name)
        out = []
        for row in body["datarows"]:
            if not isinstance(row, list) or len(row) != len(names):
                raise LogsUnavailable("bad answer: row does not match the schema")
            out.append(doc_to_line(dict(zip(names, row)), self.settings))
        return out

    def _universal(self, body: Any) -> list[LogLine]:
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            raise LogsUnavailable("bad answer: no messages list")
        out = []
        for item in messages:
            doc = item.get("message") if isinstance(item, dict) else None
            if not isinstance(doc, dict):
                raise LogsUnavailable("bad answer: message is not an object")
            out.append(doc_to_line(doc, self.settings))
        return out

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None
