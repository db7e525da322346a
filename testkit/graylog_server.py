"""A Graylog REST search API for tests, following Graylog's documented contract.

Endpoints:

* ``POST /api/search/messages`` (the search scripting API, Graylog 4.3+): JSON body
  ``{query, streams, fields, from, size, timerange, sort, sort_order}``; answers
  ``{"schema": [{"column_type": "field", "type": ..., "field": f, "name": "field: f"}],
  "datarows": [[...], ...], "metadata": {"effective_timerange": {...}}}``.
* ``GET /api/search/universal/absolute`` (legacy): ``query``, ``from``, ``to``
  (required), ``limit``, ``offset``, ``filter``, ``fields``, ``sort`` (``field:asc``),
  ``decorate``; answers ``{"query", "built_query", "used_indices", "messages":
  [{"message": {...}, "index": ...}], "fields", "time", "total_results", "from", "to"}``.

Rules enforced like Graylog: HTTP basic auth is required (user:password, or an
access token as ``<token>:token``), else 401 with ``WWW-Authenticate``; every
POST must carry ``X-Requested-By`` (Graylog's CSRF protection), else 400;
unknown JSON properties and malformed time ranges are 400.

The query language subset is Lucene's: ``field:"phrase"``, ``field:term``, bare
phrases/terms (searched in ``message``), ``AND``, ``OR``, ``NOT``, parentheses.
``message``/``full_message`` are analysed text (case-insensitive word phrases);
other fields match whole values, case-insensitively (Graylog analyses ``source``
with its lower-casing keyword analyzer).

Faults: ``delay`` (seconds), ``mode`` = ``ok`` | ``garbage`` (200 HTML) | ``error`` (500).
Recorded: ``requests`` as ``(method, path, query-or-body)``.
"""
from __future__ import annotations

import base64
import re
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from alertd.enrich.timestamps import iso_millis, parse_time
from testkit.loopback import LoopbackServer

TEXT_FIELDS = ("message", "full_message")
_MESSAGES_KEYS = {"query", "streams", "stream_categories", "fields", "from", "size", "timerange", "sort", "sort_order"}
_WORD = re.compile(r"[0-9a-z]+")
_TOKEN = re.compile(r'\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<op>AND|OR|NOT)(?=[\s()]|$)|'
                    r'(?:(?P<field>[A-Za-z0-9_.@]+):)?(?:"(?P<phrase>(?:[^"\\]|\\.)*)"|(?P<term>[^\s()"]+)))')


class QueryError(ValueError):
    pass


def _words(text: str) -> list[str]:
    return _WORD.findall(str(text).lower())


def parse_query(text: str):
    """Lucene subset -> predicate(doc)."""
    tokens = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise QueryError(f"Cannot parse '{text}': unexpected input at {pos}")
        pos = m.end()
        tokens.append(m)
    i = 0

    def peek():
        return tokens[i] if i < len(tokens) else None

    def take():
        nonlocal i
        i += 1
        return tokens[i - 1]

    def term():
        t = peek()
        if t is None:
            raise QueryError(f"Cannot parse '{text}': unexpected end")
        if t["op"] == "NOT":
            take()
            inner = term()
            return lambda d: not inner(d)
        if t["lp"]:
            take()
            inner = expr()
            if peek() is None or not peek()["rp"]:
                raise QueryError(f"Cannot parse '{text}': missing )")
            take()
            return inner
        if t["rp"] or t["op"]:
            raise QueryError(f"Cannot parse '{text}': unexpected {t.group(0).strip()}")
        take()
        field = t["field"] or "message"
        value = t["phrase"].replace('\\"', '"').replace("\\\\", "\\") if t["phrase"] is not None else t["term"]
        if value == "*" and field == "message":
            return lambda d: True
        if field in TEXT_FIELDS:
            want = _words(value)
            return lambda d: any(_words(d.get(field, ""))[k:k + len(want)] == want
                                 for k in range(len(_words(d.get(field, ""))) - len(want) + 1)) if want else False
        return lambda d: str(d.get(field, "")).lower() == value.lower()

    def conj():
        left = term()
        while peek() is not None and (peek()["op"] == "AND" or (not peek()["op"] and not peek()["rp"])):
            if peek()["op"] == "AND":
                take()
            right = term()
            left = (lambda a, b: lambda d: a(d) and b(d))(left, right)
        return left

    def expr():
        left = conj()
        while peek() is not None and peek()["op"] == "OR":
            take()
            right = conj()
            left = (lambda a, b: lambda d: a(d) or b(d))(left, right)
        return left

    if not tokens:
        return lambda d: True
    pred = expr()
    if peek() is not None:
        raise QueryError(f"Cannot parse '{text}': unexpected {peek().group(0).strip()}")
    return pred


