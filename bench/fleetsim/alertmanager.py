"""Alertmanager's dispatcher and notification pipeline for one route, on simulated time.

Follows Alertmanager 0.25 (the Debian package the tests run), read from
dispatch/dispatch.go and notify/notify.go:

* An alert goes to the aggregation group of its ``group_by`` labels. A new
  group flushes ``group_wait`` after it was created, or at once when an alert
  inserted before its first flush started more than ``group_wait`` ago
  (aggrGroup.insert). After each flush the next one is ``group_interval``
  later (the timer is reset before the flush runs).
* A flush sends ALL alerts of the group; firing ones with endsAt zeroed,
  resolved ones (endsAt <= now) with their endsAt. Whether it is sent is the
  DedupStage's needsUpdate against the group's notification log entry:
  nothing logged -> send when something fires; a firing alert not in the
  last notification's firing set -> send; nothing firing -> send when the
  last notification had firing alerts; send_resolved and a resolved alert
  not in the last resolved set -> send; otherwise only when repeat_interval
  has passed since the last notification.
* After a successful flush (sent or deduplicated) its resolved alerts leave
  the group; Prometheus's resolved re-sends put them back for up to 15
  minutes. A group left empty is removed by the dispatcher's 30-second
  cleanup; the notification log entry stays (its retention is days).
* HA: every peer receives every alert and flushes on the same timers; the
  peer at position 1 waits ``peer_timeout`` (15 s) before its DedupStage reads
  the notification log. When the first peer's log entry has not arrived by
  then (gossip lag, ``dup_probability``) it sends the same notification too.
"""
from __future__ import annotations

import heapq
import itertools
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from bench.fleetsim.labelset import alert_sort_key, label_string
from bench.fleetsim.prometheus import Instance

CLEANUP = 30.0
ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class RouteConfig:
    name: str
    group_by: tuple[str, ...]
    group_wait: float = 30.0
    group_interval: float = 300.0
    repeat_interval: float = 4 * 3600.0
    send_resolved: bool = True
    receiver: str = "alertd"
    route_key: str = "{}"  # the root route: Route.Key() of a route without matchers
    peer_timeout: float = 15.0
    dup_probability: float = 0.02  # the second peer also sends (gossip lagged past peer_timeout)
    external_url: str = "http://alertmanager.monitoring.svc:9093"


ROUTES = {
    "alertname": RouteConfig("alertname", ("alertname", "cluster")),
    "node": RouteConfig("node", ("alertname", "cluster", "node")),
}


@dataclass(slots=True)
class _Alert:
    inst: Instance
    ends_at: float | None  # set: resolved at that time


@dataclass(slots=True)
class _Group:
    key: str
    labels: dict[str, str]
    alerts: dict[str, _Alert] = field(default_factory=dict)
    has_flushed: bool = False
    version: int = 0
    emptied_at: float = -math.inf


@dataclass(slots=True)
class Flush:
    """One notification as sent: which peer, when it left, and the body."""

    at: float
    peer: int
    body: dict[str, Any]


def rfc3339(start: datetime, t: float) -> str:
    """Go's time.Time JSON form (RFC 3339 with trailing zeros of the fraction dropped), UTC."""
    when = (start + timedelta(milliseconds=round(t * 1000))).astimezone(timezone.utc)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if when.microsecond:
        text += ("." + f"{when.microsecond:06d}").rstrip("0")
    return text + "Z"


