"""Storms: the node incidents of one fleet event fold into ONE fleet incident.

Alerts always join their node's incident (correlation groups), so each node
incident carries all of that node's signals. After each engine step the node
incidents it touched are matched against ``correlation.storm.events``: the
first event whose matchers match the incident's LEADING signal (its most
severe, best-explaining one; exporter down, cordon and not ready rank lowest)
names the node's event by its ``by`` fields. Node incidents of one event that
open on ``min_nodes`` nodes within ``window`` fold into a new fleet incident;
later ones join it while it is open and its latest node folded in less than
``window`` ago.

A fleet incident stands for the events of its nodes' leading signals and of
their follower signals (``storm.followers``: exporter down, not ready; a
cordon is a person's decision, not a follower, so a node only cordoned never
storms), so a node that only shows a follower joins the fleet instead of
starting a fleet of its own, while a node led by another fault (thermal, a
different Xid category, another cluster) is another event and stays apart.
When a fleet comes to stand for another event (its exporter-down nodes now
show the Xid), the nodes of that event still waiting as candidates fold in,
and a second fleet already standing for it is the same storm when a node of
either is led by that event: the one that was less severe (the younger on a
tie) closes as the other's child ("merged into fleet incident ...") and its
nodes fold into the other. Two storms that share an event only
through followers (thermal and Xid nodes, all cordoned) stay two.

An incident that names a cluster but no node, led by a follower signal (a
TargetDown aggregated by cluster and job while many exporters are down), joins
that cluster's open fleet incident for the same event as a child. With no such
fleet yet it waits ``window`` as a candidate (its ``storm_keys`` name the event;
routing holds its first post ``group_wait`` like a node's) and a fleet of that
event forming meanwhile folds it in; with no storm it stays its own incident.

The fleet incident has no alerts of its own: it lists its nodes and children
and takes its severity, title and signals from them. It resolves when its last
child incident resolves. Pure: state and ``now`` in, ``Change``s out.
"""
from __future__ import annotations

from datetime import datetime
from typing import Iterable, Protocol

from alertd.core.durations import format_duration
from alertd.core.json_types import JSONArray, arr, strings
from alertd.core.matchers import match_all
from alertd.engine.domains import note_domains
from alertd.engine.storm.summary import (UNCLASSIFIED, count_signals, fleet_headline, share_labels,
                                         uncount_signals)
from alertd.engine.state import EngineState
from alertd.engine.storm import growth
from alertd.engine.storm.events import cluster_follower_key, event_key, signal_fields
from alertd.engine.storm.extent import (EXTENT, Tally, drop_gpus, event_of, extent_fact, extent_said, extent_step,
                                        note_gpus, readings, speak)
from alertd.core.response_marks import flagged, repair_failed
from alertd.core.model import SEVERITY_RANK, Event, Incident, Signal, signal_rank
from alertd.core.states import as_severity
from alertd.core.vocabulary import Category, EventKind, Group, SignalKind
from alertd.rules.ruleset import CorrelationRules, StormRule


class StormHost(Protocol):
    """What storms need from the correlator that owns them (engine/correlate.py's Correlator), all of it
    public: its state and rules, the incident lifecycle steps, and the step's change log. A Protocol, so
    the two modules do not import each other."""

    state: EngineState
    rules: CorrelationRules

    def open_incident(self, key: str, group: str, signal: Signal, now: datetime) -> Incident: ...

    def close(self, inc: Incident, now: datetime, text: str, actor: str = "") -> None: ...

    def retitle(self, inc: Incident) -> None: ...

    def record(self, inc: Incident, event: Event, *, member: str = "", urgent: bool = False) -> None: ...

    def last_event(self, inc: Incident) -> Event | None: ...

    def only_response(self, inc: Incident) -> bool: ...


