"""A small search server that speaks what the Elasticsearch 8 and OpenSearch Python clients need.

For tests and benchmarks that want failure modes a real cluster cannot be made
to show on demand (slow, garbage, errors) or run where no distribution is
installed. ``flavor="elasticsearch"`` answers like Elasticsearch 8: every
response carries ``X-Elastic-Product: Elasticsearch`` and the
``application/vnd.elasticsearch+json; compatible-with=8`` media type, and
requests must use the compatible-with media types the 8.x client sends
(anything else is refused like a 7.x-style client would be). ``flavor="opensearch"``
answers plain ``application/json`` without the product header (which is why the
Elasticsearch client refuses it).

Served: ``GET /``, ``GET /_cluster/health``, ``POST /_msearch`` and
``POST /{index}/_msearch`` (NDJSON: header line, body line, ...). The query
subset is what alertd sends: ``bool`` (``filter``, ``must``, ``should`` with
``minimum_should_match``), ``terms``, ``term``, ``range`` (epoch_millis or
date strings), ``multi_match``/``match_phrase`` phrases, ``sort`` on one field,
``size`` and ``_source`` lists. Index names and patterns (``graylog_*``,
comma lists, aliases) resolve against the stored indices.

Faults: ``delay`` (seconds before answering), ``mode`` = ``ok`` | ``garbage``
(200, HTML body) | ``bad_shape`` (JSON without ``responses``) | ``error`` (500).
Recorded: ``requests`` as ``(method, path)``; ``msearches`` counts ``_msearch`` calls.
"""
from __future__ import annotations

import fnmatch
import json
import re
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from alertd.enrich.timestamps import parse_time
from testkit.loopback import LoopbackServer

ES_MEDIA = "application/vnd.elasticsearch+json; compatible-with=8"
ES_NDJSON = "application/vnd.elasticsearch+x-ndjson"
_WORD = re.compile(r"[0-9a-z]+")


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def phrase_match(text: Any, phrase: str) -> bool:
    """Analyzed-text phrase match, roughly what the standard analyzer gives."""
    words, want = _tokens(str(text)), _tokens(phrase)
    if not want:
        return False
    return any(words[i:i + len(want)] == want for i in range(len(words) - len(want) + 1))


