"""The list-then-watch loop against a scripted API: resourceVersion carried on, bookmarks, a relist on 410
Gone (as an HTTP status and as an ERROR event), backoff on failures. The watch answers are the API
server's wire form (one JSON event per line, ERROR carrying a metav1.Status)."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from alertd.sources.kube_watch import Backoff, Watch, WatchStatus


class Stop(BaseException):  # not caught by the loop, which retries every Exception
    pass


class Content:
    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks

    async def iter_any(self):
        for c in self.chunks:
            yield c


class Response:
    def __init__(self, status: int, lines: list[dict[str, Any]] | None = None, split: int = 0):
        self.status = status
        raw = b"".join(json.dumps(x).encode() + b"\n" for x in lines or [])
        self.content = Content([raw[:split], raw[split:]] if split else [raw])
        self.released = False

    async def read(self) -> bytes:
        return b'{"kind":"Status","code":%d}' % self.status

    def release(self) -> None:
        self.released = True


def node(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


class Api:
    """Answers lists and watches from scripts; every call is recorded."""

    def __init__(self, lists: list[dict[str, Any]], watches: list[Response | Exception]):
        self.lists, self.watches, self.calls = lists, watches, []

    async def read(self, api_name: str, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("list", kwargs))
        return self.lists.pop(0)

    async def stream(self, api_name: str, method: str, **kwargs: Any) -> Any:
        self.calls.append(("watch", kwargs))
        if not self.watches:
            raise Stop()
        answer = self.watches.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Recorder:
    def __init__(self):
        self.seen: list[tuple[str, str]] = []

    async def relisted(self, items: list[dict[str, Any]]) -> None:
        self.seen.extend(("LIST", i["metadata"]["name"]) for i in items)

    async def changed(self, kind: str, obj: dict[str, Any]) -> None:
        self.seen.append((kind, obj["metadata"]["name"]))


async def run(api: Api, handler: Recorder) -> tuple[WatchStatus, list[float]]:
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        if len(slept) > 20:
            raise Stop()

    status = WatchStatus("nodes")
    watch = Watch(api, "CoreV1Api", "list_node", handler, status, sleep=sleep)
    watch.backoff = Backoff(rand=lambda: 1.0)
    with pytest.raises(Stop):
        await asyncio.wait_for(watch.run(), 5)
    return status, slept


async def test_lists_in_pages_then_watches_from_the_lists_version_and_follows_bookmarks() -> None:
    api = Api([{"items": [node("a", "5")], "metadata": {"continue": "tok"}},
               {"items": [node("b", "6")], "metadata": {"resourceVersion": "10"}}],
              [Response(200, [{"type": "MODIFIED", "object": node("a", "11")},
                              {"type": "BOOKMARK", "object": {"kind": "Node", "metadata": {"resourceVersion": "15"}}}],
                        split=20),  # an event split across two reads
               Response(200, [{"type": "DELETED", "object": node("b", "16")}])])
    handler = Recorder()
    status, _ = await run(api, handler)
    assert handler.seen == [("LIST", "a"), ("LIST", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    lists = [kw for kind, kw in api.calls if kind == "list"]
    assert lists[1]["_continue"] == "tok" and lists[0]["limit"] == 500
    watches = [kw for kind, kw in api.calls if kind == "watch"]
    # the first watch from the list's version; the second resumes after the bookmark, not from the list
    assert [w["resource_version"] for w in watches] == ["10", "15", "16"]
    assert all(w["allow_watch_bookmarks"] for w in watches)
    assert status.relists == 1 and status.events == 2 and status.restarts == 2


@pytest.mark.parametrize("gone", [Response(410), Response(200, [{"type": "ERROR", "object": {
    "kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "too old resource version: 10 (20)",
    "reason": "Expired", "code": 410}}])], ids=["http-410", "error-event-410"])
async def test_a_410_gone_lists_again_from_scratch(gone: Response) -> None:
    api = Api([{"items": [node("a", "5")], "metadata": {"resourceVersion": "10"}},
               {"items": [node("a", "25")], "metadata": {"resourceVersion": "30"}}],
              [gone, Response(200, [{"type": "MODIFIED", "object": node("a", "31")}])])
    handler = Recorder()
    status, _ = await run(api, handler)
    assert handler.seen == [("LIST", "a"), ("LIST", "a"), ("MODIFIED", "a")]
    assert [kw["resource_version"] for kind, kw in api.calls if kind == "watch"] == ["10", "30", "31"]
    assert status.relists == 2 and gone.released


async def test_failures_back_off_and_show_in_the_status_until_a_watch_works_again() -> None:
    api = Api([{"items": [], "metadata": {"resourceVersion": "3"}}],
              [ConnectionResetError("peer reset"), Response(500), Response(200, [])])
    handler = Recorder()
    seen_down: list[str] = []
    original = api.stream

    async def stream(api_name: str, method: str, **kwargs: Any) -> Any:
        seen_down.append(status_ref[0].error)
        return await original(api_name, method, **kwargs)

    api.stream = stream  # type: ignore[method-assign]
    status_ref: list[WatchStatus] = []
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    status = WatchStatus("nodes")
    status_ref.append(status)
    watch = Watch(api, "CoreV1Api", "list_node", handler, status, sleep=sleep)
    watch.backoff = Backoff(rand=lambda: 1.0)
    with pytest.raises(Stop):
        await watch.run()
    assert slept[:2] == [0.5, 1.0]  # exponential
    assert "peer reset" in seen_down[1] and "HTTP 500" in seen_down[2]
    assert status.failing_since is None and status.up and status.error == ""  # the third watch connected


def test_backoff_is_capped_and_reset() -> None:
    b = Backoff(first=1, most=8, rand=lambda: 1.0)
    assert [b.next() for _ in range(6)] == [1, 2, 4, 8, 8, 8]
    b.reset()
    assert b.next() == 1


class Silent(Response):
    """A watch on which nothing arrives until the client's read timeout."""

    def __init__(self):
        super().__init__(200)

        class Quiet:
            async def iter_any(self):
                raise asyncio.TimeoutError()
                yield b""  # an async generator

        self.content = Quiet()  # type: ignore[assignment]


async def test_a_silent_watch_is_watched_again_without_counting_as_a_failure() -> None:
    api = Api([{"items": [], "metadata": {"resourceVersion": "3"}}], [Silent(), Response(200, [])])
    status, slept = await run(api, Recorder())
    assert slept == [] and status.error == "" and status.restarts == 2
    assert [kw["resource_version"] for kind, kw in api.calls if kind == "watch"] == ["3", "3", "3"]