def _parse_range_time(value: Any, name: str) -> datetime:
    ts = parse_time(value) if isinstance(value, str) and value else None
    if ts is None:
        raise QueryError(f"Invalid {name} timestamp: {value!r}")
    return ts


class GraylogTestServer(LoopbackServer):
    unstarted_url = ""

    def __init__(self, *, users: dict[str, str] | None = None, tokens: tuple[str, ...] = (),
                 delay: float = 0.0, mode: str = "ok"):
        super().__init__(delay=delay)
        self.users = dict(users or {"admin": "admin-password"})
        self.tokens = set(tokens)
        self.mode = mode
        self.messages: list[dict[str, Any]] = []  # each with index + fields
        self.requests: list[tuple[str, str, Any]] = []

    def add(self, doc: dict[str, Any], index: str = "graylog_0") -> None:
        self.messages.append({"_index": index, **doc})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/search/messages", self._messages)
        app.router.add_get("/api/search/universal/absolute", self._universal)
        app.router.add_get("/api/system", self._system)
        return app

    # ----- guards -----

    def _authorized(self, request: web.Request) -> bool:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        if password == "token":
            return user in self.tokens
        return self.users.get(user) == password

    @staticmethod
    def _api_error(status: int, message: str) -> web.Response:
        return web.json_response({"type": "ApiError", "message": message}, status=status)

    async def _guard(self, request: web.Request) -> web.Response | None:
        await self.wait_delay()
        if not self._authorized(request):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="Graylog Server"'})
        if request.method == "POST" and not request.headers.get("X-Requested-By"):
            return self._api_error(400, "CSRF protection header is missing.")
        if self.mode == "error":
            return self._api_error(500, "injected failure")
        if self.mode == "garbage":
            return web.Response(text="<html>Bad Gateway</html>", content_type="text/html")
        return None

    async def _system(self, request: web.Request) -> web.Response:
        denied = await self._guard(request)
        return denied or web.json_response({"version": "6.1.0", "is_processing": True})

    # ----- search -----

    def _select(self, pred, start: datetime, end: datetime, sort: str, order: str) -> list[dict[str, Any]]:
        hits = []
        for doc in self.messages:
            ts = parse_time(doc.get("timestamp"))
            if ts is None or ts < start or ts > end or not pred(doc):
                continue
            hits.append(doc)
        hits.sort(key=lambda d: (parse_time(d.get(sort)) or datetime.min.replace(tzinfo=timezone.utc))
                  if sort == "timestamp" else str(d.get(sort, "")), reverse=order == "desc")
        return hits

    @staticmethod
    def _out_value(doc: dict[str, Any], field: str) -> Any:
        value = doc.get(field)
        if field == "timestamp" and value is not None:
            ts = parse_time(value)
            return iso_millis(ts) if ts else value
        return value

    async def _messages(self, request: web.Request) -> web.Response:
        denied = await self._guard(request)
        if denied is not None:
            self.requests.append(("POST", request.path, None))
            return denied
        if not request.content_type.startswith("application/json"):
            return self._api_error(415, "HTTP 415 Unsupported Media Type")
        try:
            body = await request.json()
        except ValueError:
            return self._api_error(400, "Unable to map request body")
        self.requests.append(("POST", request.path, body))
        if not isinstance(body, dict):
            return self._api_error(400, "Unable to map request body")
        unknown = set(body) - _MESSAGES_KEYS
        if unknown:
            return self._api_error(400, f"Unrecognized field \"{sorted(unknown)[0]}\"")
        try:
            pred = parse_query(body.get("query") or "*")
            tr = body.get("timerange") or {"type": "relative", "range": 300}
            if tr.get("type") == "absolute":
                start, end = _parse_range_time(tr.get("from"), "from"), _parse_range_time(tr.get("to"), "to")
            elif tr.get("type") == "relative":
                end = datetime.now(timezone.utc)
                start = datetime.fromtimestamp(end.timestamp() - int(tr.get("range", 300)), timezone.utc)
            else:
                raise QueryError(f"Unsupported timerange type {tr.get('type')!r}")
        except QueryError as exc:
            return self._api_error(400, str(exc))
        order = body.get("sort_order", "desc")
        if order not in ("asc", "desc", "ASC", "DESC"):
            return self._api_error(400, f"Invalid sort_order {order!r}")
        fields = body.get("fields") or ["timestamp", "source", "message"]
        hits = self._select(pred, start, end, body.get("sort", "timestamp"), order.lower())
        offset, size = int(body.get("from") or 0), int(body.get("size") or 10)
        page = hits[offset:offset + size]
        return web.json_response({
            "schema": [{"column_type": "field", "type": "date" if f == "timestamp" else "string", "field": f,
                        "name": f"field: {f}"} for f in fields],
            "datarows": [[self._out_value(d, f) for f in fields] for d in page],
            "metadata": {"effective_timerange": {"type": "absolute", "from": iso_millis(start), "to": iso_millis(end)}},
        })

    async def _universal(self, request: web.Request) -> web.Response:
        q = dict(request.query)
        self.requests.append(("GET", request.path, q))
        denied = await self._guard(request)
        if denied is not None:
            return denied
        try:
            if "query" not in q:
                raise QueryError("Missing parameter: query")
            start, end = _parse_range_time(q.get("from"), "from"), _parse_range_time(q.get("to"), "to")
            pred = parse_query(q["query"] or "*")
            stream_filter = q.get("filter", "")
            if stream_filter and not re.fullmatch(r"streams:[0-9a-f]{24}( OR streams:[0-9a-f]{24})*", stream_filter):
                raise QueryError(f"Invalid filter {stream_filter!r}")
        except QueryError as exc:
            return self._api_error(400, str(exc))
        sort_field, _, order = (q.get("sort") or "timestamp:desc").partition(":")
        hits = self._select(pred, start, end, sort_field, (order or "desc").lower())
        offset, limit = int(q.get("offset") or 0), int(q.get("limit") or 150)
        fields = [f for f in (q.get("fields") or "").split(",") if f]
        page = hits[offset:offset + limit] if limit > 0 else hits[offset:]
        messages = []
        for d in page:
            msg = {k: self._out_value(d, k) for k in d if k != "_index" and (not fields or k in fields)}
            msg.setdefault("_id", f"{d['_index']}-{self.messages.index(d)}")
            messages.append({"highlight_ranges": {}, "message": msg, "index": d["_index"], "decoration_stats": None})
        return web.json_response({
            "query": q["query"], "built_query": "{}", "used_indices": [], "messages": messages,
            "fields": fields or ["message", "source", "timestamp"], "time": 3, "total_results": len(hits),
            "from": iso_millis(start), "to": iso_millis(end), "decoration_stats": None,
        })