class SearchCompatServer(LoopbackServer):
    unstarted_url = ""

    def __init__(self, flavor: str = "elasticsearch", *, delay: float = 0.0, mode: str = "ok",
                 text_fields: tuple[str, ...] = ("message", "full_message")):
        assert flavor in ("elasticsearch", "opensearch")
        super().__init__(delay=delay)
        self.flavor, self.mode = flavor, mode
        self.text_fields = set(text_fields)
        self.indices: dict[str, list[dict[str, Any]]] = {}
        self.aliases: dict[str, list[str]] = {}
        self.requests: list[tuple[str, str]] = []
        self.msearches = 0

    # ----- data -----

    def add(self, index: str, doc: dict[str, Any]) -> None:
        self.indices.setdefault(index, []).append(dict(doc))

    def alias(self, name: str, *indices: str) -> None:
        self.aliases[name] = list(indices)

    def resolve(self, expression: str) -> list[str]:
        out: list[str] = []
        for part in (expression or "_all").split(","):
            part = part.strip()
            names = list(self.indices) if part in ("_all", "*") else [
                n for n in list(self.indices) + list(self.aliases) if fnmatch.fnmatchcase(n, part)]
            for name in names:
                for concrete in self.aliases.get(name, [name]):
                    if concrete in self.indices and concrete not in out:
                        out.append(concrete)
        return out

    # ----- lifecycle -----

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    # ----- HTTP -----

    def _json(self, body: Any, status: int = 200) -> web.Response:
        if self.flavor == "elasticsearch":
            return web.Response(status=status, body=json.dumps(body).encode(),
                                headers={"Content-Type": ES_MEDIA, "X-Elastic-Product": "Elasticsearch"})
        return web.json_response(body, status=status)

    def _error(self, status: int, etype: str, reason: str) -> web.Response:
        return self._json({"error": {"root_cause": [{"type": etype, "reason": reason}], "type": etype,
                                     "reason": reason}, "status": status}, status)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        self.requests.append((request.method, path))
        await self.wait_delay()
        if self.flavor == "elasticsearch":
            accept = request.headers.get("Accept", "")
            if "compatible-with=" in accept and "compatible-with=8" not in accept:
                return self._error(400, "media_type_header_exception", "Invalid media-type value on header [Accept]")
        if self.mode == "error":
            return self._error(500, "internal_server_error", "injected failure")
        if self.mode == "garbage":
            return web.Response(status=200, text="<html><body>502 Bad Gateway</body></html>",
                                content_type="text/html",
                                headers={"X-Elastic-Product": "Elasticsearch"} if self.flavor == "elasticsearch" else {})
        parts = [p for p in path.split("/") if p]
        if request.method in ("GET", "HEAD") and not parts:
            dist = {"distribution": "opensearch", "number": "2.19.0"} if self.flavor == "opensearch" else {
                "number": "8.19.0", "build_flavor": "default"}
            return self._json({"name": "compat", "cluster_name": "compat", "version": dist,
                               "tagline": "You Know, for Search" if self.flavor == "elasticsearch" else
                               "The OpenSearch Project: https://opensearch.org/"})
        if parts == ["_cluster", "health"]:
            return self._json({"cluster_name": "compat", "status": "green"})
        if parts and parts[-1] == "_msearch" and request.method in ("POST", "GET"):
            return await self._msearch(request, parts[0] if len(parts) == 2 else "")
        return self._error(404, "resource_not_found_exception", f"no handler for [{request.method} {path}]")

    async def _msearch(self, request: web.Request, default_index: str) -> web.Response:
        ctype = request.headers.get("Content-Type", "")
        if self.flavor == "elasticsearch" and not (ctype.startswith(ES_NDJSON) or ctype.startswith("application/x-ndjson")
                                                   or ctype.startswith("application/json")):
            return self._error(406, "media_type_header_exception", f"Content-Type header [{ctype}] is not supported")
        raw = await request.read()
        self.msearches += 1
        if self.mode == "bad_shape":
            return self._json({"took": 1, "hits": "what"})
        lines = [ln for ln in raw.decode().split("\n") if ln.strip()]
        if len(lines) % 2:
            return self._error(400, "illegal_argument_exception", "The msearch request must be terminated by a newline [\n]")
        responses = []
        for head_raw, body_raw in zip(lines[0::2], lines[1::2]):
            try:
                head, body = json.loads(head_raw), json.loads(body_raw)
            except ValueError:
                return self._error(400, "parse_exception", "request body is not valid JSON")
            index = head.get("index") or default_index
            if isinstance(index, list):
                index = ",".join(index)
            concrete = self.resolve(index)
            if not concrete and not head.get("allow_no_indices", True) and not head.get("ignore_unavailable"):
                responses.append({"error": {"type": "index_not_found_exception", "reason": f"no such index [{index}]"},
                                  "status": 404})
                continue
            try:
                responses.append(self._search(concrete, body))
            except (KeyError, ValueError, TypeError) as exc:
                responses.append({"error": {"type": "parsing_exception", "reason": str(exc)}, "status": 400})
        return self._json({"took": 1, "responses": responses})

    # ----- the query subset -----

    def _search(self, indices: list[str], body: dict[str, Any]) -> dict[str, Any]:
        hits = []
        for index in indices:
            for i, doc in enumerate(self.indices[index]):
                if self._matches(body.get("query") or {"match_all": {}}, doc):
                    hits.append((index, i, doc))
        for spec in reversed(body.get("sort") or []):
            (fname, opts), = spec.items() if isinstance(spec, dict) else ((spec, {}),)
            order = opts.get("order", "asc") if isinstance(opts, dict) else opts
            hits.sort(key=lambda h: (parse_time(h[2].get(fname)) or datetime.min.replace(tzinfo=timezone.utc)),
                      reverse=order == "desc")
        size = int(body.get("size", 10))
        wanted = body.get("_source")
        out = []
        for index, i, doc in hits[:size]:
            src = {k: v for k, v in doc.items() if k in wanted} if isinstance(wanted, list) else doc
            out.append({"_index": index, "_id": f"{index}-{i}", "_score": None, "_source": src})
        return {"took": 1, "timed_out": False, "status": 200, "hits": {"hits": out}}

    def _matches(self, q: dict[str, Any], doc: dict[str, Any]) -> bool:
        (kind, spec), = q.items()
        if kind == "match_all":
            return True
        if kind == "bool":
            if not all(self._matches(c, doc) for c in spec.get("filter", []) + spec.get("must", [])):
                return False
            if any(self._matches(c, doc) for c in spec.get("must_not", [])):
                return False
            should = spec.get("should", [])
            if should:
                need = int(spec.get("minimum_should_match", 1))
                return sum(1 for c in should if self._matches(c, doc)) >= need
            return True
        if kind == "terms":
            (fname, values), = spec.items()
            return self._value(doc, fname) in [str(v) for v in values]
        if kind == "term":
            (fname, value), = spec.items()
            value = value.get("value") if isinstance(value, dict) else value
            return self._value(doc, fname) == str(value)
        if kind == "range":
            (fname, opts), = spec.items()
            ts = parse_time(doc.get(fname))
            if ts is None:
                return False
            for op, bound in opts.items():
                if op == "format":
                    continue
                b = parse_time(bound)
                if b is None:
                    raise ValueError(f"failed to parse date field [{bound}]")
                if (op == "gte" and ts < b) or (op == "gt" and ts <= b) or (op == "lte" and ts > b) or (op == "lt" and ts >= b):
                    return False
            return True
        if kind == "multi_match":
            return any(self._phrase(doc, f, spec["query"]) for f in spec.get("fields", []))
        if kind in ("match_phrase", "match"):
            (fname, value), = spec.items()
            value = value.get("query") if isinstance(value, dict) else value
            return self._phrase(doc, fname, value)
        raise ValueError(f"unknown query [{kind}]")

    @staticmethod
    def _value(doc: dict[str, Any], fname: str) -> str | None:
        value = doc.get(fname.removesuffix(".keyword"))
        return None if value is None else str(value)

    def _phrase(self, doc: dict[str, Any], fname: str, phrase: str) -> bool:
        if fname not in doc:
            return False
        if fname in self.text_fields:
            return phrase_match(doc[fname], phrase)
        return str(doc[fname]) == phrase  # keyword field: exact term
