"""The ``routing:`` rule section: its typed form, and the loader that builds it with semantic checks.

The section (schema: schemas/routing.schema.json) names receivers (each with
one section per integration: Slack channels, a PagerDuty routing key, the
console, a webhook, an Opsgenie key; alertd.integrations.registry) and an ordered list of routes
with Alertmanager matchers over incident fields. The first matching route wins
unless it says ``continue: true``. On top of that:

* mute windows (recurring weekday/time ranges in a time zone) per route,
* maintenance windows (absolute start/end) per node or cluster,
* cordoned nodes: mute their incidents or downgrade their severity,
* job owners: application Xids go to the owning team's receiver,
* group wait: a new node incident's first post and page wait ``group_wait``
  (like Alertmanager's), so when a storm forms meanwhile the node's incident is
  folded into the fleet incident and never posted alone,
* escalation: "page again on another routing key if nobody acknowledged
  within N minutes", scheduled as outbox work with a future due time.

Windows and the cordon policy live in ``alertd.rules.windows``, owners in
``alertd.rules.owners``. ``alertd.notify.decision.route_incident`` is a pure function
of the incident and a time; ``alertd.notify.router.Router`` turns decisions
into outbox items. Suppressed changes still keep messages that were already
sent up to date (edits, acknowledge, resolve) but never post, page or
escalate anew.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from alertd.core.json_types import JSONObject, objects
from alertd.core.outbox_items import Target
from alertd.core.yamlio import Path_
from alertd.core.matchers import Matcher
from alertd.integrations import registry
from alertd.integrations.pagerduty import ROUTING_KEY
from alertd.core.instants import WEEKDAYS
from alertd.rules.checker import Checker
from alertd.rules.declared import decode
from alertd.rules.routing_section import (Cordoned, Escalate, MaintenanceRule, MuteWindow, Owners, RouteRule,
                                          RoutingSection, TimeRangeRule)
from alertd.rules.owners import OwnerRouting
from alertd.rules.windows import CordonPolicy, Maintenance, Pending, TimeRange, TimeWindow

DEFAULT_GROUP_WAIT: timedelta = RoutingSection(receivers=()).group_wait
ESCALATION_KIND = "pagerduty"  # route.escalate names a PagerDuty routing key
OWNER_CHANNEL_KIND = "slack"  # owners.use_channels: the owner's Slack channel


# ----- typed rules -----

@dataclass(frozen=True, slots=True)
class Receiver:
    name: str
    outputs: tuple[Target, ...] = ()  # in the order the integrations are registered

    def targets(self) -> list[Target]:
        return list(self.outputs)


@dataclass(frozen=True, slots=True)
class Escalation:
    after: timedelta
    routing_key: str  # routing key name

    @property
    def target(self) -> Target:
        return Target.of(ESCALATION_KIND, self.routing_key)


def owner_channel(channel: str) -> Receiver:
    """The receiver for an owner's own channel (routes with owners and ``owners.use_channels``)."""
    return Receiver(f"channel:{channel}", (Target.of(OWNER_CHANNEL_KIND, channel),))


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    matchers: tuple[Matcher, ...] = ()
    receiver: str = ""  # with owners: the fallback when no owner is found
    owners: bool = False
    continue_: bool = False
    mute: tuple[str, ...] = ()  # mute window names: muted while any is active
    active: tuple[str, ...] = ()  # window names: muted unless one is active
    escalate: Escalation | None = None


@dataclass(frozen=True, slots=True)
class Routing:
    receivers: dict[str, Receiver]
    routes: tuple[Route, ...] = ()
    default_receiver: str = ""
    windows: dict[str, TimeWindow] = field(default_factory=dict)
    maintenance: tuple[Maintenance, ...] = ()
    cordoned: CordonPolicy = CordonPolicy()
    owners: OwnerRouting = OwnerRouting()
    # A new node incident's first notification waits this long, so a storm can form and fold it first.
    group_wait: timedelta = DEFAULT_GROUP_WAIT
    # Deprecated alias of correlation.storm.pending (None: not given); the loader maps it there with a warning.
    storm_wait: timedelta | None = None

    def addresses(self, kind: str) -> set[str]:
        """Every address of one integration the rules name (receivers and escalations)."""
        found = {t for r in self.receivers.values() for t in r.outputs if t.kind == kind}
        found |= {r.escalate.target for r in self.routes if r.escalate}
        return {t.address for t in found if t.kind == kind}

    def key_names(self) -> set[str]:
        return self.addresses(ESCALATION_KIND)


