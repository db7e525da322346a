"""Log backends against real search servers: a real OpenSearch and a real Elasticsearch node
(started by the test setup), and the Graylog REST API test server, all holding the same
Graylog-shaped kernel and application messages from several nodes and times.

Asserted for every backend: the right lines (node, window, patterns) come back and the
others do not, in time order, with Graylog's string timestamps parsed; many incidents on
the same node+window cost one search (one ``_msearch`` on the wire for OpenSearch and
Elasticsearch); credentials and failures surface as a short reason.
"""
from __future__ import annotations

import asyncio
import base64
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import aiohttp
import msgspec
import pytest
from aiohttp import web

from alertd.enrich.elasticsearch import ElasticsearchBackend
from alertd.enrich.graylog import GraylogBackend
from alertd.enrich.logs import LogsUnavailable
from alertd.enrich.opensearch import OpenSearchBackend
from alertd.enrich.searcher import LogSearcher
from alertd.enrich.settings import GraylogSettings, LogAuth, LogBasicAuth, LogBatch, LogFields, LogSettings
from alertd.enrich.timestamps import parse_time
from testkit.es_compat_server import SearchCompatServer
from testkit.graylog_server import GraylogTestServer, kernel_log_corpus, load_graylog_indices
from testkit.loopback import LoopbackServer

pytest_plugins = ("tests.support.fixtures",)

# An alert's startsAt an hour ago (so its window is closed), half a minute past the minute.
T = datetime.now(timezone.utc).replace(second=30, microsecond=0) - timedelta(hours=1)
DOCS, WANT = kernel_log_corpus(T)


class CountingProxy(LoopbackServer):
    """Forwards every request to ``upstream`` and records (method, path): what went over the wire."""

    def __init__(self, upstream: str):
        super().__init__()
        self.upstream = upstream
        self.requests: list[tuple[str, str]] = []

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        return app

    async def start(self) -> str:
        self._session = aiohttp.ClientSession()
        return await super().start()

    async def _forward(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=await request.read()) as resp:
            body = await resp.read()
            out = {k: v for k, v in resp.headers.items()
                   if k.lower() not in ("content-length", "transfer-encoding", "content-encoding", "connection")}
            return web.Response(status=resp.status, body=body, headers=out)

    async def stop(self) -> None:
        await super().stop()
        await self._session.close()