# ----- Graylog messages as stored in Elasticsearch/OpenSearch -----

# Like the index template Graylog installs for its default index set (graylog_N behind the
# graylog_deflector alias): message/full_message analysed text, source a keyword,
# timestamp a date in Graylog's "yyyy-MM-dd HH:mm:ss.SSS" (UTC) format, gl2_* keywords,
# and every other string a keyword.
GRAYLOG_INDEX_TEMPLATE = {
    "index_patterns": ["graylog_*"],
    "priority": 100,
    "template": {
        # (Graylog also defines a lower-casing keyword analyzer for source; the minimal test
        # distributions lack the analysis module it needs, and node names are lower case anyway.)
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {
            "dynamic_templates": [
                {"internal_fields": {"match": "gl2_*", "match_mapping_type": "string", "mapping": {"type": "keyword"}}},
                {"store_generic": {"match_mapping_type": "string", "mapping": {"type": "keyword"}}},
            ],
            "properties": {
                "message": {"type": "text", "analyzer": "standard", "norms": False},
                "full_message": {"type": "text", "analyzer": "standard", "norms": False},
                "timestamp": {"type": "date", "format": "yyyy-MM-dd HH:mm:ss.SSS"},
                "gl2_receive_timestamp": {"type": "date", "format": "yyyy-MM-dd HH:mm:ss.SSS"},
                "gl2_processing_timestamp": {"type": "date", "format": "yyyy-MM-dd HH:mm:ss.SSS"},
                "source": {"type": "keyword"},
                "streams": {"type": "keyword"},
                "level": {"type": "long"},
                "facility": {"type": "keyword"},
            },
        },
    },
}
DEFAULT_STREAM = "000000000000000000000001"
GPU_UUID = "GPU-8f6e1b4c-6d1a-2b7e-3f4d-0123456789ab"


