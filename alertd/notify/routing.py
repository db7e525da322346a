"""Routing: which receivers hear about an incident change, and when.

The ``routing:`` section of a rule file (schema: schemas/routing.schema.json)
names receivers (Slack channels, a PagerDuty routing key, the console) and an
ordered list of routes with Alertmanager matchers over incident fields. The
first matching route wins unless it says ``continue: true``. On top of that:

* mute windows (recurring weekday/time ranges in a time zone) per route,
* maintenance windows (absolute start/end) per node or cluster,
* cordoned nodes: mute their incidents or downgrade their severity,
* job owners: application Xids go to the owning team's receiver,
* escalation: "page again on another routing key if nobody acknowledged
  within N minutes", scheduled as outbox work with a future due time.

``decide`` is a pure function of the incident and a time; ``Router.route``
turns decisions into outbox items. Suppressed changes still keep messages that
were already sent up to date (edits, acknowledge, resolve) but never post,
page or escalate anew.
"""
from __future__ import annotations

import fnmatch
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from alertd.matchers import Matcher, match_all
from alertd.model import CLOSED, FIRING, OPEN, SEVERITY_RANK, Change, Event, Incident, iso

log = logging.getLogger(__name__)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
KEY_REF = re.compile(r"^\$\{([A-Za-z0-9_.-]+)\}$")
CORDON_KIND = "node_cordoned"

# Timeline kinds that are shown by editing the message only; every other kind is also a thread reply.
QUIET_KINDS = frozenset({"opened", "alert_resolved", "alert_refired", "all_alerts_resolved", "severity_changed",
                         "folded_into_fleet"})
# Changes that matter to a pager once the incident has been sent there.
PAGER_KINDS = frozenset({"opened", "severity_changed", "classification_upgraded", "acknowledged", "resolved"})
# A fleet child is not notified on its own; only these changes still reach messages already sent for it.
CHILD_KINDS = frozenset({"folded_into_fleet", "acknowledged", "resolved"})


# ----- typed rules -----

@dataclass(frozen=True, slots=True)
class Receiver:
    name: str
    slack_channels: tuple[str, ...] = ()
    pagerduty_key: str = ""  # the NAME of a routing key in notify.pagerduty.routing_keys, never the key itself
    console: bool = False

    def targets(self) -> list[str]:
        out = [f"slack:{c}" for c in self.slack_channels]
        if self.pagerduty_key:
            out.append(f"pagerduty:{self.pagerduty_key}")
        if self.console:
            out.append("console")
        return out


@dataclass(frozen=True, slots=True)
class Escalation:
    after: timedelta
    routing_key: str  # routing key name


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
class TimeRange:
    start: int  # minutes after midnight
    end: int  # exclusive; end <= start wraps past midnight (the tail belongs to the next day)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A recurring window, like Alertmanager's time_intervals: weekdays and times of day in a zone."""

    name: str
    tz: ZoneInfo
    weekdays: frozenset[int] = frozenset(range(7))
    times: tuple[TimeRange, ...] = ()

    def contains(self, now: datetime) -> bool:
        local = now.astimezone(self.tz)
        minute = local.hour * 60 + local.minute
        day, prev = local.weekday(), (local.weekday() - 1) % 7
        if not self.times:
            return day in self.weekdays
        for r in self.times:
            if r.start < r.end:
                if day in self.weekdays and r.start <= minute < r.end:
                    return True
            else:  # wraps midnight: [start, 24:00) today, [00:00, end) belongs to the day before
                if day in self.weekdays and minute >= r.start:
                    return True
                if prev in self.weekdays and minute < r.end:
                    return True
        return False


@dataclass(frozen=True, slots=True)
class Maintenance:
    name: str
    start: datetime
    end: datetime
    nodes: tuple[str, ...] = ()  # glob patterns
    clusters: tuple[str, ...] = ()
    matchers: tuple[Matcher, ...] = ()

    def covers_node(self, cluster: str, node: str, fields: Mapping[str, str], now: datetime) -> bool:
        if not (self.start <= now < self.end):
            return False
        if self.clusters and cluster not in self.clusters:
            return False
        if self.nodes and not any(fnmatch.fnmatchcase(node, p) for p in self.nodes):
            return False
        return match_all(self.matchers, {**fields, "node": node})


@dataclass(frozen=True, slots=True)
class CordonPolicy:
    action: str = "downgrade"  # mute | downgrade | notify
    severity: str = "info"