def default_routing(channel: str) -> Routing:
    """Everything to one Slack channel: used when Slack is configured but no routing section exists."""
    return Routing(receivers={"default": Receiver("default", (Target.of("slack", channel),))},
                   default_receiver="default")

# ----- loading the routing section -----

def _time_of_day(value: Any) -> int | None:
    """'22:00' -> 1320. YAML 1.1 reads an unquoted 22:00 as the integer 1320: the same minutes."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= 1440 else None
    m = re.fullmatch(r"([01]?\d|2[0-4]):([0-5]\d)", str(value).strip())
    if not m:
        return None
    minutes = int(m.group(1)) * 60 + int(m.group(2))
    return minutes if minutes <= 1440 else None


def _weekdays(items: Any, check: Any, path: tuple[Any, ...]) -> frozenset[int]:
    days: set[int] = set()
    for i, item in enumerate(items or []):
        text = str(item).strip().lower()
        lo, _, hi = text.partition(":")
        if lo not in WEEKDAYS or (hi and hi not in WEEKDAYS):
            check.problem(path + (i,), f"bad weekday {item!r}: use monday..sunday or a range like monday:friday")
            continue
        a, b = WEEKDAYS.index(lo), WEEKDAYS.index(hi or lo)
        d = a
        while True:
            days.add(d)
            if d == b:
                break
            d = (d + 1) % 7
    return frozenset(days) if items else frozenset(range(7))


def _instant(value: Any, check: Any, path: tuple[Any, ...]) -> datetime | None:
    if isinstance(value, datetime):
        ts = value
    else:
        try:
            ts = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            check.problem(path, f"not an RFC 3339 time: {value!r} (e.g. 2025-03-01T08:00:00Z)")
            return None
    if ts.tzinfo is None:
        check.problem(path, f"{value!r} has no time zone offset; write Z or +01:00")
        return None
    return ts.astimezone(timezone.utc)


def parse_routing(data: JSONObject, check: Checker) -> Routing:
    """Build typed Routing from a schema-valid ``routing`` section; report semantic problems to ``check``.

    One reader per part of the section, in the order problems are reported: receivers first,
    because windows, owners and routes name them. A receiver's integration sections are read from the
    document by their integrations."""
    root = ("routing",)
    doc = decode(RoutingSection, data, root, check)
    receivers = _receivers(objects(data.get("receivers")), check, root + ("receivers",))
    windows = _mute_windows(doc.mute_windows, check, root + ("mute_windows",))
    maintenance = _maintenance(doc.maintenance, check, root + ("maintenance",))
    owners = _owner_routing(doc.owners, receivers, check, root + ("owners",))
    routes = _routes(doc.routes, receivers, windows, check, root + ("routes",))
    default = str(doc.default_receiver)
    if default and default not in receivers:
        check.problem(root + ("default_receiver",), f"unknown receiver {default!r}")
    cordon = _cordon_policy(doc.cordoned, check, root + ("cordoned",))
    return Routing(receivers=receivers, routes=routes, default_receiver=default, windows=windows,
                   maintenance=maintenance, cordoned=cordon, owners=owners, group_wait=doc.group_wait,
                   storm_wait=doc.storm_wait)


def _receivers(docs: list[JSONObject], check: Checker, root: Path_) -> dict[str, Receiver]:
    """``receivers``: each integration's section of a receiver becomes its targets (registry order)."""
    receivers: dict[str, Receiver] = {}
    for i, r in enumerate(docs):
        path = root + (i,)
        name = str(r["name"])
        if name in receivers:
            check.problem(path + ("name",), f"duplicate receiver name {name!r}")
        outputs: list[Target] = []
        for kind, integration in registry.INTEGRATIONS.items():
            if kind in r:
                outputs.extend(integration.targets(r[kind], check.problem, path + (kind,)))
        receivers[name] = Receiver(name, tuple(dict.fromkeys(outputs)))
    return receivers


