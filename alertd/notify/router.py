"""Changes -> outbox work.

Without a routing section every change goes to the console (``ConsoleRouter``).
With one, ``Router`` sends each change where ``route_incident`` says, keeps messages
already sent up to date, and schedules escalations as outbox items with a
future due time.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Iterable, TypedDict

from alertd.core.json_types import as_json
from alertd.core.outbox_items import Escalate, Intent, JsonDoc, OutboxItem, Page, Resolve, Show, Target, Timeline
from alertd.core.router_memory import ESCALATION, REOPENABLE, SENT, MemoryDelta, RouterMemory
from alertd.core.model import CLOSED, OPEN, Change, Incident, iso
from alertd.integrations.registry import INTEGRATIONS
from alertd.core.response_marks import REPAIR_FAILED, is_response, repair_failed
from alertd.core.vocabulary import EventKind as E
from alertd.integrations import registry
from alertd.notify.decision import RouteDecision, Hit, cordon_severity, muted_notes, route_incident
from alertd.rules.routing import Receiver, Routing, owner_channel
from alertd.rules.ruleset import RuleSet
from alertd.rules.windows import CORDON_KIND, cordon_since

log = logging.getLogger(__name__)

# Timeline kinds that are shown by editing the message only; every other kind is also a thread reply.
# A storm that doubled (storm_doubled) is a reply; its pages' update (storm_grew) edits the message only.
QUIET_KINDS = frozenset({E.OPENED, E.ALERT_RESOLVED, E.ALERT_REFIRED, E.ALL_ALERTS_RESOLVED, E.SEVERITY_CHANGED,
                         E.FOLDED_INTO_FLEET, E.NODES_JOINED, E.NODES_RESOLVED, E.NODE_UPDATED, E.STORM_PENDING,
                         E.STORM_GREW})
# Changes that matter to a pager once the incident has been sent there; the urgent ones bring a page along.
# storm_grew: the engine's rate-limited word that a fleet's pages should say its new node count.
PAGER_KINDS = frozenset({E.OPENED, E.SEVERITY_CHANGED, E.CLASSIFICATION_UPGRADED, E.ACKNOWLEDGED, E.RESOLVED,
                         E.REPAIR_FAILED, E.STORM_GREW})
URGENT_KINDS = frozenset({E.ACKNOWLEDGED, E.RESOLVED})
# A change made only of these is no news to a target that has heard nothing of the incident: it never opens
# a message or a page there (a cordon that resolves is not a first notification of the maintenance).
RESOLUTION_KINDS = frozenset({E.ALERT_RESOLVED, E.ALL_ALERTS_RESOLVED, E.NODES_RESOLVED, E.ACKNOWLEDGED, E.RESOLVED})
CONSOLE = Target.of("console")
# Changes after which routes may name new targets: a conversation already posted elsewhere hears of it.
ROUTE_CHANGING = frozenset({E.SEVERITY_CHANGED, E.CLASSIFICATION_UPGRADED})
# A fleet child is not notified on its own; only these changes still reach messages already sent for it.
CHILD_KINDS = frozenset({E.FOLDED_INTO_FLEET, E.SUSPECT_OF_JOB, E.ACKNOWLEDGED, E.RESOLVED})


def change_summary(change: Change) -> JsonDoc:
    """What a log line needs of the incident. Notifiers that show an incident read its current state from the
    store, so the payload stays small even for a fleet incident listing thousands of nodes."""
    inc = change.incident
    return {
        "id": inc.id, "key": inc.key, "status": inc.status, "severity": inc.severity, "category": inc.category,
        "title": inc.title, "cluster": inc.cluster, "node": inc.node, "signals": as_json(inc.signals),
        "xids": as_json(inc.xids),
        "firing": inc.firing, "memberCount": len(inc.members), "fleetNodes": len(inc.nodes),
    }


def change_payload(change: Change) -> Show:
    """A log line of the change, with no route: the console's own."""
    return Show(kinds=tuple(change.kinds), urgent=change.urgent, route="", receiver="", team="",
                incident=change_summary(change), events=tuple(e.to_dict() for e in change.events))