@dataclass(frozen=True, slots=True)
class Owners:
    labels: tuple[str, ...] = ("team", "label_team", "owner", "label_owner")
    namespaces: tuple[tuple[str, str], ...] = ()  # (glob, team), first match wins
    teams: tuple[tuple[str, str], ...] = ()  # team -> receiver
    default: str = ""
    use_channels: bool = False  # a Slack channel named by the owner (enrichment: namespace/workload annotation)

    def team_for(self, inc: Incident) -> str:
        for name in self.labels:
            for m in _members_in_order(inc):
                if m.labels.get(name):
                    return m.labels[name]
        for team in _annotation_teams(inc.annotations.get("owners"), self.labels):
            return team
        namespaces = {inc.namespace} | {m.subject.namespace for m in inc.members.values()}
        namespaces.discard("")
        for pattern, team in self.namespaces:
            for ns in sorted(namespaces):
                if fnmatch.fnmatchcase(ns, pattern):
                    return team
        return ""

    def channel_for(self, inc: Incident) -> str:
        value = inc.annotations.get("owners")
        for o in value if isinstance(value, list) else [value]:
            if isinstance(o, dict) and isinstance(o.get("channel"), str) and o["channel"].strip():
                return o["channel"].strip()
        return ""

    def receiver_for(self, inc: Incident, receivers: Mapping[str, Receiver]) -> tuple[str, str]:
        """(receiver name, team): the team's receiver, a receiver named like the team, the owner's own
        channel (``channel:<name>``, with use_channels), or the default."""
        team = self.team_for(inc)
        mapping = dict(self.teams)
        if team and team in mapping:
            return mapping[team], team
        if team and team in receivers:
            return team, team
        channel = self.channel_for(inc) if self.use_channels else ""
        if channel:
            return f"channel:{channel}", team
        return self.default, team


@dataclass(frozen=True, slots=True)
class Routing:
    receivers: dict[str, Receiver]
    routes: tuple[Route, ...] = ()
    default_receiver: str = ""
    windows: dict[str, TimeWindow] = field(default_factory=dict)
    maintenance: tuple[Maintenance, ...] = ()
    cordoned: CordonPolicy = CordonPolicy()
    owners: Owners = Owners()

    def key_names(self) -> set[str]:
        names = {r.pagerduty_key for r in self.receivers.values() if r.pagerduty_key}
        names |= {r.escalate.routing_key for r in self.routes if r.escalate}
        return names


def default_routing(channel: str) -> Routing:
    """Everything to one Slack channel: used when Slack is configured but no routing section exists."""
    return Routing(receivers={"default": Receiver("default", slack_channels=(channel,))}, default_receiver="default")


# ----- incident fields -----

def _members_in_order(inc: Incident):
    """Leading before folded, firing before resolved, oldest first."""
    return sorted(inc.members.values(), key=lambda m: (m.folded, m.status != FIRING, m.starts_at, m.fingerprint))


def _annotation_teams(value: Any, label_names: Iterable[str]) -> list[str]:
    """Teams from the ``owners`` annotation, whatever shape enrichment gave it."""
    if not value:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, dict):
        for key in ("team", "teams", "owner", "owners"):
            if value.get(key):
                return _annotation_teams(value[key], label_names)
        labels = value.get("labels") if isinstance(value.get("labels"), dict) else value
        return [str(labels[n]) for n in label_names if isinstance(labels.get(n), str) and labels.get(n)]
    if isinstance(value, list):
        out: list[str] = []
        for v in value:
            out.extend(_annotation_teams(v, label_names))
        return out
    return []


def incident_fields(inc: Incident) -> dict[str, str]:
    """What route matchers see: member labels (leading, firing members first) plus incident fields."""
    out: dict[str, str] = {}
    for m in _members_in_order(inc):
        for k, v in m.labels.items():
            out.setdefault(k, v)
    primary = inc.primary
    gpus = [g.get("uuid") or g.get("pci_bus_id") or g.get("index", "") for g in inc.gpus]
    out.update(
        id=inc.id, severity=inc.severity, category=inc.category, status=inc.status, group=inc.group,
        cluster=inc.cluster, node=inc.node, namespace=inc.namespace, pod=inc.pod,
        signal=primary.kind if primary else "", signals=",".join(inc.signals),
        xid=str(primary.xid) if primary and primary.xid else (str(inc.xids[0]) if inc.xids else ""),
        xids=",".join(map(str, inc.xids)), action=primary.action if primary else "",
        gpu=gpus[0] if len(gpus) == 1 else ",".join(gpus), fleet="true" if inc.fleet else "false",
        title=inc.title,
    )
    return out


