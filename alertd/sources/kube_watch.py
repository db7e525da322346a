"""List then watch one kind of Kubernetes object, as client-go's reflector does.

A list (paged) gives every object and a resourceVersion; the watch goes on from there, with
bookmarks keeping the version fresh while nothing changes. A watch the API server ends (its
timeout, a restart) resumes from the last version seen; one whose version is too old (410 Gone,
as an HTTP status or an ERROR event) lists again. Failures back off exponentially with jitter.
Nothing is kept but the version: what to remember of the objects is the handler's business.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Protocol

import aiohttp

from alertd.core.json_types import JSONObject, member, objects
from alertd.core.json_types import obj as json_object

log = logging.getLogger(__name__)
PAGE = 500  # objects per list page
MAX_LINE = 16 * 1024 * 1024  # bytes one watch event may take (a node with thousands of images stays far below)
WATCH_SECONDS = 300  # the API server ends each watch after this; we resume from the last version
READ_TIMEOUT = 90.0  # seconds without a byte (bookmarks come about every minute) before the watch is called dead


class Gone(Exception):
    """The resourceVersion is too old for the API server (410): list again."""


class WatchFailed(Exception):
    """The API server refused or broke the request; ``reason`` says how."""


class LineStream(Protocol):
    def iter_any(self) -> AsyncIterator[bytes]: ...


class WatchResponse(Protocol):
    """A watch request's open HTTP response (aiohttp's ClientResponse)."""

    @property
    def status(self) -> int: ...

    @property
    def content(self) -> LineStream: ...

    async def read(self) -> bytes: ...

    def release(self) -> None: ...


class StreamsApi(Protocol):
    """The Kubernetes client as the watch needs it (alertd/enrich/kube_api.py's KubeApi): a method of one of
    kubernetes_asyncio's API classes by name, with its arguments."""

    async def read(self, api_name: str, method: str, *args: object, **kwargs: object) -> JSONObject: ...

    async def stream(self, api_name: str, method: str, **kwargs: object) -> WatchResponse: ...


class WatchHandler(Protocol):
    """What the watch hands its objects to: a full list (``relisted``), then changes one by one."""

    async def relisted(self, items: list[JSONObject]) -> None: ...

    async def changed(self, kind: str, obj: JSONObject) -> None: ...


@dataclass
class WatchStatus:
    """What /metrics and /readyz say about one watch."""

    name: str
    up: bool = False
    error: str = ""
    relists: int = 0
    restarts: int = 0
    events: int = 0
    resource_version: str = ""
    failing_since: float | None = None
    extra: JSONObject = field(default_factory=dict)


@dataclass
class Backoff:
    """Exponential backoff with full jitter, reset by a success."""

    first: float = 0.5
    most: float = 30.0
    attempt: int = 0
    rand: Callable[[], float] = random.random

    def next(self) -> float:
        delay = min(self.most, self.first * 2.0 ** self.attempt)
        self.attempt = min(self.attempt + 1, 16)
        return float(delay * (0.5 + self.rand() / 2))

    def reset(self) -> None:
        self.attempt = 0


class Watch:
    """One list-then-watch loop over ``method`` of ``api_name`` (e.g. CoreV1Api.list_node)."""

    def __init__(self, api: StreamsApi, api_name: str, method: str, handler: WatchHandler, status: WatchStatus, *,
                 field_selector: str = "", sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 monotonic: Callable[[], float] = time.monotonic):
        self.api, self.api_name, self.method, self.handler = api, api_name, method, handler
        self.status, self.field_selector = status, field_selector
        self.sleep, self.monotonic = sleep, monotonic
        self.backoff = Backoff()
        self.version = ""

    async def run(self) -> None:
        while True:
            try:
                if not self.version:
                    await self._list()
                await self._watch()
                self.status.restarts += 1  # the server ended the watch (its timeout): resume at once
            except Gone:
                log.info("%s: resourceVersion %s expired (410 Gone); listing again", self.status.name, self.version)
                self.version = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(exc)
                await self.sleep(self.backoff.next())

    def _failed(self, exc: Exception) -> None:
        reason = exc.args[0] if isinstance(exc, WatchFailed) else f"{type(exc).__name__}: {exc}"
        self.status.up, self.status.error = False, str(reason)[:300]
        if self.status.failing_since is None:
            self.status.failing_since = self.monotonic()
        log.warning("%s: %s; retrying", self.status.name, self.status.error)

    def _ok(self) -> None:
        self.status.up, self.status.error, self.status.failing_since = True, "", None
        self.backoff.reset()

    def _selector(self) -> dict[str, str]:
        return {"field_selector": self.field_selector} if self.field_selector else {}

    async def _list(self) -> None:
        items: list[JSONObject] = []
        token = ""
        while True:
            try:
                page = await self.api.read(self.api_name, self.method, limit=PAGE, **self._selector(),
                                           **({"_continue": token} if token else {}))
            except Exception as exc:  # KubeUnavailable; an expired continue token is 410 (list again, at once)
                if "HTTP 410" in str(exc):
                    raise Gone() from None
                raise
            items.extend(objects(page.get("items")))
            meta = member(page, "metadata")
            token = str(meta.get("continue") or "")
            if not token:
                self.version = str(meta.get("resourceVersion") or "")
                break
        await self.handler.relisted(items)
        self.status.relists += 1
        self.status.resource_version = self.version
        self._ok()

    async def _watch(self) -> None:
        resp = await self.api.stream(
            self.api_name, self.method, watch=True, resource_version=self.version, allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS, **self._selector(),
            _request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=READ_TIMEOUT))
        try:
            if resp.status == 410:
                raise Gone()
            if resp.status != 200:
                body = (await resp.read())[:300].decode(errors="replace")
                raise WatchFailed(f"watch answered HTTP {resp.status}: {body}")
            self._ok()
            await self._read(resp)
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            log.debug("%s: no event or bookmark for %.0fs; watching again", self.status.name, READ_TIMEOUT)
        finally:
            resp.release()

    async def _read(self, resp: WatchResponse) -> None:
        buf = b""
        async for chunk in resp.content.iter_any():
            buf += chunk
            if len(buf) > MAX_LINE:
                raise WatchFailed(f"a watch event exceeded {MAX_LINE} bytes")
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    await self._event(json_object(json.loads(line), "a watch event"))

    async def _event(self, event: JSONObject) -> None:
        kind, obj = str(event.get("type") or ""), member(event, "object")
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise WatchFailed(f"watch error {obj.get('code')}: {obj.get('message', '')}"[:300])
        version = str(member(obj, "metadata").get("resourceVersion") or "")
        if kind != "BOOKMARK":
            self.status.events += 1
            await self.handler.changed(kind, obj)
        if version:
            self.version = self.status.resource_version = version


__all__ = ["Backoff", "Gone", "StreamsApi", "Watch", "WatchFailed", "WatchHandler", "WatchStatus"]