class Routed(TypedDict):
    """What one change routed to one target says in each item it makes there."""

    kinds: tuple[str, ...]
    urgent: bool
    only_if_posted: bool
    note: str
    muted: str
    route: str
    receiver: str
    team: str
    adopt: str


class ConsoleRouter:
    """Every change to the log; remembers nothing."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def route(self, changes: Iterable[Change], now: datetime) -> list[OutboxItem]:
        if not self.enabled:
            return []
        return [OutboxItem(c.incident.id, CONSOLE, Intent.SHOW, change_payload(c), now) for c in changes]

    def route_step(self, changes: Iterable[Change], now: datetime) -> tuple[list[OutboxItem], MemoryDelta]:
        return self.route(changes, now), MemoryDelta()

    def set_rules(self, rules: RuleSet) -> None:
        """Nothing to take: every change goes to the console whatever the rules say."""

    def restore(self, memory: RouterMemory) -> None:
        return None


class Router:
    """Changes -> outbox items. Remembers cordoned nodes, the targets each incident went to and the
    escalations scheduled (RouterMemory). ``route_step`` returns what a step changed in that memory;
    the service commits it with the step and ``restore``s the committed memory after a failed commit
    or on start, so a replayed step schedules its escalations again and a restart posts nothing twice."""

    def __init__(self, routing: Routing, *, debounce: timedelta = timedelta(seconds=2),
                 available: Iterable[str] = tuple(INTEGRATIONS), console_mirror: bool = False,
                 reopens_within: timedelta = timedelta(hours=3)):
        self.routing = routing  # targets whose notifier is not available fall back to the console, if available
        self.reopens_within = reopens_within  # how long a closed incident can reopen (the rules' correlation)
        self.debounce = debounce
        self.available = set(available)
        self.console_mirror = console_mirror
        self.memory = RouterMemory()
        self._delta = MemoryDelta()  # what the step being routed changed in memory
        # incident -> the cordons it shows, built from memory.cordons on first use: a change then costs the
        # same however many nodes a storm has cordoned, instead of a walk over all of them
        self._cordon_keys: dict[str, set[tuple[str, str]]] | None = None
        # fleet -> its node incidents as routed (the engine's own objects, kept current by it): what makes a
        # fleet cordon-aware. Derived, not remembered: after a restore a fleet knows the nodes routed since.
        self._children: dict[str, dict[str, Incident]] = {}
        self._judged: dict[str, tuple[int, datetime | None, str | None]] = {}  # node incident -> judgment

    # The memory's parts under the names routing code uses.
    @property
    def _targets(self) -> dict[str, set[str]]:
        return self.memory.sent

    @property
    def _escalated(self) -> dict[str, set[str]]:
        return self.memory.escalations

    @property
    def _cordoned(self) -> dict[tuple[str, str], tuple[datetime, str]]:
        return self.memory.cordons

    def restore(self, memory: RouterMemory) -> None:
        """Carry on from committed memory (start, failed commit, taking over from another instance)."""
        self.memory = memory
        self._cordon_keys = None
        self._children = {}
        self._judged = {}

    def set_rules(self, rules: RuleSet) -> None:
        """Route by reloaded rules; without a routing section the running one stays."""
        if rules.routing is not None:
            self.routing = rules.routing
            self._judged = {}  # judged by the rules before
        self.reopens_within = rules.correlation.reopens_within

    # ----- memory -----

    def _cordons_by_incident(self) -> dict[str, set[tuple[str, str]]]:
        if self._cordon_keys is None:
            self._cordon_keys = {}
            for key, (_, source) in self._cordoned.items():
                self._cordon_keys.setdefault(source, set()).add(key)
        return self._cordon_keys

    def _track_cordon(self, inc: Incident) -> None:
        shown = self._cordons_by_incident()
        since = cordon_since(inc)
        if inc.id in shown and (inc.status == CLOSED or since is None):
            for key in sorted(shown.pop(inc.id)):
                if self._cordoned.get(key, (None, ""))[1] == inc.id:
                    del self._cordoned[key]
                    self._delta.cordons[key] = None
        if since is not None and inc.status != CLOSED and inc.node:
            key = (inc.cluster, inc.node)
            before = self._cordoned.get(key)
            if before is None or before[0] > since:
                if before is not None:
                    shown.get(before[1], set()).discard(key)
                self._cordoned[key] = (since, inc.id)
                shown.setdefault(inc.id, set()).add(key)
                self._delta.cordons[key] = (since, inc.id)

    def _mark(self, marks: set[str], inc_id: str, role: str, value: str) -> None:
        if value not in marks:
            marks.add(value)
            self._delta.marks.add((inc_id, role, value))

    def _track_child(self, inc: Incident) -> None:
        if inc.parent_id:
            self._children.setdefault(inc.parent_id, {})[inc.id] = inc
        if inc.status == CLOSED and inc.fleet:
            for child in self._children.pop(inc.id, {}):
                self._judged.pop(child, None)

    def _fleet_children(self, inc: Incident) -> list[tuple[str, str | None]] | None:
        """The fleet's node incidents as ``fleet_severity`` takes them. Each node's judgment is kept until the
        node incident or its cordon changes, so a fleet change costs a lookup per node, not a walk of its
        alerts."""
        known = self._children.get(inc.id) if inc.fleet else None
        if not known or (CORDON_KIND not in inc.signals and not self._cordoned):
            return None  # no node of it cordoned: a storm of thousands of nodes costs nothing here
        out: list[tuple[str, str | None]] = []
        for child in known.values():
            if child.parent_id != inc.id:
                continue  # it left the fleet since (planned work, a failed repair)
            at = self.cordoned_at(child)
            kept = self._judged.get(child.id)
            if kept is None or kept[:2] != (child.version, at):
                kept = self._judged[child.id] = (child.version, at,
                                                 cordon_severity(self.routing.cordoned, child, at))
            out.append((child.severity, kept[2]))
        return out

    def cordoned_at(self, inc: Incident) -> datetime | None:
        if inc.fleet or not inc.node:
            return None
        hit = self._cordoned.get((inc.cluster, inc.node))
        return hit[0] if hit else None

    # ----- routing -----

    def _receiver(self, name: str) -> Receiver | None:
        if name.startswith("channel:"):  # an owner's own channel
            return owner_channel(name.split(":", 1)[1])
        return self.routing.receivers.get(name)

    def _target(self, target: Target) -> Target | None:
        """The target, or the console when its integration is not configured (if the console is)."""
        if target.kind in self.available:
            return target
        return CONSOLE if CONSOLE.kind in self.available else None

    def route(self, changes: Iterable[Change], now: datetime) -> list[OutboxItem]:
        return self.route_step(changes, now)[0]

    def route_step(self, changes: Iterable[Change], now: datetime) -> tuple[list[OutboxItem], MemoryDelta]:
        """Outbox items for one engine step, and what routing them changed in memory."""
        self._delta = delta = MemoryDelta()
        items: list[OutboxItem] = []
        for change in changes:
            try:
                items.extend(self._route_one(change, now))
            except Exception:  # a routing bug must not stop the engine: the change still reaches the log
                log.exception("routing failed for %s; logging the change to the console instead", change.incident.id)
                items.append(OutboxItem(change.incident.id, CONSOLE, Intent.SHOW, change_payload(change), now))
            finally:
                self._track_close(change.incident, now)
        self._forget_closed(now)
        self._delta = MemoryDelta()
        return items, delta

    def _track_close(self, inc: Incident, now: datetime) -> None:
        """A closed incident's escalations go (a reopen schedules its own); the targets it was sent to are kept
        while it can reopen, so a flap does not page a target again and a fault that reopens an incident
        never paged (planned work posted as info) pages it for the first time."""
        reopenable = self.memory.reopenable
        if inc.status != CLOSED and inc.id not in reopenable:
            return
        self._drop(inc.id, REOPENABLE)
        reopenable.pop(inc.id, None)
        if inc.status != CLOSED:
            return  # reopened
        self._drop(inc.id, ESCALATION)
        self._escalated.pop(inc.id, None)
        if not self.reopens_within:
            self._forget(inc.id)
            return
        until = now + self.reopens_within
        reopenable[inc.id] = until
        self._delta.marks.add((inc.id, REOPENABLE, iso(until)))

    def _drop(self, inc_id: str, role: str) -> None:
        self._delta.marks = {m for m in self._delta.marks if m[:2] != (inc_id, role)}
        self._delta.drop.add((inc_id, role))

    def _forget(self, inc_id: str) -> None:
        self._targets.pop(inc_id, None)
        self._escalated.pop(inc_id, None)
        self.memory.reopenable.pop(inc_id, None)
        self._delta.forget.add(inc_id)

    def _forget_closed(self, now: datetime) -> None:
        """Closed incidents that can no longer reopen leave the memory."""
        for inc_id in [i for i, until in self.memory.reopenable.items() if until <= now]:
            self._forget(inc_id)

    def _route_one(self, change: Change, now: datetime) -> list[OutboxItem]:
        inc = change.incident
        self._track_cordon(inc)
        self._track_child(inc)
        kinds = set(change.kinds)
        child = inc.spoken_for
        if child and not kinds & CHILD_KINDS:
            return []
        decision = route_incident(self.routing, inc, now, cordoned_at=self.cordoned_at(inc),
                          children=self._fleet_children(inc))
        if REPAIR_FAILED in kinds:
            decision.note = "; ".join(n for n in (repair_failed(inc), decision.note) if n)
        if not child:  # a page a window holds back is said on the messages that do go out
            decision.note = "; ".join(filter(None, (decision.note, *muted_notes(self.routing, decision))))
        known = self._targets.setdefault(inc.id, set())
        # The response to a fault (cordon, reboot, uncordon) is never news to a target that has not heard of it
        news = not _news(change) <= RESOLUTION_KINDS
        out: list[OutboxItem] = []
        # Each target once; a target reached through a muted route and a loud one is loud.
        chosen: dict[Target, tuple[Hit, bool]] = {}
        for hit in decision.hits:
            receiver = self._receiver(hit.receiver)
            if receiver is None:
                continue
            audible = not (child or hit.muted or decision.suppressed)
            for raw in receiver.targets():
                target = self._target(raw)
                quiet = not audible or (not news and target not in known)
                if target and (target not in chosen or (chosen[target][1] and not quiet)):
                    chosen[target] = (hit, quiet)
        seen: set[str] = set(chosen)
        loud: set[Target] = set()
        moved = self._one_post(chosen, known)
        if E.OPENED in kinds and not child:  # once per incident: why a new one is not posted or paged
            for muted in sorted({f"route {h.route!r} to {h.receiver} ({decision.suppressed or h.muted})"
                                 for h in decision.hits if h.muted or decision.suppressed}):
                log.info("%s is not posted or paged through %s: the console log has it", inc.id, muted)
        for target, (hit, quiet) in chosen.items():
            why = decision.suppressed or hit.muted or (f"posted in {', '.join(moved[target])}" if target in moved else "")
            out.extend(self._items(target, change, now, decision, hit, quiet=quiet, why=why, known=known))
            if not quiet:
                self._mark(known, inc.id, SENT, target)
                loud.add(target)
        if moved and kinds & ROUTE_CHANGING:
            out.extend(self._moved_note(change, now, decision, moved))
        # Messages sent earlier to targets this change no longer routes to are still kept current.
        for old in sorted(known - seen):
            target = self._target(Target(old))
            if target is not None:
                out.extend(self._items(target, change, now, decision, None, quiet=True, why="", known=known))
        if self.console_mirror and CONSOLE not in seen:
            out.append(OutboxItem(inc.id, CONSOLE, Intent.SHOW, change_payload(change), now))
        if not child and not decision.suppressed and (news or change.urgent):
            # a conversation kept to the message already posted elsewhere: the note goes there
            loud |= {Target(p) for posted in moved.values() for p in posted}
            out.extend(self._escalations(change, now, decision, loud, moved))
        return out

    def _one_post(self, chosen: dict[Target, tuple[Hit, bool]], known: set[str]) -> dict[Target, list[str]]:
        """Conversations (Slack) newly routed for an incident already posted in another of its kind: one
        top-level post per problem, so they stay quiet (the fleet that turned critical is not posted again as
        if new); returns them with the conversations that speak for them, which hear of it in their thread."""
        moved: dict[Target, list[str]] = {}
        for target, (hit, quiet) in list(chosen.items()):
            integration = registry.get(target.kind)
            if quiet or target in known or integration is None or not integration.conversation:
                continue
            posted = sorted(t for t in known if Target(t).kind == target.kind and Target(t).lane == "")
            if posted:
                chosen[target] = (hit, True)
                moved[target] = posted
        return moved

    def _moved_note(self, change: Change, now: datetime, decision: RouteDecision,
                    moved: dict[Target, list[str]]) -> list[OutboxItem]:
        """A thread reply where the incident was posted, naming the conversations it is now routed to too."""
        inc = change.incident
        names = ", ".join(sorted(t.address or str(t) for t in moved))
        event: JsonDoc = {"at": iso(now), "kind": E.ROUTED.value, "text": f"now {decision.severity}: routed to {names} too"}
        payload = Timeline(kinds=tuple(change.kinds), urgent=change.urgent, only_if_posted=True, note=decision.note,
                           route="", receiver="", team="", events=(event,))
        where = sorted({p for posted in moved.values() for p in posted})
        return [OutboxItem(inc.id, Target(t), Intent.TIMELINE, payload, now) for t in where]

    def _items(self, target: Target, change: Change, now: datetime, decision: RouteDecision, hit: Hit | None, *,
               quiet: bool, why: str, known: set[str]) -> list[OutboxItem]:
        """What one change means for one target, in intents its integration accepts."""
        integration = registry.get(target.kind)
        if integration is None or (quiet and not integration.remembers):
            return []
        inc = change.incident
        # A reopened incident's targets are still known (kept through its reopen window): a flap updates the
        # message where it is and pages nothing again; a target it never reached hears of it first now.
        first = target not in known and not quiet
        wait = self._group_wait(inc, now) if first else None
        common = Routed(kinds=tuple(change.kinds), urgent=change.urgent, only_if_posted=quiet, note=decision.note,
                        muted=why, route=hit.route if hit else "", receiver=hit.receiver if hit else "",
                        team=hit.team if hit else "",
                        # PagerDuty takes the node's alert over; a conversation may take its message over
                        adopt=self._adoptable(inc, target) if first else "")
        out: list[OutboxItem] = []
        opening = E.OPENED in change.kinds or first
        if integration.accepts(Intent.SHOW):
            if not integration.remembers:  # a log line: the change itself, at once
                line = Show(**common, incident=change_summary(change), events=tuple(e.to_dict() for e in change.events))
                out.append(OutboxItem(inc.id, target, Intent.SHOW, line, now))
            else:
                due = now if (opening or change.urgent or not self.debounce) else now + self.debounce
                out.append(OutboxItem(inc.id, target, Intent.SHOW, Show(**common), now + wait if wait else due))
        if integration.accepts(Intent.TIMELINE) and not quiet and not opening:
            thread = tuple(e.to_dict() for e in change.events if e.kind not in QUIET_KINDS)
            if thread:
                out.append(OutboxItem(inc.id, target, Intent.TIMELINE, Timeline(**common, events=thread), now))
        pager_news = _news(change) & PAGER_KINDS
        if integration.accepts(Intent.PAGE) and (pager_news or first):
            page = (Resolve if pager_news and pager_news <= URGENT_KINDS else Page)(
                **common, routing_key=target.address, severity=decision.severity)
            out.append(OutboxItem(inc.id, target, page.intent, page, now + wait if wait else now))
        return out

    def _adoptable(self, inc: Incident, target: Target) -> str:
        """The first of a fleet's node incidents already sent to ``target``: the fleet's first page takes its
        PagerDuty alert over instead of triggering a second one (a storm pages once, however Alertmanager's
        batches split it); on a Slack target it names the node's message, which a notifier may take over
        (Slack does not yet: the fleet posts its own). Read from the fleet's children and the committed
        memory, so it holds after a restart too."""
        if not inc.children:  # a fleet's nodes, a stalled job's suspects
            return ""
        return next((c for c in inc.children
                     if target in self._targets.get(c, ()) and c not in self.memory.reopenable), "")

    def _group_wait(self, inc: Incident, now: datetime) -> timedelta | None:
        """A node incident's first post and page wait ``group_wait``, so a storm can fold it first (fleets
        post at once). So does a node-less follower awaiting its cluster's fleet (the engine set its
        ``storm_keys``). One the engine marked "storm pending" (peers of its event opened, too few for a fleet
        yet) waits while the mark stands: the engine alone decides storms, and the mark is stored with the
        incident, so a restart or a new leader holds it too. The fleet that forms meanwhile takes over a
        first node's page (``_adoptable``), and a held item of a node it folded is dropped."""
        wait = self.routing.group_wait
        if inc.fleet or not (inc.node or inc.storm_keys) or inc.status != OPEN:
            return None
        pending = inc.storm_until - now if inc.storm_until is not None and not inc.spoken_for else timedelta(0)
        return max(wait, pending) or None

    def _escalations(self, change: Change, now: datetime, decision: RouteDecision, loud: set[Target],
                     moved: dict[Target, list[str]]) -> list[OutboxItem]:
        inc = change.incident
        scheduled = self._escalated.setdefault(inc.id, set())
        out: list[OutboxItem] = []
        # Escalation targets already paged hear about acknowledge and resolve.
        if change.urgent:
            for raw in sorted(scheduled):
                if ":" not in raw or raw.startswith("escalation:"):
                    continue
                target = Target(raw)
                integration = registry.get(target.kind)
                if integration is not None and integration.accepts(Intent.RESOLVE):
                    out.append(OutboxItem(inc.id, target, Intent.RESOLVE, Resolve(
                        kinds=tuple(change.kinds), urgent=True, only_if_posted=True, routing_key=target.address,
                        escalation=True, severity=decision.severity, note=decision.note), now))
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
            self._mark(scheduled, inc.id, ESCALATION, marker)
            due = now + esc.after
            payload = Escalate(after=esc.after.total_seconds(), routing_key=esc.routing_key, escalation=True,
                               severity=decision.severity, note=decision.note, kinds=(E.ESCALATED.value,))
            pager = self._target(esc.target)
            if pager is not None and pager == esc.target:
                self._mark(scheduled, inc.id, ESCALATION, pager)
                out.append(OutboxItem(inc.id, pager, Intent.ESCALATE, payload, due))
            # The note goes into the conversation the paging receiver's own messages started.
            talks = {t for t in map(self._target, receiver.targets()) if t is not None}
            talks = {Target(p) for t in talks & set(moved) for p in moved[t]} | talks  # posted elsewhere: there
            for t in sorted(t for t in talks if t in loud and _converses(t)):
                out.append(OutboxItem(inc.id, t.in_lane("escalation"), Intent.ESCALATE, payload, due))
        return out


def _news(change: Change) -> set[str]:
    """The change's kinds that tell more than the response to a fault (the engine flags those events)."""
    return {e.kind for e in change.events if not is_response(e)} if change.events else set(change.kinds)


def _converses(target: Target) -> bool:
    integration = registry.get(target.kind)
    return integration is not None and integration.conversation and integration.accepts(Intent.ESCALATE)
