"""Log search plumbing: windows, timestamps, the query DSL, and the searcher's coalescing,
batching, caching, timeouts and failure handling (against an in-process backend)."""
from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

import pytest

from alertd.enrich.graylog import graylog_query
from alertd.enrich.logs import LogLine, LogQuery, LogsUnavailable, align_window
from alertd.enrich.msearch import es_query, es_responses
from alertd.enrich.searcher import LogSearcher
from alertd.enrich.settings import LogBatch, LogFields, LogSettings, LogWindow
from alertd.enrich.timestamps import graylog_time, parse_time
from alertd.schemas import problems
from testkit.fakes import ScriptedLogBackend

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)


class FakeBackend(ScriptedLogBackend):
    name = "fake"

    def __init__(self, settings: LogSettings, *, delay: float = 0.0, fail: Exception | None = None,
                 answer=None, max_batch: int = 64):
        super().__init__(settings, delay=delay, fail=fail)
        self.answer = answer
        self.max_batch = max_batch

    def respond(self, queries):
        if self.answer is not None:
            return self.answer
        return [[LogLine(q.start + timedelta(minutes=1), q.node, f"NVRM: line for {q.node}")] for q in queries]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def settings(*, max_batch: int = 64, linger: float = 0.01, **kw) -> LogSettings:
    base = dict(backend="opensearch", batch=LogBatch(max=max_batch, linger=linger), timeout=1.0, cache_ttl=60.0,
                failure_ttl=5.0)
    base.update(kw)
    return LogSettings(**base)


# ----- windows and timestamps -----

def test_window_is_aligned_so_nearby_alerts_share_it() -> None:
    s = LogSettings(backend="opensearch")
    a = align_window("gpu-node-2", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), s)
    b = align_window("gpu-node-2", datetime(2026, 1, 2, 3, 4, 55, tzinfo=timezone.utc), s)
    assert a.key == b.key
    assert a.start == datetime(2026, 1, 2, 2, 54, tzinfo=timezone.utc)
    assert a.end == datetime(2026, 1, 2, 3, 7, tzinfo=timezone.utc)
    exact = align_window("n", T0, LogSettings(backend="opensearch", window=LogWindow(align=timedelta(0))))
    assert (exact.start, exact.end) == (T0 - timedelta(minutes=10), T0 + timedelta(minutes=2))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-02 03:04:05.678", T0),  # Graylog, UTC
        ("2026-01-02T03:04:05.678Z", T0),
        ("2026-01-02T03:04:05.678123456Z", T0.replace(microsecond=678123)),  # Fluent Bit nanoseconds
        ("2026-01-02T04:04:05.678+01:00", T0),
        ("2026-01-02 03:04:05", T0.replace(microsecond=0)),
        (int(T0.timestamp() * 1000), T0),  # epoch millis
        (T0.timestamp(), T0),
        ("garbage", None),
        (None, None),
    ],
)
def test_parse_time(value, expected) -> None:
    got = parse_time(value)
    if expected is None:
        assert got is None
    else:
        assert abs((got - expected).total_seconds()) < 0.001


def test_graylog_time_format() -> None:
    assert graylog_time(T0) == "2026-01-02 03:04:05.678"


def test_short_hostname_is_searched_too() -> None:
    assert LogQuery("gpu-node-2.dc1.example.com", T0, T0).hosts() == ["gpu-node-2.dc1.example.com", "gpu-node-2"]
    assert LogQuery("10.0.0.7", T0, T0).hosts() == ["10.0.0.7"]
    assert LogQuery("gpu-node-2", T0, T0).hosts() == ["gpu-node-2"]


def test_es_query_filters_host_time_and_patterns() -> None:
    s = LogSettings(backend="opensearch")
    q = align_window("gpu-node-2", T0, s)
    body = es_query(q, s)
    filters = body["query"]["bool"]["filter"]
    assert filters[0] == {"terms": {"source": ["gpu-node-2"]}}
    rng = filters[1]["range"]["timestamp"]
    assert rng["format"] == "epoch_millis" and rng["gte"] == int(q.start.timestamp() * 1000)
    phrases = [m["multi_match"]["query"] for m in filters[2]["bool"]["should"]]
    assert phrases == ["NVRM", "Xid", "nvidia", "kernel"]
    assert filters[2]["bool"]["should"][0]["multi_match"]["fields"] == ["message", "facility"]
    assert body["size"] == 50 and body["sort"][0]["timestamp"]["order"] == "asc"
    json.dumps(body)  # serialisable as one NDJSON line


