"""The engine on a virtual clock: what ``alertd test`` and ``alertd replay`` run.

It does what the service does with received alerts, minus I/O: drop
redeliveries by the inbox key, ingest at the arrival time, evaluate time-based
rules (hold-downs, the watchdog) on a tick every second, and hand every change
to the router. Instead of ticking every second through idle time it jumps to
the next second at which a tick can change something, which gives the same
result: a tick changes nothing unless a hold-down has passed or the heartbeat is
overdue.

Order within one instant: alerts arriving at time t are ingested first, then the
tick at t (if t is on the one-second grid) runs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterable

from alertd.app.notifiers import build_router as build_service_router
from alertd.app.verdicts import gpu_uuids, judge_change, to_judge
from alertd.config.settings import Config
from alertd.engine.watchdog import PIPELINE_KEY
from alertd.engine.pipeline import Engine
from alertd.engine.response import repair_due
from alertd.core.model import Alert, Change, Incident
from alertd.core.vocabulary import EventKind
from alertd.engine.normalize import NormalizeConfig
from alertd.notify.router import ConsoleRouter, Router
from alertd.receive.payload import delivery_key
from alertd.rules.history import longest_lookback
from alertd.rules.ruleset import RuleSet, load_rules
from alertd.store.base import OutboxItem
from alertd.store.history_snapshot import snapshot_of

STEP = timedelta(seconds=1)


def load_rule_set(paths: Iterable[Path | str]) -> RuleSet:
    """The rules as the service loads them, routing section included (raises InvalidDocument)."""
    return load_rules(list(paths))


def build_router(rules: RuleSet, cfg: Config | None = None) -> ConsoleRouter | Router:
    """The router for a dry run.

    With a config: exactly what the service would build (targets whose notifier
    is not configured fall back to the console). Without one: the routing
    section's router as if every integration were configured, so the output
    names the real targets; the console router when there is no routing section.
    """
    if cfg is not None:
        return build_service_router(cfg, rules)
    if rules.routing is not None:
        return Router(rules.routing, reopens_within=rules.correlation.reopens_within)
    return ConsoleRouter()


def folded_by(inc: Incident, when: datetime) -> bool:
    """Was the incident part of a fleet incident at ``when``? (Notifiers then drop its first post.) Judged by
    its timeline, as the notifier saw it then: a node that left its fleet later (planned work, a failed
    repair) was still folded when an item held for it came due before."""
    moves = [e for e in inc.timeline if e.kind in (EventKind.FOLDED_INTO_FLEET, EventKind.LEFT_FLEET) and e.at <= when]
    return bool(moves) and moves[-1].kind == EventKind.FOLDED_INTO_FLEET


@dataclass(slots=True)
class Sent:
    """One outbox item the router produced, and when."""

    at: datetime
    item: OutboxItem


class VirtualRun:
    def __init__(self, rules: RuleSet, start: datetime, *, router: ConsoleRouter | Router | None = None,
                 ncfg: NormalizeConfig | None = None, step: timedelta = STEP):
        self.rules = rules
        self.engine = Engine(rules, ncfg)
        self.router = router if router is not None else ConsoleRouter()
        self.start, self.now, self.step = start, start, step
        self.incidents: dict[str, Incident] = {}  # every incident opened so far, in opening order
        self._past: dict[str, dict[str, Incident]] = {}  # node or GPU UUID -> its incidents (the history judge's)
        self.sent: list[Sent] = []
        self.seen: set[str] = set()
        self.received = 0
        self.duplicates = 0
        self._ticked: datetime | None = None
        self._again: datetime | None = None

    # ----- time -----

    def _grid(self, t: datetime, *, after: bool = False) -> datetime:
        """The first tick time >= t (> t with after) on the grid start + k*step."""
        k = (t - self.start) / self.step
        n = math.floor(k) + 1 if after else math.ceil(k)
        return self.start + self.step * n

    def next_due(self) -> datetime | None:
        """The next tick time at which a tick can change something."""
        st, corr = self.engine.state, self.rules.correlation
        found = [self._grid(inc.quiet_since + corr.hold_down) for inc in st.incidents.values() if inc.quiet_since]
        found += [self._grid(due) for inc in st.incidents.values()
                  if (due := repair_due(inc, corr.response)) is not None]  # a repair that failed
        if st.heartbeat_at is not None and PIPELINE_KEY not in st.by_key:
            found.append(self._grid(st.heartbeat_at + corr.watchdog.timeout, after=True))
        if self._again is not None:
            found.append(self._again)
        if self._ticked is not None:
            found = [t for t in found if t > self._ticked]
        return min(found, default=None)

    def tick(self, at: datetime) -> list[Change]:
        changes = self.engine.tick(at)
        self._record(changes, at)
        self._ticked = at
        self._again = self._grid(at, after=True) if changes else None  # e.g. a fleet closing after its children
        self.now = max(self.now, at)
        return changes

    def evaluate(self, at: datetime) -> list[Change]:
        """Run time-based rules at ``at`` (off the one-second grid too), unless that already happened."""
        self.advance(at)
        return [] if self._ticked == at else self.tick(at)

    def advance(self, until: datetime, *, inclusive: bool = True) -> None:
        """Run every tick up to ``until`` (or just before it)."""
        while (due := self.next_due()) is not None and (due < until or (inclusive and due == until)):
            self.tick(due)
        self.now = max(self.now, until)

    # ----- alerts -----

    def receive(self, alerts: list[Alert], at: datetime) -> list[Change]:
        """One webhook's alerts arriving at ``at``: ticks before it run first, redeliveries are dropped."""
        self.advance(at, inclusive=False)
        watchdogs = set(self.rules.correlation.watchdog.alertnames)
        fresh = []
        for alert in alerts:
            alert.received_at = alert.received_at or at
            key = delivery_key(alert)
            if alert.name in watchdogs:
                key += f"|{alert.received_at.timestamp():.6f}"
            self.received += 1
            if key in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(key)
            fresh.append(alert)
        changes = self.engine.ingest(fresh, at) if fresh else []
        self._record(changes, at)
        return changes

    def act(self, action: str, incident_id: str, actor: str, at: datetime) -> list[Change]:
        """A person acknowledges or resolves an incident (Slack button, API) at ``at``."""
        self.advance(at, inclusive=False)
        corr = self.engine.correlator
        changes = (corr.acknowledge if action == "acknowledge" else corr.resolve)(incident_id, actor, at)
        self._record(changes, at)
        return changes

    def _record(self, changes: list[Change], at: datetime) -> None:
        if not changes:
            return
        for c in changes:
            self.incidents.setdefault(c.incident.id, c.incident)
        self._judge(changes, at)
        self.sent.extend(Sent(at, item) for item in self.router.route(changes, at))

    def _judge(self, changes: list[Change], at: datetime) -> None:
        """The history judge between correlation and routing, as the service's processor runs it
        (alertd/app/verdicts.py), over the incidents of this run instead of the store."""
        rules = tuple(r for r in self.rules.history if r.action)
        for c in changes:
            for key in (c.incident.node, *gpu_uuids(c.incident)):
                if key and not c.incident.fleet:
                    self._past.setdefault(key, {})[c.incident.id] = c.incident
        if not rules:
            return
        since = at - longest_lookback(rules)
        for c in to_judge(changes):
            inc, uuids = c.incident, gpu_uuids(c.incident)
            past = {i.id: i for key in (inc.node, *uuids) for i in self._past.get(key, {}).values()}
            judge_change(c, snapshot_of(past.values(), uuids, inc.node, since, inc.id), rules, at)

    def outcomes(self) -> list[tuple[Sent, str]]:
        """Every outbox item in delivery order with what would become of it: "" (sent) or why not.

        Items that only update what was already posted (muted or suppressed
        changes) reach no new target; an escalation is skipped when the
        incident was acknowledged or resolved before it was due.
        """
        posted: set[tuple[str, str]] = set()
        out: list[tuple[Sent, str]] = []
        for sent in sorted(self.sent, key=lambda s: s.item.due_at):
            item = sent.item
            target = (item.incident_id, item.target.main)
            inc = self.incidents.get(item.incident_id)
            if item.due_at > self.now:
                fate = "not due yet"
            elif item.payload.only_if_posted and target not in posted:
                fate = "nothing posted there before: skipped"
            elif target not in posted and inc is not None and folded_by(inc, item.due_at):
                fate = f"folded into fleet incident {inc.parent_id} before it was posted: dropped"
            elif item.intent == "escalate" and inc is not None and any(
                    e.kind in (EventKind.ACKNOWLEDGED, EventKind.RESOLVED) and e.at <= item.due_at for e in inc.timeline):
                fate = "acknowledged or resolved in time: skipped"
            else:
                fate = ""
                posted.add(target)
            out.append((sent, fate))
        return out

    def delivered_targets(self, incident_id: str) -> set[str]:
        """Targets that would have received something about the incident by now (``|sub`` suffixes dropped)."""
        return {s.item.target.main for s, fate in self.outcomes() if not fate and s.item.incident_id == incident_id}

    def open_incidents(self) -> list[Incident]:
        return [inc for inc in self.incidents.values() if inc.is_open]
