"""The Kubernetes API as alertd reads it: plain JSON dicts, a TTL cache, one fetch per key.

Through kubernetes_asyncio (a kubeconfig file, or the in-cluster service account).
Typed APIs are called with ``_preload_content=False`` and answered as plain JSON
dicts (camelCase, as the API server sends them): no model deserialisation on
the hot path.

Everything is cached with a TTL and fetched once at a time per key, so a
storm of alerts on one node costs one round of API calls.

:class:`KubeApi` is the base of :class:`~alertd.enrich.kube_owners.KubeOwners`
and :class:`~alertd.enrich.kube.KubeContext`: every read above it goes through
``_get``, so one override answers them all (the tests serve objects from memory).
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, TypeVar, cast

from msgspec import UnsetType

from alertd.core.json_types import JSONObject, JSONValue, as_object
from alertd.enrich.settings import KubeSettings

T = TypeVar("T")
DECODE_OFF_LOOP = 256 * 1024  # bytes of an answer past which it is decoded on a worker thread
CACHE_SWEEP = 8192  # answers kept before expired ones are swept out (then twice what the last sweep left)
# A cache key: what was read and its name parts, e.g. ("namespace", ns) or ("owner", ns, apiVersion, kind, name).
CacheKey = tuple[str, ...]


class KubeUnavailable(Exception):
    """The Kubernetes API could not answer; ``reason`` is short and shown to people."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NotFound(Exception):
    """The API answered 404: the object is gone (a finished pod's owner, a deleted node)."""


@dataclass(slots=True)
class KubeStats:
    calls: int = 0  # API requests sent
    cache_hits: int = 0
    errors: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "cache_hits": self.cache_hits, "errors": self.errors}


async def decode_json(raw: bytes) -> JSONValue:
    """An API answer decoded; a large one (a list of a big cluster's nodes or pods: megabytes, seconds of
    CPU) on a worker thread, so the event loop keeps answering webhooks and /readyz meanwhile."""
    if len(raw) < DECODE_OFF_LOOP:
        return cast(JSONValue, json.loads(raw))
    return cast(JSONValue, await asyncio.to_thread(json.loads, raw))


def metadata(obj: JSONObject) -> JSONObject:
    """An object's ``metadata`` (empty when it has none)."""
    return as_object(obj.get("metadata"))