def _mute_windows(docs: tuple[MuteWindow, ...], check: Checker, root: Path_) -> dict[str, TimeWindow]:
    """``mute_windows``: recurring weekday/time ranges in a time zone, by name."""
    windows: dict[str, TimeWindow] = {}
    for i, w in enumerate(docs):
        path, name = root + (i,), str(w.name)
        if name in windows:
            check.problem(path + ("name",), f"duplicate window name {name!r}")
        try:
            tz = ZoneInfo(w.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            check.problem(path + ("time_zone",), f"unknown time zone {w.time_zone!r} (use an IANA name like Europe/Berlin)")
            tz = ZoneInfo("UTC")
        windows[name] = TimeWindow(name, tz, _weekdays(w.weekdays, check, path + ("weekdays",)),
                                   _time_ranges(w.times, check, path + ("times",)))
    return windows


def _time_ranges(docs: tuple[TimeRangeRule, ...], check: Checker, root: Path_) -> tuple[TimeRange, ...]:
    ranges = []
    for j, t in enumerate(docs):
        start, end = _time_of_day(t.start.raw), _time_of_day(t.end.raw)
        if start is None or end is None:
            check.problem(root + (j,), "times need start and end as \"HH:MM\" (quote them)")
            continue
        if start == end:
            check.problem(root + (j,), "start and end are equal: the range is empty")
            continue
        ranges.append(TimeRange(start, end % 1440 if end != 1440 else 1440))
    return tuple(ranges)


def _maintenance(docs: tuple[MaintenanceRule, ...], check: Checker, root: Path_) -> tuple[Maintenance, ...]:
    """``maintenance``: absolute windows over nodes, clusters or matchers."""
    maintenance = []
    for i, m in enumerate(docs):
        path = root + (i,)
        begins = _instant(m.start.raw, check, path + ("start",))
        ends = _instant(m.end.raw, check, path + ("end",))
        if begins and ends and ends <= begins:
            check.problem(path + ("end",), "end must be after start")
        if not (m.nodes or m.clusters or m.match):
            check.problem(path, "a maintenance window needs nodes, clusters or match (it would mute everything)")
        if begins and ends:
            maintenance.append(Maintenance(m.name or f"maintenance[{i}]", begins, ends, m.nodes, m.clusters,
                                           check.matchers(m.match, path + ("match",))))
    return tuple(maintenance)


def _owner_routing(doc: Owners, receivers: dict[str, Receiver], check: Checker, root: Path_) -> OwnerRouting:
    """``owners``: how the owning team is found, and the receivers it names (which must exist)."""
    owners = OwnerRouting(
        labels=doc.labels or OwnerRouting().labels,
        namespaces=tuple((str(k), str(v)) for k, v in doc.namespaces.items()),
        teams=tuple((str(k), str(v)) for k, v in doc.teams.items()),
        default=doc.default, use_channels=doc.use_channels,
    )
    for team, rname in owners.teams:
        if rname not in receivers:
            check.problem(root + ("teams", team), f"unknown receiver {rname!r}")
    if owners.default and owners.default not in receivers:
        check.problem(root + ("default",), f"unknown receiver {owners.default!r}")
    return owners


def _routes(docs: tuple[RouteRule, ...], receivers: dict[str, Receiver], windows: dict[str, TimeWindow],
            check: Checker, root: Path_) -> tuple[Route, ...]:
    """``routes``, in order; each names known receivers and mute windows."""
    routes = []
    for i, r in enumerate(docs):
        path, receiver = root + (i,), str(r.receiver)
        if receiver and receiver not in receivers:
            check.problem(path + ("receiver",), f"unknown receiver {receiver!r}")
        if not receiver and not r.owners:
            check.problem(path, "a route needs a receiver, or owners: true")
        for key, names in (("mute", r.mute), ("active", r.active)):
            for j, name in enumerate(names):
                if name not in windows:
                    check.problem(path + (key, j), f"unknown mute window {name!r}")
        escalate = _escalation(r.escalate, check, path + ("escalate",)) if r.escalate else None
        routes.append(Route(
            name=r.name, matchers=check.matchers(r.match, path + ("match",)), receiver=receiver, owners=r.owners,
            continue_=r.continue_, mute=tuple(map(str, r.mute)), active=tuple(map(str, r.active)), escalate=escalate,
        ))
    return tuple(routes)


def _escalation(doc: Escalate, check: Checker, path: Path_) -> Escalation:
    return Escalation(doc.after, ROUTING_KEY.name(str(doc.routing_key), check.problem, path + ("routing_key",)))


def _cordon_policy(doc: Cordoned, check: Checker, path: Path_) -> CordonPolicy:
    """The cordon section (its defaults: the declaration's, alertd/rules/routing_section.py)."""
    return CordonPolicy(
        doc.action, doc.severity,
        expected=tuple(check.matchers(m, path + ("expected", i)) for i, m in enumerate(doc.expected)),
        pending=tuple(Pending(check.matchers(p.match, path + ("pending", i, "match")), p.lag)
                      for i, p in enumerate(doc.pending)))
