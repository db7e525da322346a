"""Recording rules at the service's edge: the site's files (config) and the rules API of its Prometheus.

The engine classifies from :class:`alertd.promql.recording.RecordingIndex`
and never waits on the network. This module fills that index:

- at start and at every rule reload, from ``classify.prometheus_rules``
  (a broken file is a configuration error, named with its path);
- before an engine step (never before a webhook's answer: the webhook is
  stored and answered first), from ``GET <prometheus>/api/v1/rules?type=record``
  of the Prometheus named in the alerts' generatorURL, when an alert reads a
  recorded series (``level:metric:operations``) the index does not know and
  that Prometheus is listed in ``classify.rules_api.prometheus``.

The step waits at most ``wait`` (default 2 s) for the answer, so the FIRST
webhook of a site whose rules read recording rules is classified right: the
alert is still in Alertmanager's first group_wait-delayed notification, and
2 s is small next to that 30 s. A fetch that takes longer completes in the
background and the engine's prepared classifications are dropped so the next
delivery of the alert (Alertmanager re-sends every group_interval) is read
with the rules. Answers are cached per Prometheus for ``ttl`` (default 10m),
failures for ``retry`` (default 1m): a Prometheus that is down costs one wait
per minute, not one per step. Responses are bounded in bytes and rules.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from alertd.config.classify import RulesApiSettings
from alertd.config.settings import Config
from alertd.core.http_session import LazySession
from alertd.core.model import Alert
from alertd.engine.pipeline import Engine
from alertd.promql.expr import facts_of_url
from alertd.promql.recording import RecordedRules, RecordingIndex, base_url, collect, load_index, unknown_recorded
from alertd.rules.ruleset import RuleSet, load_rules

log = logging.getLogger("alertd.recording")
MAX_SERVERS = 64  # Prometheus servers whose rules are kept
Getter = Callable[[str], Awaitable[bytes]]


def site_rule_files(cfg: Config) -> tuple[list[str], Path | None]:
    """``classify.prometheus_rules`` and the directory relative paths are read from (the config file's)."""
    patterns = list(cfg.classify.prometheus_rules)
    source = Path(cfg.source)
    return patterns, (source.resolve().parent if source.is_file() else None)


def with_site_recordings(rules: RuleSet, cfg: Config, extra: Iterable[str] = (), *,
                         previous: RecordingIndex | None = None) -> RuleSet:
    """``rules`` with the recording rules of the configured files (and ``extra`` ones); raises InvalidDocument
    naming a file that cannot be read or a glob that matches nothing. ``previous`` hands over what the
    rules API already told."""
    patterns, base = site_rule_files(cfg)
    patterns += list(extra)
    if not patterns and previous is None:
        return rules
    index = load_index(patterns, base)
    if previous is not None:
        index.adopt(previous)
    return replace(rules, recorded=index)


def parse_rules_response(body: bytes) -> RecordedRules:
    """The recording rules of a ``/api/v1/rules`` answer; ValueError when it is not one."""
    doc = json.loads(body)
    if not isinstance(doc, dict) or doc.get("status") != "success" or not isinstance(doc.get("data"), dict):
        raise ValueError("not a successful Prometheus rules API answer")
    pairs = []
    for group in doc["data"].get("groups") or []:
        for rule in (group.get("rules") or []) if isinstance(group, dict) else []:
            if isinstance(rule, dict) and rule.get("type") == "recording":
                pairs.append((str(rule.get("name", "")), str(rule.get("query", ""))))
    return collect(pairs)


class RulesFetcher:
    """Fills the engine's RecordingIndex from the rules API of allowed Prometheus servers."""

    def __init__(self, settings: RulesApiSettings, index: Callable[[], RecordingIndex], *,
                 get: Getter | None = None, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[], None] | None = None):
        self.settings = settings
        self._index = index  # the service's current rules' index (a reload replaces it)
        self._session = LazySession(settings.timeout)
        self._get = get or self._http_get
        self._clock = clock
        self._on_change = on_change
        self._until: dict[str, float] = {}  # base -> when its answer (or failure) stops counting
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self.fetches = self.failures = 0

    @property
    def enabled(self) -> bool:
        return bool(self.settings.prometheus)

    def allowed(self, base: str) -> bool:
        """Only a listed base URL, exactly: a generatorURL is input and must not steer requests elsewhere."""
        return bool(base) and base in self.settings.prometheus

    async def prepare(self, alerts: Iterable[Alert]) -> None:
        """Before an engine step: ask for what the alerts need, wait at most ``wait`` for it."""
        if not self.enabled:
            return
        now, index, waiting = self._clock(), self._index(), []
        for base, missing in self._needs(alerts, index).items():
            expired = now >= self._until.get(base, 0.0)
            if expired and base not in self._inflight:
                self._start(base)
            if base in self._inflight and missing and (expired or not index.knows(base)):
                waiting.append(self._inflight[base])
        if waiting:
            await asyncio.wait(waiting, timeout=self.settings.wait)

    def _needs(self, alerts: Iterable[Alert], index: RecordingIndex) -> dict[str, bool]:
        """Allowed Prometheus servers of the alerts -> whether one of their alerts reads an unknown series."""
        out: dict[str, bool] = {}
        for alert in alerts:
            if not alert.generator_url:
                continue
            base = base_url(alert.generator_url)
            if not self.allowed(base):
                continue
            facts = facts_of_url(alert.generator_url)
            missing = bool(unknown_recorded(facts, index.for_url(alert.generator_url)))
            out[base] = out.get(base, False) or missing
        return out

    def _start(self, base: str) -> None:
        task = asyncio.get_running_loop().create_task(self._fetch(base), name=f"alertd-rules-api {base}")
        self._inflight[base] = task
        task.add_done_callback(lambda _t: self._inflight.pop(base, None))

    async def _fetch(self, base: str) -> None:
        self.fetches += 1
        try:
            rules = parse_rules_response(await self._get(f"{base}/api/v1/rules?type=record"))
        except Exception as exc:  # network, HTTP status, size, JSON: all mean "not now"
            self.failures += 1
            self._until[base] = self._clock() + self.settings.retry
            log.warning("recording rules of %s not read (asked again in %.0fs): %s", base, self.settings.retry, exc)
            return
        self._until[base] = self._clock() + self.settings.ttl
        index = self._index()
        changed = index.set_fetched(base, rules)
        index.forget(sorted(self._until, key=self._until.__getitem__)[-MAX_SERVERS:])
        if changed:
            log.info("recording rules of %s: %d recorded series", base, len(rules))
            if self._on_change is not None:
                self._on_change()

    async def _http_get(self, url: str) -> bytes:
        async with self._session.get().get(url, headers={"Accept": "application/json"}, allow_redirects=False) as resp:
            if resp.status != 200:
                raise ValueError(f"HTTP {resp.status}")
            body = await resp.content.read(self.settings.max_bytes + 1)
            if len(body) > self.settings.max_bytes:
                raise ValueError(f"answer larger than {self.settings.max_bytes} bytes")
            return body

    async def close(self) -> None:
        for task in list(self._inflight.values()):
            task.cancel()
        await self._session.close()


class RecordingHost(Protocol):
    """The service as the rules API fetcher sees it (alertd/app/service.py): its configuration, its current
    rules (whose recording index is filled) and its engine, told when the rules change."""

    @property
    def cfg(self) -> Config: ...

    @property
    def rules(self) -> RuleSet: ...

    @property
    def engine(self) -> Engine | None: ...


def fetcher_for(service: RecordingHost) -> RulesFetcher:
    """The service's fetcher: it fills the index of the service's current rules, and rules that arrive or
    change make the engine read its alerts again (Engine.set_rules forgets what it worked out)."""
    def changed() -> None:
        if service.engine is not None:
            service.engine.set_rules(service.rules)

    return RulesFetcher(service.cfg.classify.rules_api, lambda: service.rules.recorded, on_change=changed)


def load_site_rules(cfg: Config, *, previous: RecordingIndex | None = None) -> RuleSet:
    """The configured rule files with the site's recording rules: what the service starts and reloads with."""
    paths: list[Path | str] = list(cfg.rule_paths)
    return with_site_recordings(load_rules(paths), cfg, previous=previous)


__all__ = ["RulesApiSettings", "fetcher_for", "load_site_rules", "RulesFetcher", "parse_rules_response", "site_rule_files", "with_site_recordings"]