def test_es_query_with_several_host_fields() -> None:
    s = LogSettings(backend="opensearch", fields=LogFields(host=("kubernetes_host", "hostname"), time="@timestamp"))
    body = es_query(LogQuery("n1", T0, T0), s)
    should = body["query"]["bool"]["filter"][0]["bool"]["should"]
    assert should == [{"terms": {"kubernetes_host": ["n1"]}}, {"terms": {"hostname": ["n1"]}}]
    assert "@timestamp" in body["query"]["bool"]["filter"][1]["range"]


def test_graylog_lucene_query() -> None:
    s = LogSettings(backend="graylog", patterns=("NVRM", "Xid"), pattern_fields=("message",))
    assert graylog_query(LogQuery('gpu"x', T0, T0), s) == '(source:"gpu\\"x") AND (message:"NVRM" OR message:"Xid")'


def test_es_responses_garbage_and_errors() -> None:
    s = LogSettings(backend="opensearch")
    with pytest.raises(LogsUnavailable, match="expected 2 responses"):
        es_responses({"responses": [{}]}, 2, s)
    with pytest.raises(LogsUnavailable):
        es_responses("<html>", 1, s)
    out = es_responses({"responses": [
        {"error": {"type": "index_not_found_exception", "reason": "no such index [x]"}, "status": 404},
        {"hits": {"hits": [{"_source": {"message": "m", "source": "h", "timestamp": "2026-01-02 03:04:05.678"}}]}},
        {"hits": "nope"},
        {"hits": {"hits": ["not a doc"]}},
    ]}, 4, s)
    assert isinstance(out[0], LogsUnavailable) and "no such index" in out[0].reason
    assert out[1][0].host == "h" and out[1][0].time == T0
    assert isinstance(out[2], LogsUnavailable) and isinstance(out[3], LogsUnavailable)


def test_config_section_validates() -> None:
    ok = {"enrich": {"deadline": "3s", "logs": {"backend": "graylog", "url": "https://graylog:9000",
                                                 "auth": {"token": "t"}, "graylog": {"api": "universal"}},
                     "kube": {"kubeconfig": "/etc/kube", "team_labels": ["team"]}}}
    assert problems("config", ok, "x") == []
    bad = {"enrich": {"logs": {"backend": "opensearch", "window": {"before": "ten minutes"}}}}
    assert [p.path for p in problems("config", bad, "x")] == ["enrich.logs.window.before"]


# ----- the searcher -----

async def test_same_node_and_window_is_one_search() -> None:
    s = settings()
    backend = FakeBackend(s)
    searcher = LogSearcher(backend, s)
    q = align_window("gpu-node-2", T0, s)
    results = await asyncio.gather(*(searcher.fetch(align_window("gpu-node-2", T0 + timedelta(seconds=i), s))
                                     for i in range(20)))
    assert backend.requests == 1 and backend.batches == [["gpu-node-2"]]
    assert all(r.lines[0].message == "NVRM: line for gpu-node-2" for r in results)
    assert searcher.stats.joined == 19 and searcher.stats.searched == 1
    again = await searcher.fetch(q)
    assert again.cached and backend.requests == 1
    await searcher.close()


async def test_different_nodes_share_one_batch() -> None:
    s = settings()
    backend = FakeBackend(s)
    searcher = LogSearcher(backend, s)
    await asyncio.gather(*(searcher.fetch(align_window(f"n{i}", T0, s)) for i in range(64)))
    assert backend.requests == 1 and len(backend.batches[0]) == 64
    await asyncio.gather(*(searcher.fetch(align_window(f"m{i}", T0, s)) for i in range(10)))
    assert backend.requests == 2
    await searcher.close()