def _nodes(inc: Incident) -> list[str]:
    return list(inc.nodes) if inc.fleet else [inc.node]


# ----- decisions -----

@dataclass(slots=True)
class Hit:
    receiver: str
    route: str
    muted: str = ""  # why this route's receivers are muted now
    team: str = ""
    escalate: Escalation | None = None


@dataclass(slots=True)
class Decision:
    hits: list[Hit] = field(default_factory=list)
    escalations: list[Escalation] = field(default_factory=list)
    suppressed: str = ""  # why everything is muted (maintenance, cordon)
    note: str = ""  # shown on the message, e.g. a downgrade
    severity: str = ""  # effective severity (after a cordon downgrade)

    @property
    def receivers(self) -> list[str]:
        return [h.receiver for h in self.hits]

    @property
    def active_receivers(self) -> list[str]:
        return [h.receiver for h in self.hits if not h.muted and not self.suppressed]


def cordon_since(inc: Incident) -> datetime | None:
    starts = [m.starts_at for m in inc.members.values() if m.signal.kind == CORDON_KIND and m.status == FIRING]
    return min(starts) if starts else None


def first_problem_at(inc: Incident) -> datetime:
    starts = [m.starts_at for m in inc.members.values() if m.signal.kind != CORDON_KIND]
    return min(starts) if starts else inc.opened_at


def decide(routing: Routing, inc: Incident, now: datetime, *, cordoned_at: datetime | None = None) -> Decision:
    """Route one incident at ``now``. ``cordoned_at``: when its node was cordoned, if known from elsewhere."""
    fields = incident_fields(inc)
    decision = Decision(severity=inc.severity)
    for m in routing.maintenance:
        nodes = [n for n in _nodes(inc) if n] or [""]
        if all(m.covers_node(inc.cluster, n, fields, now) for n in nodes):
            decision.suppressed = f"maintenance window {m.name!r} until {iso(m.end)}"
            break
    since = min((t for t in (cordon_since(inc), cordoned_at) if t is not None), default=None)
    policy = routing.cordoned
    if since is not None and since <= first_problem_at(inc) and policy.action != "notify":
        where = inc.node or "the node"
        if policy.action == "mute":
            decision.suppressed = decision.suppressed or f"{where} is cordoned"
        elif SEVERITY_RANK.get(policy.severity, 0) < SEVERITY_RANK.get(inc.severity, 0):
            decision.note = f"severity {inc.severity} downgraded to {policy.severity}: {where} was cordoned first"
            decision.severity = policy.severity
            fields["severity"] = policy.severity
    matched = False
    for i, route in enumerate(routing.routes):
        if not match_all(route.matchers, fields):
            continue
        matched = True
        muted = ""
        for name in route.mute:
            w = routing.windows.get(name)
            if w is not None and w.contains(now):
                muted = f"mute window {name!r}"
                break
        if not muted and route.active and not any(
                routing.windows[n].contains(now) for n in route.active if n in routing.windows):
            muted = f"outside {', '.join(route.active)}"
        name = route.name or f"routes[{i}]"
        escalate = route.escalate if not muted else None
        if route.owners:
            receiver, team = routing.owners.receiver_for(inc, routing.receivers)
            receiver = receiver or route.receiver
            if receiver:
                decision.hits.append(Hit(receiver, name, muted, team, escalate))
        elif route.receiver:
            decision.hits.append(Hit(route.receiver, name, muted, escalate=escalate))
        if escalate is not None:
            decision.escalations.append(escalate)
        if not route.continue_:
            break
    if not matched and routing.default_receiver:
        decision.hits.append(Hit(routing.default_receiver, "default"))
    return decision


# ----- the router -----

def change_payload(change: Change) -> dict:
    return {
        "kinds": change.kinds,
        "urgent": change.urgent,
        "incident": change.incident.to_dict(with_members=False),
        "events": [e.to_dict() for e in change.events],
    }


def _event_payload(e: Event) -> dict:
    return e.to_dict()