class Storms:
    """Storm detection and fleet bookkeeping for one Correlator (it owns the state and the change log)."""

    def __init__(self, correlator: StormHost):
        self.c = correlator
        self._tallies: dict[str, Tally] = {}  # open fleet id -> its readings, kept as its GPUs are noted

    @property
    def rule(self) -> StormRule:
        return self.c.rules.storm

    # ----- indexes (rebuilt from the open incidents after a load or a state swap) -----

    def _index(self) -> None:
        state = self.c.state
        if state.storm_indexed:
            return
        state.fleets.clear()
        state.recent.clear()
        state.storm_key_of.clear()
        state.open_children.clear()
        state.waiting.clear()
        self._tallies.clear()
        for inc in sorted(state.incidents.values(), key=lambda i: i.opened_at):
            if not inc.node and not inc.fleet and not inc.parent_id and inc.storm_keys:
                state.waiting.setdefault(inc.storm_keys[0], []).append(inc.id)
            elif inc.fleet:
                for key in inc.storm_keys:
                    state.fleets[key] = inc.id
                state.open_children[inc.id] = sum(1 for c in inc.children if c in state.incidents)
            elif inc.node and not inc.parent_id and inc.primary is not None:
                storm_key = event_key(self.rule, inc, inc.primary)
                if storm_key is not None:
                    state.storm_key_of[inc.id] = storm_key
                    state.recent.setdefault(storm_key, []).append((inc.opened_at, inc.id))
        state.storm_indexed = True

    # ----- after each step -----

    def settle(self, touched: Iterable[Incident], now: datetime) -> None:
        """Place the node incidents a step touched: refresh their fleet, join one, or start one."""
        self._index()
        rule = self.rule
        for inc in touched:
            if not inc.is_open or inc.fleet:
                continue
            if inc.parent_id:
                self._refresh_parent(inc, now)
                continue
            if not rule.enabled or inc.primary is None or now - inc.opened_at > rule.window:
                continue
            if not inc.node:
                self._cluster_follower(inc, now)
                continue
            key = event_key(rule, inc, inc.primary)
            if key is None or self._planned(inc):
                continue
            fleet = self._joinable(key, now)
            if fleet is not None:
                self._fold(fleet, [inc], now)
            else:
                self._candidate(key, inc, now)

    def _planned(self, inc: Incident) -> bool:
        """Planned work: a node led by a follower (exporter down, not ready) whose cordon came first, as in
        cordon -> reboot -> uncordon. Nothing links it to a storm of its cluster, so it joins none. Judged
        over the incident's whole history (a reopened incident keeps its members): a cordon that followed a
        fault of the node or of its fleet is the response to it (``Member.response``), never planned work."""
        followers = self.rule.followers
        if not followers or inc.primary is None or not match_all(followers, signal_fields(inc, inc.primary)):
            return False
        if any(m.response for m in inc.members.values()):
            return False
        cordons = [m.starts_at for m in inc.members.values() if m.signal.kind == SignalKind.NODE_CORDONED]
        follows = [m.starts_at for m in inc.members.values()
                   if m.signal.kind != SignalKind.NODE_CORDONED and match_all(followers, signal_fields(inc, m.signal))]
        return bool(cordons and follows) and min(cordons) <= min(follows)

    def _joinable(self, key: str, now: datetime) -> Incident | None:
        fleet = self.c.state.incidents.get(self.c.state.fleets.get(key, ""))
        return fleet if fleet is not None and self._takes_nodes(fleet, now) else None

    def _takes_nodes(self, fleet: Incident, now: datetime) -> bool:
        """Open, and its latest node folded in less than ``window`` ago."""
        return fleet.is_open and fleet.storm_last is not None and now - fleet.storm_last <= self.rule.window

    def _cluster_follower(self, inc: Incident, now: datetime) -> None:
        """A node-less follower joins its cluster's fleet for the event, or waits for one (see module doc)."""
        key = cluster_follower_key(self.rule, inc)
        if key is None:
            return
        fleet = self._joinable(key, now)
        if fleet is not None:
            self._fold(fleet, [inc], now)
        elif not inc.storm_keys:
            inc.storm_keys = [key]
            state = self.c.state
            live = [i for i in state.waiting.get(key, []) if (w := state.incidents.get(i)) is not None
                    and not w.parent_id and now - w.opened_at <= self.rule.window]
            state.waiting[key] = live + [inc.id]

    def _adopt(self, fleet: Incident, now: datetime) -> None:
        """Incidents waiting for a fleet of an event this fleet now stands for fold into it: node-less
        followers, and node incidents of that event too few to start a fleet of their own. A fleet comes to
        stand for an event when a node joins or one of its nodes is led by another signal (its exporter's
        alert came first, the Xid from the kernel log after): the nodes already led by that signal within
        the window are the same storm, not another incident each."""
        state, window = self.c.state, self.rule.window
        for key in list(fleet.storm_keys):
            waiting = [state.incidents.get(i) for i in state.waiting.pop(key, [])]
            waiting += [state.incidents.get(i) for _, i in state.recent.pop(key, [])
                        if state.storm_key_of.get(i) == key]
            fold = [w for w in waiting if w is not None and w.is_open and not w.parent_id
                    and now - w.opened_at <= window]
            if fold:
                self._fold(fleet, fold, now)

    def _candidate(self, key: str, inc: Incident, now: datetime) -> None:
        state, rule = self.c.state, self.rule
        state.storm_key_of[inc.id] = key
        peers = state.recent.setdefault(key, [])
        if all(i != inc.id for _, i in peers):
            peers.append((inc.opened_at, inc.id))
        live: list[Incident] = []
        kept: list[tuple[datetime, str]] = []
        for opened, inc_id in peers:  # drop the ones out of the window, resolved, folded or now led otherwise
            peer = state.incidents.get(inc_id)
            if peer is not None and not peer.parent_id and now - opened <= rule.window \
                    and state.storm_key_of.get(inc_id) == key:
                kept.append((opened, inc_id))
                live.append(peer)
        state.recent[key] = kept
        if len({p.node for p in live}) >= rule.min_nodes:
            del state.recent[key]
            self._start(key, live, now)
            return
        ids = [p.id for p in live]  # in the order they became candidates; the next batch is pending away
        since = now - rule.pending
        before = [p for p in live[:ids.index(inc.id)] if p.opened_at >= since] if inc.id in ids else []
        waiting = [w for i in state.waiting.get(key, []) if (w := state.incidents.get(i)) is not None
                   and not w.parent_id and w.opened_at >= since]
        if before or waiting:
            for one in [p for p in before if _unsent_unclassified(p)] + [inc]:
                self._pending(one, len(before) + len(waiting), now)

    def _pending(self, inc: Incident, peers: int, now: datetime) -> None:
        """Mark ``inc`` "storm pending": incidents of its event opened before it within ``pending`` (one of
        Alertmanager's batches), still too few for a fleet, and the next batch may bring the rest. Routing holds its first post and
        page while the mark stands (``Incident.storm_until``, stored with the incident, so a restart or a new
        leader holds it too). The first of them is not held (unless ``_unsent_unclassified``): it posts after
        group_wait, and a fleet forming later takes its page over. Marked once, never past the window.
        Application faults are their job's owners', never held."""
        rule = self.rule
        if inc.storm_until is not None or not rule.pending or inc.category == Category.APPLICATION:
            return
        inc.storm_until = min(now + rule.pending, inc.opened_at + rule.window)
        self.c.record(inc, inc.add_event(now, EventKind.STORM_PENDING, f"{peers} other incident(s) of its event within "
                                                               f"{format_duration(rule.window)}: held until "
                                                               f"{inc.storm_until:%H:%M:%S} for a storm to form",
                                         until=inc.storm_until.isoformat()))

    def _start(self, key: str, children: list[Incident], now: datetime) -> None:
        for child in children:  # their exporters are down too, in a fleet led by exporters down: the same storm
            for k in self._keys(child):
                if (fleet := self._joinable(k, now)) is not None and self._leads(fleet, k):
                    self._fold(fleet, children, now)
                    return
        lead = max(children, key=lambda i: self._fleet_rank(i.primary) if i.primary else (-1, -1, -1))
        assert lead.primary is not None
        headline = fleet_headline(lead, lead.primary)
        fleet = self.c.open_incident(f"fleet|{key}", Group.STORM.value, headline, now)
        fleet.fleet, fleet.cluster, fleet.primary = True, lead.cluster, headline
        self.c.state.open_children[fleet.id] = 0
        name = key.split("|", 1)[0]
        nodes = len({c.node for c in children})
        self.c.record(fleet, fleet.add_event(
            now, EventKind.OPENED, f"{lead.primary.kind} on {nodes} nodes within {format_duration(self.rule.window)}: "
                           f"storm ({name})", event=name))
        self._fold(fleet, children, now, opening=True)

    def _fold(self, fleet: Incident, children: list[Incident], now: datetime, *, opening: bool = False) -> None:
        state = self.c.state
        joined: list[str] = []
        others: list[Incident] = []
        was = fleet.severity
        for inc in children:
            inc.parent_id, inc.storm_until = fleet.id, None
            fleet.children.append(inc.id)
            state.open_children[fleet.id] = state.open_children.get(fleet.id, 0) + 1
            state.storm_key_of.pop(inc.id, None)
            if not inc.node:  # a cluster-wide follower: one timeline line, no node to list
                self.c.record(fleet, fleet.add_event(now, EventKind.INCIDENT_JOINED, f"{inc.title} ({inc.id})",
                                                     incident=inc.id))
            elif state.add_fleet_node(fleet, inc.node, inc.id):
                joined.append(inc.node)
            others += self._absorb(fleet, inc, now)
            self.c.record(inc, inc.add_event(now, EventKind.FOLDED_INTO_FLEET, f"part of fleet incident {fleet.id}",
                                             fleet=fleet.id))
        fleet.storm_last = now
        self._extent(fleet, now, "" if opening else was)
        self.c.retitle(fleet)
        if not opening and joined:
            self._node_event(fleet, now, EventKind.NODES_JOINED, joined, "joined")
        self._merge(fleet, others, now, was)
        if fleet.is_open:  # else it merged into another fleet, which adopted what waits for it
            self._adopt(fleet, now)

    def _node_event(self, fleet: Incident, now: datetime, kind: str, nodes: list[str], verb: str) -> None:
        """One timeline line per step however many nodes join (or resolve) in it."""
        last = self.c.last_event(fleet)
        names: JSONArray  # the event's own list, extended in place while the step adds nodes
        if last is not None and last.kind == kind and last.at == now:
            names = arr(last.data.get("nodes"), "nodes")
            names.extend(nodes)
        else:
            names = list(nodes)
            last = fleet.add_event(now, kind, "", nodes=names)
            self.c.record(fleet, last)
        shown = ", ".join(strings(names[:10])) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        last.text = f"{shown} {verb} ({len(fleet.nodes)} nodes)"

    def _absorb(self, fleet: Incident, child: Incident, now: datetime) -> list[Incident]:
        """Fold one child's signals into what the fleet shows and the events it stands for; returns the other
        open fleets that already stand for one of those events (the same storm, to merge)."""
        state = self.c.state
        others: list[Incident] = []
        for kind in child.signals:
            if kind not in fleet.signals:
                fleet.signals = sorted(fleet.signals + [kind])
        for xid in child.xids:
            if xid not in fleet.xids:
                fleet.xids = sorted(fleet.xids + [xid])
        if SEVERITY_RANK.get(child.severity, 0) > SEVERITY_RANK.get(fleet.severity, 0):
            fleet.severity = child.severity
        if child.primary is not None and (fleet.primary is None or self._fleet_rank(child.primary) > self._fleet_rank(fleet.primary)):
            fleet.primary = fleet_headline(child, child.primary)
        count_signals(fleet, child)
        share_labels(fleet, child)
        note_domains(fleet, child, self.c.rules.domains)
        event = event_of(self.rule.events, fleet)
        if event is not None:
            note_gpus(fleet, child, lambda sig: match_all(event.matchers, signal_fields(child, sig)), self._tallies.get(fleet.id))
        lead = event_key(self.rule, child, child.primary) if child.primary is not None else None
        for key in self._keys(child):
            if key not in fleet.storm_keys:
                other = self._joinable(key, now)
                if other is not None and other is not fleet and (key == lead or self._leads(other, key)):
                    others.append(other)
                fleet.storm_keys.append(key)
                state.fleets[key] = fleet.id
        return others

    def _extent(self, fleet: Incident, now: datetime, was: str) -> None:
        """Say the readings and advice of the fleet's event, and raise its severity to what its extent reaches
        (engine/storm/extent.py); ``was``: its severity before this step, to log a rise ("" logs none)."""
        event = event_of(self.rule.events, fleet)
        if event is None:
            return
        if fleet.id not in self._tallies:  # a new one: forget those of fleets closed since
            self._tallies = {k: t for k, t in self._tallies.items() if k in self.c.state.incidents}
        r = readings(fleet, self._tallies)
        speak(fleet, event, r)
        step = extent_step(fleet, event.escalate, r)
        if step is not None and SEVERITY_RANK.get(step.severity, 0) >= SEVERITY_RANK.get(fleet.severity, 0):
            fleet.severity = as_severity(step.severity)
            fleet.annotations[EXTENT] = extent_fact(step, len(fleet.nodes), r.gpus)
        if was and SEVERITY_RANK.get(fleet.severity, 0) > SEVERITY_RANK.get(was, 0) and (why := extent_said(fleet)):
            self.c.record(fleet, fleet.add_event(now, "severity_changed", f"{was} -> {fleet.severity}: {why}"))

    def _fleet_rank(self, sig: Signal) -> tuple[int, int, int]:
        """What names a fleet: a fault before any follower (exporter down and not ready follow a fault,
        so 3 of 12 thermal nodes losing their exporters leave it a thermal fleet), then the usual rank."""
        follower = match_all(self.rule.followers, {"signal": sig.kind, "category": sig.category,
                                                   "severity": sig.severity, "xid": str(sig.xid or "")})
        return (0 if follower else 1, *signal_rank(sig))

    def _leads(self, fleet: Incident, key: str) -> bool:
        """Whether a node of the fleet is led by the event ``key`` names. Two fleets that stand for one event
        only through followers (a thermal storm and an Xid storm whose nodes were both cordoned) are two
        storms; one led by it and one that follows it (exporters down first, Xids first) are one."""
        return any(c.primary is not None and event_key(self.rule, c, c.primary) == key
                   for c in self.open_children(fleet))

    def _keys(self, child: Incident) -> list[str]:
        """The events a node incident stands for: its leading signal's and its followers'."""
        leading = [child.primary] if child.primary is not None else []
        keys = (event_key(self.rule, child, sig) for sig in leading + self._followers(child))
        return [k for k in keys if k is not None]

    def _merge(self, fleet: Incident, others: list[Incident], now: datetime, was: str) -> None:
        """Fleets found to stand for one event are one storm: one closes, its open nodes fold into the one that
        stays. The one that was the more severe before this step stays (it is the one paged, if either is),
        the elder on a tie. ``was``: ``fleet``'s severity before this step."""
        for other in others:
            if other is fleet or not other.is_open or not fleet.is_open:  # met before in this loop
                continue
            standing = {fleet.id: _standing(fleet, was), other.id: _standing(other, other.severity)}
            kept, merged = sorted((fleet, other), key=lambda f: standing[f.id])
            children = self.open_children(merged)
            self.c.state.open_children[merged.id] = 0
            merged.parent_id = kept.id  # what was sent for it points there, and nothing new is (a fleet child)
            self.c.close(merged, now, f"merged into fleet incident {kept.id}: the same storm")
            for key in merged.storm_keys:
                if key not in kept.storm_keys:
                    kept.storm_keys.append(key)
            for key in kept.storm_keys:
                self.c.state.fleets[key] = kept.id
            if children:
                self._fold(kept, children, now)
            fleet, was = kept, kept.severity

    def _followers(self, child: Incident) -> list[Signal]:
        """The child's member signals that are followers, each distinct one once: a node's alerts mostly
        share one signal, and matching builds the fields for each."""
        seen: set[tuple[object, ...]] = set()
        out = []
        for m in child.members.values():
            sig = m.signal
            what = (sig.kind, sig.category, sig.severity, sig.xid, sig.detail)  # all signal_fields reads of it
            if what not in seen:
                seen.add(what)
                if match_all(self.rule.followers, signal_fields(child, sig)):
                    out.append(sig)
        return out

    def _refresh_parent(self, child: Incident, now: datetime) -> None:
        fleet = self.c.state.incidents.get(child.parent_id)
        if fleet is None:
            return
        if child.node and self._planned(child):
            self._unfold(fleet, child, now, "cordoned before its other signals (planned work)", "planned work")
            return
        failed = repair_failed(child)
        if failed:  # news the fleet's page did not tell: the node pages it on its own, once
            self._unfold(fleet, child, now, failed, "repair failed")
            return
        before = (fleet.severity, fleet.title, list(fleet.signals))
        events = len(fleet.storm_keys)
        others = self._absorb(fleet, child, now)
        self._extent(fleet, now, "")
        self.c.retitle(fleet)
        repair = self.c.only_response(child)  # the repair of what the fleet paged: no news for a pager
        if SEVERITY_RANK.get(fleet.severity, 0) > SEVERITY_RANK.get(before[0], 0):
            why = extent_said(fleet)
            self.c.record(fleet, flagged(fleet.add_event(now, EventKind.SEVERITY_CHANGED, f"{before[0]} -> {fleet.severity}"
                                                         + (f": {why}" if why else "")), repair))
        elif (fleet.title, fleet.signals) != before[1:]:
            self.c.record(fleet, flagged(fleet.add_event(now, EventKind.NODE_UPDATED, f"{child.node}: {child.title}"), repair))
        if len(fleet.storm_keys) > events and self._takes_nodes(fleet, now):
            self._merge(fleet, others, now, before[0])
            if fleet.is_open:  # else it merged into another fleet, which adopted what waits for it
                self._adopt(fleet, now)

    def _unfold(self, fleet: Incident, child: Incident, now: datetime, why: str, short: str) -> None:
        """A node leaves its fleet and stands alone: one that joined as a follower turns out to be planned
        work (its cordon, which started first, arrived after its exporter's alert, as Alertmanager's batches
        by alert name deliver them), and routing judges it as the maintenance it is; or its repair failed,
        which it pages on its own."""
        state = self.c.state
        child.parent_id = ""
        fleet.children = [c for c in fleet.children if c != child.id]
        state.open_children[fleet.id] = max(0, state.open_children.get(fleet.id, 1) - 1)
        if child.node in fleet.nodes:
            state.drop_fleet_node(fleet, child.node)
        uncount_signals(fleet, child)
        drop_gpus(fleet, child.node, self._tallies.get(fleet.id))
        self.c.record(child, child.add_event(now, EventKind.LEFT_FLEET, f"not part of fleet incident {fleet.id}: {why}",
                                             fleet=fleet.id))
        if state.open_children[fleet.id] == 0:
            self.c.close(fleet, now, f"its last node ({child.node}) left it: {short}")
            return
        self.c.retitle(fleet)
        self._node_event(fleet, now, EventKind.NODES_LEFT, [child.node], f"left: {short}")

    def grown(self, now: datetime, fleets: list[Incident], *, tick: bool = False) -> None:
        """Open fleets a step changed: whether they doubled or their pages are due the new count
        (engine/storm/growth.py); on the tick, updates that waited for their interval."""
        for fleet in fleets:
            events = growth.due(fleet, now) if tick else growth.note(fleet, now, self.rule.page_updates)
            for event in events:
                self.c.record(fleet, event)

    # ----- lifecycle -----

    def child_closed(self, child: Incident, now: datetime) -> None:
        """A node incident resolved: the fleet counts it and resolves with its last node."""
        state = self.c.state
        fleet = state.incidents.get(child.parent_id)
        if fleet is None:
            return
        left = state.open_children.get(fleet.id, 1) - 1
        state.open_children[fleet.id] = left
        if left > 0 or fleet.firing > 0:
            if child.node:
                self._node_event(fleet, now, EventKind.NODES_RESOLVED, [child.node], "resolved")
            return
        self.c.close(fleet, now, f"all {len(fleet.children)} node incidents resolved")

    def fleet_closed(self, fleet: Incident) -> None:
        state = self.c.state
        for key in fleet.storm_keys:
            if state.fleets.get(key) == fleet.id:
                del state.fleets[key]
        state.open_children.pop(fleet.id, None)

    def open_children(self, fleet: Incident) -> list[Incident]:
        return [c for c in (self.c.state.incidents.get(i) for i in fleet.children) if c is not None]


def _unsent_unclassified(inc: Incident) -> bool:
    """Unclassified and opened in this step (nothing sent yet): held with the peers its step brings, as
    alertd cannot tell a lone one worth a page at once from a storm's first (Alertmanager sends them as one)."""
    return inc.version == 0 and inc.primary is not None and inc.primary.kind == UNCLASSIFIED


def _standing(fleet: Incident, severity: str) -> tuple[int, datetime, int]:
    """Which of two merging fleets stays (the lower): the more severe, then the elder."""
    return -SEVERITY_RANK.get(severity, 0), fleet.opened_at, int(fleet.id.rsplit("-", 1)[-1])