async def test_batches_are_split_at_max_batch_and_single_query_backends() -> None:
    s = settings(max_batch=8)
    backend = FakeBackend(s)
    searcher = LogSearcher(backend, s)
    await asyncio.gather(*(searcher.fetch(align_window(f"n{i}", T0, s)) for i in range(20)))
    assert [len(b) for b in backend.batches] == [8, 8, 4]
    single = FakeBackend(s, max_batch=1)
    searcher2 = LogSearcher(single, s)
    await asyncio.gather(*(searcher2.fetch(align_window(f"n{i % 3}", T0, s)) for i in range(9)))
    assert single.requests == 3  # one per node+window, never more
    await searcher.close()
    await searcher2.close()


async def test_cache_expires() -> None:
    s = settings(cache_ttl=60.0)
    clock = Clock()
    backend = FakeBackend(s)
    searcher = LogSearcher(backend, s, monotonic=clock, now=lambda: T0 + timedelta(hours=1))
    q = align_window("n", T0, s)
    first = await searcher.fetch(q)
    assert first.complete and not first.cached
    clock.t += 59
    assert (await searcher.fetch(q)).cached
    clock.t += 2
    assert not (await searcher.fetch(q)).cached
    assert backend.requests == 2
    await searcher.close()


async def test_open_window_is_cached_only_until_it_closes() -> None:
    s = settings(cache_ttl=300.0)
    clock = Clock()
    backend = FakeBackend(s)
    now = T0
    searcher = LogSearcher(backend, s, monotonic=clock, now=lambda: now)
    q = align_window("n", T0, s)  # ends 2-3 minutes after "now"
    first = await searcher.fetch(q)
    assert not first.complete
    left = (q.end + s.ingest_lag - now).total_seconds()
    clock.t += left - 1
    assert (await searcher.fetch(q)).cached
    clock.t += 2
    assert not (await searcher.fetch(q)).cached
    await searcher.close()


async def test_failures_are_cached_briefly_and_fresh_bypasses() -> None:
    s = settings(failure_ttl=5.0)
    clock = Clock()
    backend = FakeBackend(s, fail=ConnectionRefusedError(111, "Connection refused"))
    searcher = LogSearcher(backend, s, monotonic=clock)
    q = align_window("n", T0, s)
    with pytest.raises(LogsUnavailable, match="Connection refused"):
        await searcher.fetch(q)
    with pytest.raises(LogsUnavailable):
        await searcher.fetch(q)
    assert backend.requests == 1
    backend.fail = None
    assert (await searcher.fetch(q, fresh=True)).lines
    assert backend.requests == 2
    await searcher.close()


async def test_slow_backend_times_out() -> None:
    s = settings(timeout=0.1)
    backend = FakeBackend(s, delay=5.0)
    searcher = LogSearcher(backend, s)
    with pytest.raises(LogsUnavailable, match="no answer within 0.1s"):
        await searcher.fetch(align_window("n", T0, s))
    await searcher.close()


async def test_wrong_number_of_results_is_unavailable() -> None:
    s = settings()
    backend = FakeBackend(s, answer=[[]])
    searcher = LogSearcher(backend, s)
    with pytest.raises(LogsUnavailable, match="wrong number"):
        await asyncio.gather(searcher.fetch(align_window("a", T0, s)), searcher.fetch(align_window("b", T0, s)))
    await searcher.close()


async def test_concurrency_is_bounded() -> None:
    s = settings(max_batch=1, concurrency=2, linger=0.0)
    running = 0
    peak = 0

    class Tracking(FakeBackend):
        async def search(self, queries):
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.02)
            running -= 1
            return [[] for _ in queries]

    searcher = LogSearcher(Tracking(s, max_batch=1), s)
    await asyncio.gather(*(searcher.fetch(align_window(f"n{i}", T0, s)) for i in range(10)))
    assert peak == 2
    await searcher.close()


async def test_close_fails_waiters() -> None:
    s = settings(linger=10.0)
    searcher = LogSearcher(FakeBackend(s), s)
    task = asyncio.ensure_future(searcher.fetch(align_window("n", T0, s)))
    await asyncio.sleep(0.01)
    await searcher.close()
    with pytest.raises(LogsUnavailable, match="shutting down"):
        await task