def graylog_message(source: str, when: datetime, message: str, *, facility: str = "kernel", level: int = 4,
                    full_message: str | None = None, **extra: Any) -> dict[str, Any]:
    """One message document the way Graylog's syslog/GELF inputs store it."""
    from alertd.enrich.timestamps import graylog_time

    import hashlib

    ts = graylog_time(when)
    gl2_id = hashlib.sha1(f"{source}|{ts}|{message}".encode()).hexdigest()[:24]
    doc = {
        "message": message,
        "full_message": full_message if full_message is not None else
        f"<{level}>{when.strftime('%b %d %H:%M:%S')} {source} {facility}: {message}",
        "source": source,
        "timestamp": ts,
        "level": level,
        "facility": facility,
        "streams": [DEFAULT_STREAM],
        "gl2_message_id": gl2_id,
        "gl2_source_input": "65a0f0f0f0f0f0f0f0f0f0f0",
        "gl2_source_node": "3f1d8c2a-5b6e-4c7d-8e9f-0a1b2c3d4e5f",
        "gl2_remote_ip": "10.0.7.12",
        "gl2_remote_port": 51432,
        "gl2_receive_timestamp": ts,
        "gl2_processing_timestamp": ts,
        "gl2_accounted_message_size": len(message) + 200,
    }
    doc.update(extra)
    return doc


def kernel_log_corpus(t: datetime) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, list[str]]]:
    """Realistic kernel and application messages from several nodes around ``t`` (an alert's
    startsAt), as (index, document) pairs, plus the messages a node+window search for
    ``t`` (-10m/+2m, NVRM/Xid/nvidia/kernel patterns) must return per node, in time order.

    Older messages sit in graylog_0, newer ones in graylog_1 (the deflector's target).
    """
    from datetime import timedelta as td

    xid79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    docs: list[tuple[str, dict[str, Any]]] = []
    want: dict[str, list[str]] = {}

    def add(index: str, source: str, offset: float, message: str, expected_for: str | None = None, **kw: Any) -> None:
        docs.append((index, graylog_message(source, t + td(seconds=offset), message, **kw)))
        if expected_for:
            want.setdefault(expected_for, []).append(message)

    n2 = "gpu-node-2"
    # gpu-node-2: the node whose GPU fell off the bus
    add("graylog_0", n2, -20 * 60, "NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python, Graphics Exception: "
                                   "ESR 0x405840=0x0")  # before the window
    add("graylog_0", n2, -9 * 60, f"NVRM: GPU at PCI:0000:3b:00: {GPU_UUID}", n2)
    add("graylog_0", n2, -8 * 60, "systemd[1]: Started Session 42 of user ubuntu.", facility="daemon", level=6)
    add("graylog_0", n2, -120, "[ 8123.456789] " + xid79, n2, level=3)
    add("graylog_0", n2, -100, "NVRM: Xid (0000:3b:00): 48, An uncorrectable double bit error (DBE) has been "
                               "detected on GPU in the framebuffer at partition 1, subpartition 0.", n2, level=3)
    add("graylog_1", n2, -60, "NVRM: Xid (PCI:0000:86:00 GPU-I:02 GPU-CI:01): 43, pid=1234, name=python, "
                              "Ch 00000008", n2, level=3)
    add("graylog_1", n2, -55, "GET /healthz 200 0.4ms", facility="user", level=6)
    add("graylog_1", n2, -50, "RuntimeError: CUDA error: an illegal memory access was encountered",
        facility="user", level=3, kubernetes_pod_name="llama-finetune-worker-0",
        kubernetes_namespace_name="ml-training", kubernetes_container_name="pytorch")
    add("graylog_1", n2, -40, "torch.distributed.elastic.multiprocessing.api: failed (exitcode: 1) local_rank: 0",
        facility="user", level=3, kubernetes_pod_name="llama-finetune-worker-0",
        kubernetes_namespace_name="ml-training")
    add("graylog_1", n2, -30, "pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0", n2,
        level=2)
    add("graylog_1", n2, 60, "nvidia-persistenced[2211]: device 0000:3b:00.0 - persistence mode disabled.", n2,
        facility="daemon", level=5)
    add("graylog_1", n2, 10 * 60, "[ 8723.1] " + xid79)  # after the window
    # other nodes: never returned for gpu-node-2
    add("graylog_1", "gpu-node-1", -60, "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, "
                                        "GPU has fallen off the bus.", "gpu-node-1")
    add("graylog_1", "gpu-node-1", -45, "nvidia-container-runtime-hook: injected GPU devices 0-7 into container 3f9a",
        "gpu-node-1", facility="daemon", level=6)
    add("graylog_1", "gpu-node-20", -60, "NVRM: Xid (PCI:0000:3b:00): 31, pid=77, name=train, Ch 00000010, "
                                         "intr 10000000. MMU Fault", "gpu-node-20")
    # gpu-node-5: a GPU lost from the bus as newer drivers report it, with no Xid line; one kernel record of
    # three lines that the log pipeline stored as three messages (milliseconds apart), then the probe failing
    n5 = "gpu-node-5"
    add("graylog_1", n5, -90.000, "NVRM: The NVIDIA GPU 0000:b3:00.0", n5, level=4)
    add("graylog_1", n5, -89.999, "NVRM: (PCI ID: 10de:2330) installed in this system has", n5, level=4)
    add("graylog_1", n5, -89.998, "NVRM: fallen off the bus and is not responding to commands.", n5, level=4)
    add("graylog_1", n5, -89.869, "NVRM: The NVIDIA probe routine failed for 1 device(s).", n5, level=4)
    add("graylog_1", n5, -70, "kubelet[1893]: Error getting device plugin health: GPU-9c1e rpc error", facility="daemon",
        level=4)
    # gpu-node-6: two GPUs behind one PCIe switch lost at once; their split reports reached the index
    # interleaved line by line, a millisecond apart
    n6 = "gpu-node-6"
    first, middle, last = ("NVRM: The NVIDIA GPU {}", "NVRM: (PCI ID: 10de:2330) installed in this system has",
                           "NVRM: fallen off the bus and is not responding to commands.")
    for i, line in enumerate([first.format("0000:18:00.0"), first.format("0000:2a:00.0"), middle, middle, last, last]):
        add("graylog_1", n6, -45 + i / 1000, line, n6, level=4)
    # gpu-node-3 logs under its short host name; Kubernetes knows it by its FQDN
    add("graylog_1", "gpu-node-3", -10, "NVRM: Xid (PCI:0000:3b:00): 119, pid=310, name=nvidia-smi, "
                                        "Timeout after 6s of waiting for RPC response from GPU0 GSP!",
        "gpu-node-3.dc1.example.com")
    return docs, want