class Router:
    """Changes -> outbox items. Keeps a little memory (cordoned nodes, targets used, escalations
    scheduled) that only avoids redundant rows: notifiers stay correct without it after a restart."""

    def __init__(self, routing: Routing, *, debounce: timedelta = timedelta(seconds=2),
                 available: Iterable[str] = ("console", "slack", "pagerduty"), console_mirror: bool = False):
        self.routing = routing  # targets whose notifier is not available fall back to the console, if available
        self.debounce = debounce
        self.available = set(available)
        self.console_mirror = console_mirror
        self._targets: dict[str, set[str]] = {}  # incident -> targets routed to so far
        self._escalated: dict[str, set[str]] = {}  # incident -> escalation targets scheduled
        self._cordoned: dict[tuple[str, str], tuple[datetime, str]] = {}  # (cluster, node) -> (since, incident)

    def set_rules(self, rules: Any) -> None:
        routing = getattr(rules, "routing", None)
        if isinstance(routing, Routing):
            self.routing = routing

    # ----- memory -----

    def _track_cordon(self, inc: Incident) -> None:
        for key, (_, source) in list(self._cordoned.items()):
            if source == inc.id and (inc.status == CLOSED or cordon_since(inc) is None):
                del self._cordoned[key]
        since = cordon_since(inc)
        if since is not None and inc.status != CLOSED and inc.node:
            key = (inc.cluster, inc.node)
            if key not in self._cordoned or self._cordoned[key][0] > since:
                self._cordoned[key] = (since, inc.id)

    def cordoned_at(self, inc: Incident) -> datetime | None:
        if inc.fleet or not inc.node:
            return None
        hit = self._cordoned.get((inc.cluster, inc.node))
        return hit[0] if hit else None

    # ----- routing -----

    def _receiver(self, name: str) -> Receiver | None:
        if name.startswith("channel:"):  # an owner's own channel
            return Receiver(name, slack_channels=(name.split(":", 1)[1],))
        return self.routing.receivers.get(name)

    def _target(self, target: str) -> str:
        if target.split(":", 1)[0] in self.available:
            return target
        return "console" if "console" in self.available else ""

    def route(self, changes: Iterable[Change], now: datetime) -> list:
        from alertd.store.base import OutboxItem  # the store imports the engine, which imports the rules

        items: list[OutboxItem] = []
        for change in changes:
            try:
                items.extend(OutboxItem(*spec) for spec in self._route_one(change, now))
            except Exception:  # a routing bug must not stop the engine: the change still reaches the log
                log.exception("routing failed for %s; logging the change to the console instead", change.incident.id)
                items.append(OutboxItem(change.incident.id, "console", "log", change_payload(change), now))
            finally:
                if change.incident.status == CLOSED:
                    self._targets.pop(change.incident.id, None)
                    self._escalated.pop(change.incident.id, None)
        return items

    def _route_one(self, change: Change, now: datetime) -> list[tuple]:
        inc = change.incident
        self._track_cordon(inc)
        kinds = set(change.kinds)
        child = bool(inc.parent_id)
        if child and not kinds & CHILD_KINDS:
            return []
        decision = decide(self.routing, inc, now, cordoned_at=self.cordoned_at(inc))
        known = self._targets.setdefault(inc.id, set())
        out: list[tuple] = []
        # Each target once; a target reached through a muted route and a loud one is loud.
        chosen: dict[str, tuple[Hit, bool]] = {}
        for hit in decision.hits:
            receiver = self._receiver(hit.receiver)
            if receiver is None:
                continue
            quiet = child or bool(hit.muted or decision.suppressed)
            for raw in receiver.targets():
                target = self._target(raw)
                if target and (target not in chosen or (chosen[target][1] and not quiet)):
                    chosen[target] = (hit, quiet)
        seen: set[str] = set(chosen)
        loud: set[str] = set()
        for target, (hit, quiet) in chosen.items():
            why = decision.suppressed or hit.muted
            out.extend(self._items(target, change, now, decision, hit, quiet=quiet, why=why, known=known))
            if not quiet:
                known.add(target)
                loud.add(target)
        # Messages sent earlier to targets this change no longer routes to are still kept current.
        for target in sorted(known - seen):
            out.extend(self._items(target, change, now, decision, None, quiet=True, why="", known=known))
        if self.console_mirror and "console" not in seen:
            out.append((inc.id, "console", "log", change_payload(change), now))
        if not child and not decision.suppressed:
            out.extend(self._escalations(change, now, decision, loud))
        return out

    def _items(self, target: str, change: Change, now: datetime, decision: Decision, hit: Hit | None, *,
               quiet: bool, why: str, known: set[str]) -> list[tuple]:
        inc = change.incident
        kind = target.split(":", 1)[0]
        common = {
            "kinds": change.kinds,
            "urgent": change.urgent,
            "only_if_posted": quiet,
            "note": decision.note,
            "muted": why,
            "route": hit.route if hit else "",
            "receiver": hit.receiver if hit else "",
            "team": hit.team if hit else "",
        }
        if kind == "console":
            if quiet:
                return []
            return [(inc.id, target, "log", {**change_payload(change), "note": decision.note}, now)]
        if kind == "slack":
            opening = "opened" in change.kinds or (target not in known and not quiet)
            due = now if (opening or change.urgent or not self.debounce) else now + self.debounce
            out = [(inc.id, target, "update", common, due)]
            thread = [e for e in change.events if e.kind not in QUIET_KINDS]
            if thread and not quiet and not opening:
                out.append((inc.id, target, "thread", {**common, "events": [_event_payload(e) for e in thread]}, now))
            return out
        if kind == "pagerduty":
            if (target in known or quiet) and not set(change.kinds) & PAGER_KINDS:
                return []
            payload = {**common, "routing_key": target.split(":", 1)[1], "severity": decision.severity}
            return [(inc.id, target, "sync", payload, now)]
        return [(inc.id, target, "update", common, now)]

    def _escalations(self, change: Change, now: datetime, decision: Decision, loud: set[str]) -> list[tuple]:
        inc = change.incident
        scheduled = self._escalated.setdefault(inc.id, set())
        out: list[tuple] = []
        # Escalation targets already paged hear about acknowledge and resolve.
        if change.urgent:
            for target in sorted(t for t in scheduled if t.startswith("pagerduty:")):
                out.append((inc.id, target, "sync", {"kinds": change.kinds, "urgent": True, "only_if_posted": True,
                                                     "routing_key": target.split(":", 1)[1], "escalation": True,
                                                     "severity": decision.severity, "note": decision.note}, now))
        if inc.status != OPEN:
            return out
        for hit in decision.hits:
            esc = hit.escalate
            receiver = self._receiver(hit.receiver)
            if esc is None or receiver is None:
                continue
            marker = f"escalation:{esc.routing_key}"
            if marker in scheduled:
                continue
            scheduled.add(marker)
            due = now + esc.after
            payload = {"after": esc.after.total_seconds(), "routing_key": esc.routing_key, "escalation": True,
                       "severity": decision.severity, "note": decision.note, "kinds": ["escalated"]}
            target = self._target(f"pagerduty:{esc.routing_key}")
            if target.startswith("pagerduty:"):
                scheduled.add(target)
                out.append((inc.id, target, "escalate", payload, due))
            # The note goes into the thread of the paging receiver's own messages.
            for st in sorted(t for t in map(self._target, receiver.targets()) if t.startswith("slack:") and t in loud):
                out.append((inc.id, f"{st}|escalation", "escalate", payload, due))
        return out


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