class Dispatcher:
    """Feed it what Prometheus sends (``put``) in time order via ``run``; it returns the notifications."""

    def __init__(self, route: RouteConfig, start: datetime, rng: random.Random, *, cleanup_offset: float = 0.0):
        self.route, self.start, self.rng = route, start, rng
        self.groups: dict[str, _Group] = {}
        self.nflog: dict[str, tuple[frozenset[str], frozenset[str], float]] = {}
        self.flushes: list[Flush] = []
        self.cleanup_offset = cleanup_offset
        self._heap: list[tuple[float, int, str, Any]] = []
        self._seq = itertools.count()

    def run(self, puts: list[tuple[float, Instance, bool]], until: float) -> list[Flush]:
        for at, inst, resolved in puts:
            heapq.heappush(self._heap, (at, next(self._seq), "put", (inst, resolved)))
        while self._heap and self._heap[0][0] <= until:
            now, _, kind, payload = heapq.heappop(self._heap)
            if kind == "put":
                self._put(now, *payload)
            else:
                flushing: _Group = payload[0]
                if self.groups.get(flushing.key) is flushing and flushing.version == payload[1]:
                    self._flush(now, flushing)
        self.flushes.sort(key=lambda f: f.at)
        return self.flushes

    # ----- dispatch -----

    def _schedule(self, group: _Group, at: float) -> None:
        group.version += 1
        heapq.heappush(self._heap, (at, next(self._seq), "flush", (group, group.version)))

    def _cleaned(self, since: float, now: float) -> bool:
        """Did a dispatcher cleanup tick fall in (since, now]?"""
        return self._cleanup_tick(now) > self._cleanup_tick(since)

    def _cleanup_tick(self, t: float) -> int:
        return math.floor((t - self.cleanup_offset) / CLEANUP)

    def _put(self, now: float, inst: Instance, resolved: bool) -> None:
        r = self.route
        glabels = {n: inst.labels[n] for n in r.group_by if n in inst.labels}
        key = f"{r.route_key}:{label_string(glabels)}"
        group = self.groups.get(key)
        if group is not None and not group.alerts and self._cleaned(group.emptied_at, now):
            del self.groups[key]
            group = None
        if group is None:
            group = self.groups[key] = _Group(key, glabels)
            self._schedule(group, now + r.group_wait)
        group.alerts[inst.fingerprint] = _Alert(inst, inst.resolved_at if resolved else None)
        if not group.has_flushed and inst.starts_at + r.group_wait < now:
            self._schedule(group, now)  # ag.next.Reset(0)

    def _flush(self, now: float, group: _Group) -> None:
        r = self.route
        if not group.alerts and self._cleaned(group.emptied_at, now):
            del self.groups[group.key]  # the cleanup stopped it: no more timers
            return
        self._schedule(group, now + r.group_interval)
        group.has_flushed = True
        if not group.alerts:
            return
        snapshot = list(group.alerts.values())
        resolved = [a for a in snapshot if a.ends_at is not None and a.ends_at <= now]
        gone = {id(a) for a in resolved}
        firing_set = frozenset(a.inst.fingerprint for a in snapshot if id(a) not in gone)
        resolved_set = frozenset(a.inst.fingerprint for a in resolved)
        if self._needs_update(self.nflog.get(group.key), firing_set, resolved_set, now):
            body = self._body(group, snapshot, resolved)
            self.flushes.append(Flush(now, 0, body))
            self.nflog[group.key] = (firing_set, resolved_set, now)
            if self.rng.random() < r.dup_probability:
                self.flushes.append(Flush(now + r.peer_timeout + self.rng.uniform(0.0, 0.05), 1, body))
        for a in resolved:
            if group.alerts.get(a.inst.fingerprint) is a:
                del group.alerts[a.inst.fingerprint]
        if not group.alerts:
            group.emptied_at = now

    def _needs_update(self, entry: tuple[frozenset[str], frozenset[str], float] | None, firing: frozenset[str],
                      resolved: frozenset[str], now: float) -> bool:
        """notify.DedupStage.needsUpdate."""
        if entry is None:
            return bool(firing)
        last_firing, last_resolved, at = entry
        if not firing <= last_firing:
            return True
        if not firing:
            return bool(last_firing)
        if self.route.send_resolved and not resolved <= last_resolved:
            return True
        return at < now - self.route.repeat_interval

    # ----- the webhook -----

    def _body(self, group: _Group, snapshot: list[_Alert], resolved: list[_Alert]) -> dict[str, Any]:
        r = self.route
        gone = {id(a) for a in resolved}
        ordered = sorted(snapshot, key=lambda a: alert_sort_key(a.inst.labels))
        if not r.send_resolved:
            ordered = [a for a in ordered if id(a) not in gone]
        alerts: list[dict[str, Any]] = []
        for a in ordered:
            done = id(a) in gone
            alerts.append({
                "status": "resolved" if done else "firing",
                "labels": a.inst.labels,
                "annotations": a.inst.annotations,
                "startsAt": rfc3339(self.start, a.inst.starts_at),
                "endsAt": rfc3339(self.start, a.ends_at) if done and a.ends_at is not None else ZERO_TIME,
                "generatorURL": a.inst.rule.generator_url,
                "fingerprint": a.inst.fingerprint,
            })
        return {
            "receiver": r.receiver,
            "status": "firing" if any(x["status"] == "firing" for x in alerts) else "resolved",
            "alerts": alerts,
            "groupLabels": dict(group.labels),
            "commonLabels": _common([x["labels"] for x in alerts]),
            "commonAnnotations": _common([x["annotations"] for x in alerts]),
            "externalURL": r.external_url,
            "version": "4",
            "groupKey": group.key,
            "truncatedAlerts": 0,
        }


def _common(maps: list[dict[str, str]]) -> dict[str, str]:
    if not maps:
        return {}
    first = maps[0]
    return {k: v for k, v in first.items() if all(mm.get(k) == v for mm in maps[1:])}