async def load_graylog_indices(url: str, docs: list[tuple[str, dict[str, Any]]], *, prefix: str = "graylog_") -> None:
    """Install the Graylog-like index template, (re)create ``<prefix>0`` and ``<prefix>1`` with
    the ``<prefix>deflector`` alias on the newest, and bulk-index ``docs`` (index names in
    ``docs`` use the ``graylog_`` prefix and are mapped to ``prefix``). Works against both
    Elasticsearch and OpenSearch (plain JSON REST)."""
    import json as _json

    import aiohttp

    template = _json.loads(_json.dumps(GRAYLOG_INDEX_TEMPLATE))
    template["index_patterns"] = [f"{prefix}*"]
    async with aiohttp.ClientSession(base_url=url, timeout=aiohttp.ClientTimeout(total=60)) as http:
        async def call(method: str, path: str, **kw: Any) -> Any:
            async with http.request(method, path, **kw) as resp:
                body = await resp.json(content_type=None)
                if resp.status >= 300 and not (method == "DELETE" and resp.status == 404):
                    raise RuntimeError(f"{method} {path}: {resp.status} {body}")
                return body

        await call("DELETE", f"/{prefix}0,{prefix}1?ignore_unavailable=true")
        await call("PUT", f"/_index_template/{prefix}template", json=template)
        await call("PUT", f"/{prefix}0", json={})
        await call("PUT", f"/{prefix}1", json={"aliases": {f"{prefix}deflector": {"is_write_index": True}}})
        lines = []
        for index, doc in docs:
            lines.append(_json.dumps({"index": {"_index": prefix + index.removeprefix("graylog_")}}))
            lines.append(_json.dumps(doc))
        body = await call("POST", "/_bulk?refresh=true", data=("\n".join(lines) + "\n").encode(),
                          headers={"Content-Type": "application/x-ndjson"})
        if body.get("errors"):
            failed = [i for i in body["items"] if i["index"].get("error")]
            raise RuntimeError(f"bulk indexing failed: {failed[:2]}")