class KubeApi:
    """Read-only access to one cluster: credentials, request limits, the cache."""

    def __init__(self, settings: KubeSettings, api_client: Any = None, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] | None = None):
        # The generated client is a large module: import it now, not on the event loop at the first alert.
        import kubernetes_asyncio.client  # noqa: F401
        import kubernetes_asyncio.config  # noqa: F401

        self.settings = settings
        self._api_client = api_client
        self._own_client = api_client is None
        self._client_lock = asyncio.Lock()
        self._apis: dict[str, object] = {}  # kubernetes_asyncio's generated API classes, by class name
        self.monotonic = monotonic
        self.now = now or (lambda: datetime.now(timezone.utc))
        self.stats = KubeStats()
        self._sem = asyncio.Semaphore(max(1, settings.concurrency))
        self._cache: dict[CacheKey, tuple[float, object]] = {}
        self._sweep_at = CACHE_SWEEP
        self._inflight: dict[CacheKey, asyncio.Future[object]] = {}

    # ----- client -----

    async def client(self) -> Any:
        if self._api_client is not None:
            return self._api_client
        async with self._client_lock:
            if self._api_client is None:
                from kubernetes_asyncio import client, config

                conf = client.Configuration()
                s = self.settings
                in_cluster = s.in_cluster
                if isinstance(in_cluster, UnsetType):
                    in_cluster = not s.kubeconfig and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
                try:
                    if in_cluster:
                        config.load_incluster_config(client_configuration=conf)
                    else:
                        await config.load_kube_config(config_file=s.kubeconfig or None, context=s.context or None,
                                                      client_configuration=conf, persist_config=False)
                except Exception as exc:
                    raise KubeUnavailable(f"no Kubernetes credentials: {exc}") from exc
                self._api_client = client.ApiClient(configuration=conf)
        return self._api_client

    async def _api(self, name: str) -> Any:  # a generated API class: its methods are called by name
        api = self._apis.get(name)
        if api is None:
            from kubernetes_asyncio import client

            api = self._apis[name] = getattr(client, name)(await self.client())
        return api

    async def read(self, api_name: str, method: str, *args: Any, **kwargs: Any) -> JSONObject:
        """One uncached API request answered as a JSON object (a list page, a pod): ``_get`` for readers outside."""
        return await self._get(api_name, method, *args, **kwargs)

    async def stream(self, api_name: str, method: str, **kwargs: Any) -> Any:
        """A watch request's open response (aiohttp), not read: the caller reads its lines and releases it.
        Not under the request semaphore: a watch stays open for minutes."""
        api = await self._api(api_name)
        self.stats.calls += 1
        return await getattr(api, method)(_preload_content=False, **kwargs)

    async def _get(self, api_name: str, method: str, *args: Any, **kwargs: Any) -> JSONObject:
        """One API request answered as a JSON dict; NotFound on 404, KubeUnavailable otherwise."""
        api = await self._api(api_name)
        async with self._sem:
            self.stats.calls += 1
            try:
                resp = await asyncio.wait_for(
                    getattr(api, method)(*args, _preload_content=False, _request_timeout=self.settings.timeout, **kwargs),
                    self.settings.timeout + 1)
            except asyncio.TimeoutError:
                self.stats.errors += 1
                raise KubeUnavailable(f"Kubernetes API: no answer within {self.settings.timeout:g}s") from None
            except KubeUnavailable:
                raise
            except Exception as exc:
                self.stats.errors += 1
                raise KubeUnavailable(f"Kubernetes API: {type(exc).__name__}: {exc}"[:200]) from exc
            try:
                raw = await resp.read()
                status = resp.status
            except Exception as exc:
                self.stats.errors += 1
                raise KubeUnavailable(f"Kubernetes API: {type(exc).__name__}: {exc}"[:200]) from exc
            finally:
                resp.release()
        if status == 404:
            raise NotFound(method)
        try:
            body = await decode_json(raw)
        except ValueError:
            self.stats.errors += 1
            raise KubeUnavailable(f"Kubernetes API: HTTP {status}, not JSON") from None
        if not 200 <= status < 300:
            self.stats.errors += 1
            message = body.get("message") if isinstance(body, dict) else ""
            raise KubeUnavailable(f"Kubernetes API: HTTP {status}: {message}"[:200])
        if not isinstance(body, dict):
            self.stats.errors += 1
            raise KubeUnavailable("Kubernetes API: answer is not an object")
        return body

    async def _cached(self, key: CacheKey, ttl: float, fetch: Callable[[], Awaitable[T]]) -> T:
        """``fetch()``'s answer, shared by concurrent callers and kept for ``ttl`` seconds. One cache holds every
        kind of answer; a key's first part names the kind, so the value found under a key is what ``fetch``
        returns for it (the one place where the type is re-asserted)."""
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self.monotonic():
            self.stats.cache_hits += 1
            return cast(T, hit[1])
        fut = self._inflight.get(key)
        if fut is not None:
            return cast(T, await asyncio.shield(fut))
        fut = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            value = await fetch()
        except BaseException as exc:
            self._inflight.pop(key, None)
            if not fut.done():
                fut.set_exception(exc if isinstance(exc, Exception) else KubeUnavailable("cancelled"))
                fut.exception()
            raise
        self._inflight.pop(key, None)
        self._cache[key] = (self.monotonic() + ttl, value)
        if len(self._cache) > self._sweep_at:
            # Expired answers go when the cache has doubled since the last sweep: a sweep reads every entry,
            # so sweeping on each answer past a fixed size made a storm of nodes cost their square.
            now = self.monotonic()
            for k in [k for k, (exp, _) in self._cache.items() if exp <= now]:
                del self._cache[k]
            self._sweep_at = max(CACHE_SWEEP, 2 * len(self._cache))
        fut.set_result(value)
        return value

    async def close(self) -> None:
        if self._api_client is not None and self._own_client:
            await self._api_client.close()
        self._api_client = None
        self._apis.clear()


__all__ = ["KubeApi", "KubeStats", "KubeUnavailable", "NotFound", "decode_json", "metadata"]