def _weekdays(items: Any, check: Any, path: tuple) -> frozenset[int]:
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


def _instant(value: Any, check: Any, path: tuple) -> datetime | None:
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


def _key_name(value: str, check: Any, path: tuple) -> str:
    m = KEY_REF.match(str(value))
    if not m:
        check.problem(path, "routing_key must name a key from notify.pagerduty.routing_keys, like \"${gpu-infra}\"; "
                            "never put the secret key in a rule file")
        return ""
    return m.group(1)


def load_routing(data: dict, check: Any) -> Routing:
    """Build typed Routing from a schema-valid ``routing`` section; report semantic problems to ``check``."""
    root = ("routing",)
    receivers: dict[str, Receiver] = {}
    for i, r in enumerate(data.get("receivers") or []):
        path = root + ("receivers", i)
        name = r["name"]
        if name in receivers:
            check.problem(path + ("name",), f"duplicate receiver name {name!r}")
        slack = r.get("slack")
        channels: list[str] = []
        if isinstance(slack, str):
            channels = [slack]
        elif isinstance(slack, dict):
            channels = list(slack.get("channels") or []) + ([slack["channel"]] if slack.get("channel") else [])
        pd = r.get("pagerduty") or {}
        key = _key_name(pd["routing_key"], check, path + ("pagerduty", "routing_key")) if pd else ""
        receivers[name] = Receiver(name, tuple(dict.fromkeys(channels)), key, bool(r.get("console", False)))

    windows: dict[str, TimeWindow] = {}
    for i, w in enumerate(data.get("mute_windows") or []):
        path = root + ("mute_windows", i)
        if w["name"] in windows:
            check.problem(path + ("name",), f"duplicate window name {w['name']!r}")
        try:
            tz = ZoneInfo(w.get("time_zone", "UTC"))
        except (ZoneInfoNotFoundError, ValueError):
            check.problem(path + ("time_zone",), f"unknown time zone {w.get('time_zone')!r} (use an IANA name like Europe/Berlin)")
            tz = ZoneInfo("UTC")
        ranges = []
        for j, t in enumerate(w.get("times") or []):
            start, end = _time_of_day(t["start"]), _time_of_day(t["end"])
            if start is None or end is None:
                check.problem(path + ("times", j), "times need start and end as \"HH:MM\" (quote them)")
                continue
            if start == end:
                check.problem(path + ("times", j), "start and end are equal: the range is empty")
                continue
            ranges.append(TimeRange(start, end % 1440 if end != 1440 else 1440))
        windows[w["name"]] = TimeWindow(w["name"], tz, _weekdays(w.get("weekdays"), check, path + ("weekdays",)),
                                        tuple(ranges))

    maintenance = []
    for i, m in enumerate(data.get("maintenance") or []):
        path = root + ("maintenance", i)
        start, end = _instant(m["start"], check, path + ("start",)), _instant(m["end"], check, path + ("end",))
        if start and end and end <= start:
            check.problem(path + ("end",), "end must be after start")
        if not (m.get("nodes") or m.get("clusters") or m.get("match")):
            check.problem(path, "a maintenance window needs nodes, clusters or match (it would mute everything)")
        if start and end:
            maintenance.append(Maintenance(m.get("name", f"maintenance[{i}]"), start, end, tuple(m.get("nodes") or ()),
                                           tuple(m.get("clusters") or ()),
                                           check.matchers(m.get("match"), path + ("match",))))

    owners_doc = data.get("owners") or {}
    owners = Owners(
        labels=tuple(owners_doc.get("labels") or Owners().labels),
        namespaces=tuple((str(k), str(v)) for k, v in (owners_doc.get("namespaces") or {}).items()),
        teams=tuple((str(k), str(v)) for k, v in (owners_doc.get("teams") or {}).items()),
        default=owners_doc.get("default", ""),
        use_channels=bool(owners_doc.get("use_channels", False)),
    )
    for team, rname in owners.teams:
        if rname not in receivers:
            check.problem(root + ("owners", "teams", team), f"unknown receiver {rname!r}")
    if owners.default and owners.default not in receivers:
        check.problem(root + ("owners", "default"), f"unknown receiver {owners.default!r}")

    routes = []
    for i, r in enumerate(data.get("routes") or []):
        path = root + ("routes", i)
        receiver = r.get("receiver", "")
        if receiver and receiver not in receivers:
            check.problem(path + ("receiver",), f"unknown receiver {receiver!r}")
        if not receiver and not r.get("owners"):
            check.problem(path, "a route needs a receiver, or owners: true")
        for key in ("mute", "active"):
            for j, name in enumerate(r.get(key) or []):
                if name not in windows:
                    check.problem(path + (key, j), f"unknown mute window {name!r}")
        esc = None
        if r.get("escalate"):
            e = r["escalate"]
            esc = Escalation(check.duration(e.get("after"), path + ("escalate", "after"), timedelta(minutes=15)),
                             _key_name(e["routing_key"], check, path + ("escalate", "routing_key")))
        routes.append(Route(
            name=r.get("name", ""), matchers=check.matchers(r.get("match"), path + ("match",)), receiver=receiver,
            owners=bool(r.get("owners", False)), continue_=bool(r.get("continue", False)),
            mute=tuple(r.get("mute") or ()), active=tuple(r.get("active") or ()), escalate=esc,
        ))
    default = data.get("default_receiver", "")
    if default and default not in receivers:
        check.problem(root + ("default_receiver",), f"unknown receiver {default!r}")
    cordon = data.get("cordoned") or {}
    return Routing(
        receivers=receivers, routes=tuple(routes), default_receiver=default, windows=windows,
        maintenance=tuple(maintenance),
        cordoned=CordonPolicy(cordon.get("action", "downgrade"), cordon.get("severity", "info")),
        owners=owners,
    )


__all__ = [
    "Routing", "Receiver", "Route", "Escalation", "TimeWindow", "Maintenance", "CordonPolicy", "Owners",
    "Decision", "Hit", "Router", "decide", "incident_fields", "load_routing", "default_routing", "change_payload",
    "QUIET_KINDS",
]