def run_sync(coro):
    """Run a coroutine to completion on its own loop (fixtures may be set up inside a running one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.fixture(scope="module")
def opensearch_logs(opensearch):
    run_sync(load_graylog_indices(opensearch.url, DOCS))
    return opensearch.url


@pytest.fixture(scope="module")
def elasticsearch_logs(elasticsearch):
    run_sync(load_graylog_indices(elasticsearch.url, DOCS))
    return elasticsearch.url


def settings(url: str, backend: str, *, username: str = "", password: str = "", token: str = "",
             graylog_api: str = "messages", **kw) -> LogSettings:
    auth = LogAuth(basic=LogBasicAuth(username, password) if username else None, token=token)
    return LogSettings(**{"backend": backend, "urls": (url,), "batch": LogBatch(linger=0.02), "timeout": 10.0,
                          "auth": auth, "graylog": GraylogSettings(api=graylog_api), **kw})


class Graylog:
    """A started Graylog test server holding the corpus, plus a backend for it."""

    def __init__(self, api: str):
        self.server = GraylogTestServer(users={"alertd": "s3cret"}, tokens=("tok-123",))
        for index, doc in DOCS:
            self.server.add(doc, index)
        self.api = api

    async def __aenter__(self):
        await self.server.start()
        return self

    async def __aexit__(self, *exc):
        await self.server.stop()


BACKENDS = ["opensearch", "elasticsearch", "graylog-messages", "graylog-universal"]


@pytest.fixture(params=BACKENDS)
async def searcher(request):
    """(LogSearcher, wire-request counter) for each backend, over the same corpus."""
    kind = request.param
    if kind in ("opensearch", "elasticsearch"):
        url = request.getfixturevalue(f"{kind}_logs")
        proxy = CountingProxy(url)
        await proxy.start()
        s = settings(proxy.url, kind)
        backend = OpenSearchBackend(s) if kind == "opensearch" else ElasticsearchBackend(s)
        searcher = LogSearcher(backend, s)
        yield searcher, (lambda: [r for r in proxy.requests if r[1].endswith("_msearch")]), kind
        await searcher.close()
        await proxy.stop()
        return
    api = kind.split("-")[1]
    async with Graylog(api) as g:
        s = settings(g.server.url, "graylog", username="alertd", password="s3cret", graylog_api=api)
        searcher = LogSearcher(GraylogBackend(s), s)
        yield searcher, (lambda: [r for r in g.server.requests if r[1].startswith("/api/search")]), kind
        await searcher.close()


async def test_right_lines_for_node_window_and_patterns(searcher) -> None:
    search, _, kind = searcher
    for node, expected in WANT.items():
        result = await search.fetch(search.window(node, T))
        got = [ln.message for ln in result.lines]
        assert got == expected, (kind, node)
        assert result.complete
    # hosts were matched exactly: nothing from gpu-node-20 leaks into gpu-node-2 and vice versa
    lines = (await search.fetch(search.window("gpu-node-2", T))).lines
    assert {ln.host for ln in lines} == {"gpu-node-2"}


async def test_graylog_timestamps_are_parsed_as_utc(searcher) -> None:
    search, _, _ = searcher
    lines = (await search.fetch(search.window("gpu-node-2", T))).lines
    xid = next(ln for ln in lines if "fallen off the bus" in ln.message)
    assert xid.time == T - timedelta(seconds=120)
    assert xid.fields.get("facility") == "kernel"
    times = [ln.time for ln in lines]
    assert times == sorted(times)


async def test_many_incidents_on_one_node_and_window_are_one_search(searcher) -> None:
    search, wire, kind = searcher
    before = len(wire())
    # 8 GPUs x 4 alerts on gpu-node-2 within the same minute, plus 3 other nodes, all at once
    anchors = [("gpu-node-2", T + timedelta(seconds=(i % 25))) for i in range(32)]
    anchors += [("gpu-node-1", T), ("gpu-node-20", T), ("gpu-node-3.dc1.example.com", T)]
    results = await asyncio.gather(*(search.fetch(search.window(n, a)) for n, a in anchors))
    assert [ln.message for ln in results[0].lines] == WANT["gpu-node-2"]
    sent = len(wire()) - before
    if kind in ("opensearch", "elasticsearch"):
        assert sent == 1, "one _msearch for the whole batch"
    else:
        assert sent == 4, "Graylog has no multi-search: one request per node+window"
    assert search.stats.searched == 4 and search.stats.joined == 31
    # and the answers are cached per node+window
    await search.fetch(search.window("gpu-node-2", T + timedelta(seconds=10)))
    assert len(wire()) - before == sent


async def test_max_lines_keeps_the_earliest(searcher) -> None:
    search, _, kind = searcher
    s = search.settings
    limited = msgspec.structs.replace(s, max_lines=2)
    backend = type(search.backend)(limited)
    other = LogSearcher(backend, limited)
    try:
        lines = (await other.fetch(other.window("gpu-node-2", T))).lines
        assert [ln.message for ln in lines] == WANT["gpu-node-2"][:2]
    finally:
        await other.close()


async def test_patterns_are_configurable(searcher) -> None:
    search, _, kind = searcher
    s = search.settings
    only_xid = msgspec.structs.replace(s, patterns=("Xid",), pattern_fields=("message",))
    other = LogSearcher(type(search.backend)(only_xid), only_xid)
    try:
        lines = (await other.fetch(other.window("gpu-node-2", T))).lines
        assert all("Xid" in ln.message for ln in lines) and len(lines) == 3
    finally:
        await other.close()


# ----- backend specifics -----

async def test_fluent_bit_documents_with_other_field_names(opensearch) -> None:
    """Fluent Bit -> OpenSearch: @timestamp ISO dates, kubernetes_host, log; configured field names."""
    async with aiohttp.ClientSession(base_url=opensearch.url) as http:
        await http.delete("/fluentbit-test")
        await http.put("/fluentbit-test", json={"mappings": {"properties": {
            "@timestamp": {"type": "date"}, "log": {"type": "text"}, "kubernetes_host": {"type": "keyword"},
            "kubernetes_pod_name": {"type": "keyword"}}}})
        docs = [
            {"@timestamp": (T - timedelta(seconds=30)).isoformat().replace("+00:00", "Z"), "kubernetes_host": "gpu-node-2",
             "log": "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
             "kubernetes_pod_name": "nvidia-driver-daemonset-x2b4f"},
            {"@timestamp": (T - timedelta(seconds=20)).isoformat().replace("+00:00", "Z"), "kubernetes_host": "gpu-node-2",
             "log": "INFO step 1200 loss 1.83", "kubernetes_pod_name": "llama-finetune-worker-0"},
        ]
        body = "".join(f'{{"index":{{}}}}\n{__import__("json").dumps(d)}\n' for d in docs)
        async with http.post("/fluentbit-test/_bulk?refresh=true", data=body,
                             headers={"Content-Type": "application/x-ndjson"}) as resp:
            assert resp.status == 200
    s = LogSettings(backend="opensearch", urls=(opensearch.url,), index="fluentbit-*", pattern_fields=("log",),
                    fields=LogFields(host="kubernetes_host", message="log", time="@timestamp"),
                    batch=LogBatch(linger=0.01))
    search = LogSearcher(OpenSearchBackend(s), s)
    try:
        lines = (await search.fetch(search.window("gpu-node-2", T))).lines
        assert [ln.message[:20] for ln in lines] == ["NVRM: Xid (PCI:0000:"]
        assert lines[0].fields["kubernetes_pod_name"] == "nvidia-driver-daemonset-x2b4f"
        assert lines[0].time == T - timedelta(seconds=30)
    finally:
        await search.close()


async def test_elasticsearch_client_refuses_opensearch(opensearch) -> None:
    s = settings(opensearch.url, "elasticsearch")
    search = LogSearcher(ElasticsearchBackend(s), s)
    try:
        with pytest.raises(LogsUnavailable, match="UnsupportedProduct|OpenSearch needs backend: opensearch"):
            await search.fetch(search.window("gpu-node-2", T))
    finally:
        await search.close()


async def test_graylog_token_auth_and_bad_credentials() -> None:
    async with Graylog("messages") as g:
        s = settings(g.server.url, "graylog", token="tok-123")
        search = LogSearcher(GraylogBackend(s), s)
        assert [ln.message for ln in (await search.fetch(search.window("gpu-node-2", T))).lines] == WANT["gpu-node-2"]
        await search.close()
        bad = settings(g.server.url, "graylog", username="alertd", password="wrong")
        search = LogSearcher(GraylogBackend(bad), bad)
        with pytest.raises(LogsUnavailable, match="HTTP 401"):
            await search.fetch(search.window("gpu-node-2", T))
        await search.close()
        # the server is strict like Graylog: a POST without X-Requested-By is refused
        async with aiohttp.ClientSession() as http:
            auth = "Basic " + base64.b64encode(b"alertd:s3cret").decode()
            async with http.post(g.server.url + "/api/search/messages", json={"query": "*"},
                                 headers={"Authorization": auth}) as resp:
                assert resp.status == 400 and "CSRF" in (await resp.json())["message"]
        posted = [r for r in g.server.requests if r[0] == "POST" and r[2]]
        assert posted[0][2]["timerange"]["type"] == "absolute" and posted[0][2]["sort_order"] == "asc"


@pytest.mark.parametrize("flavor", ["elasticsearch", "opensearch"])
@pytest.mark.parametrize(("mode", "reason"), [
    ("garbage", r"Serializ|JSON|decode|bad _msearch|Expecting value"),
    ("bad_shape", r"bad _msearch answer"),
    ("error", r"HTTP 500|500"),
])
async def test_broken_search_servers(flavor, mode, reason) -> None:
    async with SearchCompatServer(flavor, mode=mode) as server:
        s = settings(server.url, flavor, timeout=5.0)
        backend = ElasticsearchBackend(s) if flavor == "elasticsearch" else OpenSearchBackend(s)
        search = LogSearcher(backend, s)
        try:
            with pytest.raises(LogsUnavailable, match=reason):
                await search.fetch(search.window("gpu-node-2", T))
        finally:
            await search.close()


@pytest.mark.parametrize("flavor", ["elasticsearch", "opensearch", "graylog"])
async def test_slow_and_down_servers(flavor) -> None:
    if flavor == "graylog":
        server = GraylogTestServer(users={"u": "p"}, delay=1.0)
    else:
        server = SearchCompatServer(flavor, delay=1.0)
    async with server:
        s = settings(server.url, flavor, timeout=0.3, username="u", password="p")
        backend = {"elasticsearch": ElasticsearchBackend, "opensearch": OpenSearchBackend, "graylog": GraylogBackend}[flavor](s)
        search = LogSearcher(backend, s)
        try:
            with pytest.raises(LogsUnavailable, match="no answer within 0.3s|Timeout|timed out"):
                await search.fetch(search.window("gpu-node-2", T))
        finally:
            await search.close()
        url = server.url
    # the server is gone now: connection refused
    s = settings(url, flavor, timeout=2.0, username="u", password="p")
    backend = {"elasticsearch": ElasticsearchBackend, "opensearch": OpenSearchBackend, "graylog": GraylogBackend}[flavor](s)
    search = LogSearcher(backend, s)
    try:
        with pytest.raises(LogsUnavailable) as info:
            await search.fetch(search.window("gpu-node-2", T))
        assert "onnect" in info.value.reason
    finally:
        await search.close()


async def test_compat_server_answers_like_elasticsearch() -> None:
    """The compat server serves the corpus the way the real servers do (for benchmarks without one)."""
    async with SearchCompatServer("elasticsearch") as server:
        for index, doc in DOCS:
            server.add(index, doc)
        server.alias("graylog_deflector", "graylog_1")
        s = settings(server.url, "elasticsearch")
        search = LogSearcher(ElasticsearchBackend(s), s)
        try:
            for node, expected in WANT.items():
                got = [ln.message for ln in (await search.fetch(search.window(node, T))).lines]
                assert got == expected, node
        finally:
            await search.close()
        assert server.msearches == 1 or server.msearches == len(WANT)
        assert parse_time(DOCS[0][1]["timestamp"]) is not None
