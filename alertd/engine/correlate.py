"""Correlation and incident lifecycle: plain functions over EngineState and a clock.

No I/O and no wall clock here: callers pass ``now``. The same code runs behind
the HTTP receiver, in ``alertd replay`` and in rule unit tests.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from alertd.core.durations import format_duration
from alertd.core.json_types import arr, as_text, objects
from alertd.engine import response as resp
from alertd.engine.classify import severity_label
from alertd.engine.grouping import fields_of, group_for
from alertd.engine.domains import Domains, Topology
from alertd.engine.jobs import GROUP as JOB_GROUP, SIZE as JOB_SIZE, Jobs, is_job
from alertd.engine.state import EngineState
from alertd.engine.reopen import Reopening
from alertd.engine.storm import Storms, fleet_title, reading_of
from alertd.engine.watchdog import PIPELINE_KEY, Watchdog
from alertd.core.matchers import match_all
from alertd.core.model import (
    ACKNOWLEDGED,
    CLOSED,
    FIRING,
    HELD_BY,
    OPEN,
    RECONCILED_BY,
    RESOLVED,
    SEVERITY_RANK,
    Alert,
    Change,
    Event,
    Incident,
    Member,
    Signal,
    interned,
)
from alertd.core.response_marks import REPAIR_FAILED, RESPONSE, flagged, is_response
from alertd.core.tickets import TicketLink
from alertd.core.vocabulary import NEVER_FAULT, EventKind, Group, SignalKind
from alertd.rules.ruleset import CorrelationRules, GroupRule
from alertd.core.words import counted

RECONCILED = "reconciled"  # an event's data: the alertnames reconciliation resolved in one step

MAX_GPUS_LISTED = 64  # a fleet incident can touch thousands of GPUs; list the first ones
EVIDENCE = "evidence_signals"
VIA_API = "via_api"  # a join event's mark: the alert was taken from Alertmanager's API (model.HELD_BY)


def _code_unknown(sig: Signal | None) -> bool:
    return sig is not None and sig.kind == SignalKind.XID and sig.xid is None


def _known_first(signals: list[Signal]) -> list[Signal]:
    """An Xid whose code is known replaces the code-unknown Xid signals (it names what they could not)."""
    if any(s.kind == SignalKind.XID and s.xid is not None for s in signals):
        return [s for s in signals if not _code_unknown(s)]
    return signals


class Correlator:
    def __init__(self, rules: CorrelationRules, state: EngineState | None = None):
        self.rules = rules
        self.state = state or EngineState()
        self._changes: dict[str, Change] = {}
        self.topology: Topology | None = None  # the nodes' API labels, handed in by the service (engine/domains.py)
        self.storms = Storms(self)
        self.jobs = Jobs(self)
        self.domains = Domains(self)
        self.reopening = Reopening(self)
        self.watchdog = Watchdog(self)

    # ----- public steps: each returns the incidents it changed -----

    def ingest(self, alerts: Iterable[Alert], now: datetime) -> list[Change]:
        for alert in alerts:
            if alert.name in self.rules.watchdog.alertnames:
                self.watchdog.heartbeat(alert, now)
            else:
                self._ingest_one(alert, now)
        self._settle(now)
        return self._flush()

    def tick(self, now: datetime) -> list[Change]:
        """Time passing: hold-downs expire, a silent pipeline opens an incident."""
        hold = self.rules.hold_down
        fleets: list[Incident] = []
        for inc in list(self.state.incidents.values()):
            if inc.fleet:
                fleets.append(inc)
            if inc.quiet_since is None or now - inc.quiet_since < hold:
                continue
            if inc.fleet and any(c in self.state.incidents for c in inc.children):
                continue
            self.close(inc, now, f"all alerts resolved for {format_duration(now - inc.quiet_since)} (hold-down passed)")
        self._still_down(now)
        self.storms.grown(now, [f for f in fleets if f.is_open], tick=True)
        self.reopening.forget(now)
        self.watchdog.tick(now)
        return self._flush()

    def acknowledge(self, incident_id: str, actor: str, now: datetime) -> list[Change]:
        inc = self.state.incidents.get(incident_id)
        if inc is not None and inc.status == OPEN:
            for one in [inc] + (self.storms.open_children(inc) if inc.fleet else []):
                if one.status == OPEN:
                    one.status, one.acknowledged_by, one.acknowledged_at = ACKNOWLEDGED, actor, now
                    self.record(one, one.add_event(now, EventKind.ACKNOWLEDGED, f"acknowledged by {actor}", actor), urgent=True)
        return self._flush()

    def resolve(self, incident_id: str, actor: str, now: datetime) -> list[Change]:
        inc = self.state.incidents.get(incident_id)
        if inc is not None:
            children = self.storms.open_children(inc) if inc.fleet else []
            self.close(inc, now, f"resolved by {actor}", actor)
            for child in children:  # resolving the event resolves its nodes
                self.close(child, now, f"resolved by {actor} with fleet incident {inc.id}", actor)
        return self._flush()

    def annotate(self, incident_id: str, key: str, value: object, now: datetime, kind: str, text: str = "",
                 actor: str = "") -> list[Change]:
        """Attach data (owners, a silence) to an open incident and log it."""
        inc = self.state.incidents.get(incident_id)
        if inc is not None:
            self._annotate(inc, key, value, now, kind, text, actor)
        return self._flush()

    def link_ticket(self, incident_id: str, ticket: TicketLink, now: datetime, actor: str = "") -> list[Change]:
        """Record a ticket opened for the incident (an RMA handoff), once per target and GPU, with its event."""
        inc = self.state.incidents.get(incident_id)
        if inc is None or any((t.target, t.gpu) == (ticket.target, ticket.gpu) for t in inc.tickets):
            return self._flush()
        inc.tickets.append(ticket)
        text = f"{ticket.system} ticket {ticket.key} opened" + (f" for GPU {ticket.gpu}" if ticket.gpu else "")
        self.record(inc, inc.add_event(now, EventKind.TICKET_OPENED, text + (f": {ticket.url}" if ticket.url else ""), actor))
        return self._flush()

    def enrich(self, incident_id: str, now: datetime, source: str, annotations: Mapping[str, tuple[object, str]],
               signals: Sequence[Signal] = (), kind: str = "enrichment") -> list[Change]:
        """What enrichment found for an incident, in one step: its annotations (key -> value and the event's
        text; None removes the key) and the signals it read outside Alertmanager (an Xid in the kernel log),
        which can upgrade the incident. One step, so no reader sees an upgrade without the log lines behind
        it, and notifiers get one update rather than one per key."""
        inc = self.state.incidents.get(incident_id)
        if inc is None:
            return []
        for key, (value, text) in annotations.items():
            self._annotate(inc, key, value, now, kind, text, "")
        sized = is_job(inc) and JOB_SIZE in annotations
        if sized:  # the job's pods as the API lists them: its nodes, its GPU count in the title
            self.jobs.sized(inc)
        added = [signal for signal in signals if self._add_signal(inc, signal, now, source)]  # all, not any()
        if added or sized:
            self._settle(now)
        return self._flush()

    # ----- internals -----

    def _annotate(self, inc: Incident, key: str, value: Any, now: datetime, kind: str, text: str, actor: str) -> None:
        if value is None:
            inc.annotations.pop(key, None)
        else:
            inc.annotations[key] = value
        self.record(inc, inc.add_event(now, kind, text, actor), urgent=kind.startswith("silence"))

    def _add_signal(self, inc: Incident, signal: Signal, now: datetime, source: str) -> bool:
        """Evidence the incident did not have yet; False when it had it."""
        known = objects(inc.annotations.get(EVIDENCE))
        if any(Signal.from_dict(s) == signal for s in known):
            return False
        before = (inc.severity, inc.title)
        inc.annotations[EVIDENCE] = [*known, signal.to_dict()]
        self._refresh(inc)
        kind = EventKind.CLASSIFICATION_UPGRADED if (inc.severity, inc.title) != before else EventKind.EVIDENCE
        self.record(inc, inc.add_event(now, kind, f"{signal.title} (from {source})"))
        return True

    def _ingest_one(self, alert: Alert, now: datetime) -> None:
        inc_id = self.state.by_fingerprint.get(alert.fingerprint)
        if inc_id is not None:
            self._update_member(self.state.incidents[inc_id], alert, now)
            return
        if alert.status != FIRING and self.reopening.known_resolution(alert):
            return  # a late copy of an alert whose incident has resolved since
        alert.labels = interned(alert.labels)  # from here kept: by the member, and by the incident's fields
        fields = fields_of(alert)
        folded = False
        target = None
        if alert.signal.fold_into_previous:
            target = self._fold_target(alert, now)
            folded = target is not None
        if target is None and alert.signal.kind == SignalKind.OTHER:
            target = self._node_incident(alert)  # unclassified: it joins what its node already has
        if target is None:
            job_key = self.jobs.key(fields)  # a job's own symptom: one incident per job, whatever its node
            found = (GroupRule(JOB_GROUP, self.rules.job.by), job_key) if job_key else group_for(fields, self.rules.groups)
            if found is None:  # rule set without a catch-all group: never drop an alert
                found = (GroupRule("unmatched", ("alertname",), (), True), f"unmatched|alertname={alert.name}")
            group, key = found
            target_id = self.state.by_key.get(key)
            target = self.state.incidents[target_id] if target_id else self.reopening.reopen(key, alert, now)
            if target is None:
                if alert.status != FIRING and not self._opens_resolved(alert):
                    return  # a resolved follower or unclassified alert alone says nothing happened
                target = self.open_incident(key, group.name, alert.signal, now)
                self._join(target, alert, now, opening=True)
                return
        self._join(target, alert, now, folded=folded)

    def _join(self, inc: Incident, alert: Alert, now: datetime, *, opening: bool = False, folded: bool = False) -> None:
        if is_job(inc):
            self.jobs.saw(inc, alert)  # before the member retitles it
        self._add_member(inc, alert, now, opening=opening, folded=folded)

    def _opens_resolved(self, alert: Alert) -> bool:
        """A resolved alert never seen firing is evidence that its fault happened (an Xid that fired and
        resolved between two deliveries is still an Xid): it opens an incident, which resolves after the
        hold-down. Followers (exporter down, not ready), cordons and unclassified alerts do not."""
        sig = alert.signal
        if sig.kind in NEVER_FAULT:
            return False
        return not match_all(self.rules.storm.followers, {"signal": sig.kind, "category": sig.category,
                                                          "severity": sig.severity, "xid": str(sig.xid or "")})

    def _node_incident(self, alert: Alert) -> Incident | None:
        """The open incident of the alert's node (the most recently changed, fleets aside), if any."""
        s = alert.subject
        ids = self.state.by_node.get((s.cluster, s.node)) if s.node else None
        found = [self.state.incidents[i] for i in ids or () if i in self.state.incidents]
        found = [i for i in found if not i.fleet and i.group != Group.OTHER]
        return max(found, key=lambda i: (i.updated_at, i.opened_at)) if found else None

    def _fold_target(self, alert: Alert, now: datetime) -> Incident | None:
        best: tuple[datetime, Incident] | None = None
        for inc_id in self.state.by_node.get((alert.subject.cluster, alert.subject.node), ()):
            inc = self.state.incidents[inc_id]
            for m in inc.members.values():
                seen = m.last_seen or m.starts_at
                if m.signal.kind == SignalKind.XID and not m.folded and now - seen <= self.rules.fold_window:
                    if best is None or seen > best[0]:
                        best = (seen, inc)
        return best[1] if best else None

    def open_incident(self, key: str, group: str, signal: Signal, now: datetime) -> Incident:
        seq = self.state.next_seq
        self.state.next_seq += 1
        inc = Incident(
            id=f"INC-{seq}", key=key, group=group, title=signal.title, severity=signal.severity,
            category=signal.category, status=OPEN, opened_at=now, updated_at=now,
            previous_id=self.state.last_by_key.get(key, ""),
        )
        self.state.add(inc)
        return inc

    def _add_member(self, inc: Incident, alert: Alert, now: datetime, *, opening: bool, folded: bool) -> None:
        member = Member(
            fingerprint=alert.fingerprint, alertname=alert.name, status=alert.status, signal=alert.signal,
            subject=alert.subject, labels=alert.labels, starts_at=alert.starts_at, ends_at=alert.ends_at,
            last_seen=now, folded=folded, generator_url=alert.generator_url,
            summary=alert.annotations.get("summary", ""), via_api=alert.receiver == HELD_BY,
            reading=reading_of(alert.annotations, self.rules.storm.events),
        )
        fault = "" if opening else self._responds_to(inc, member)
        member.response = bool(fault)
        if fault:
            self.state.responding[inc.id] = None
        failed = "" if opening else resp.fault_back(inc, self.rules.response, member)
        inc.members[alert.fingerprint] = member
        firing = alert.status == FIRING
        if firing:
            inc.firing += 1
        self.state.by_fingerprint[alert.fingerprint] = inc.id
        if inc.fleet and alert.subject.node:
            self.state.add_fleet_node(inc, alert.subject.node)
        before = inc.severity
        self._absorb(inc, member)
        if opening:
            self.state.add(inc)  # now that it has a node and a primary signal: index it
        what = f"{alert.name}: {alert.signal.title}" + (f" (GPU {alert.subject.gpu.index})" if alert.subject.gpu and alert.subject.gpu.index else "")
        if alert.signal.kind == SignalKind.OTHER:
            what += " (unclassified)"
        if fault:
            what += f" (follows {fault})"
        if member.via_api:
            what += " (taken from Alertmanager's API: no webhook had carried it)"
        if not firing:
            what += " (fired and resolved before it reached alertd)"
            if inc.firing == 0 and inc.quiet_since is None:
                inc.quiet_since = now
        elif not opening and inc.quiet_since is not None:
            inc.quiet_since = None
            inc.flaps += 0 if fault else 1  # the operator's cordon after a short fault is no flap
        kind = EventKind.OPENED if opening else EventKind.ALERT_FOLDED if folded else EventKind.ALERT_JOINED
        if not (kind == EventKind.ALERT_JOINED and self._merge_join(inc, now, what, member)):
            event = flagged(inc.add_event(now, kind, what, fingerprint=alert.fingerprint), bool(fault))
            if member.via_api:
                event.data[VIA_API] = True
            self.record(inc, event, member=alert.fingerprint)
        if not opening and SEVERITY_RANK[inc.severity] > SEVERITY_RANK.get(before, 0):
            self.record(inc, flagged(inc.add_event(now, EventKind.SEVERITY_CHANGED, f"{before} -> {inc.severity}"), bool(fault)))
        if failed:
            self._repair_failed(inc, failed, now)

    def _responds_to(self, inc: Incident, member: Member) -> str:
        """The fault a repair symptom joining ``inc`` responds to (its title), or ""."""
        rule = self.rules.response
        if not resp.is_symptom(rule, member.signal):
            return ""
        return resp.fault_of(inc, rule, member.starts_at, self.state.incidents.get(inc.parent_id))

    def _repair_failed(self, inc: Incident, why: str, now: datetime) -> None:
        """Said once: the node's repair did not hold. Routing pages it (storms take the node out of its
        fleet, whose page told of the fault, not of this)."""
        resp.mark_failed(inc, why, now)
        self.record(inc, inc.add_event(now, REPAIR_FAILED, why), urgent=True)

    def _still_down(self, now: datetime) -> None:
        failed = False
        for inc_id in list(self.state.responding):  # only a response has a repair to fail
            inc = self.state.incidents.get(inc_id)
            if inc is None or inc.fleet:
                continue
            if why := resp.still_down(inc, self.rules.response, now):
                self._repair_failed(inc, why, now)
                failed = True
        if failed:
            self._settle(now)

    def _merge_join(self, inc: Incident, now: datetime, what: str, member: Member) -> bool:
        """Alerts joining one incident in one step make ONE timeline line ("9 alerts joined, first ..."),
        so a storm does not write a line per alert (responses and faults apart, and alerts taken from
        Alertmanager's API apart from those sent by webhook: one line never says both)."""
        change = self._changes.get(inc.id)
        last = self.last_event(inc)
        fingerprint = member.fingerprint
        if change is None or last is None or last.kind != EventKind.ALERT_JOINED or last.at != now \
                or bool(last.data.get(RESPONSE)) != member.response or bool(last.data.get(VIA_API)) != member.via_api:
            return False
        # The second join turns the first's "fingerprint" into the "fingerprints" list; later ones extend it in place.
        first = last.data.pop("fingerprint", "")
        fps = arr(last.data.setdefault("fingerprints", [first]), "fingerprints")
        fps.append(fingerprint)
        if len(fps) == 2:
            last.data["first"] = last.text
        last.text = f"{counted(len(fps), 'alert')} joined, first {as_text(last.data.get('first'))}"
        if fingerprint not in change.members:
            change.members.append(fingerprint)
        return True

    def _update_member(self, inc: Incident, alert: Alert, now: datetime) -> None:
        m = inc.members[alert.fingerprint]
        if alert.starts_at < m.starts_at:
            return  # a stale delivery of an older occurrence
        m.last_seen = now
        reading = reading_of(alert.annotations, self.rules.storm.events)  # the temperature now
        if reading is not None and m.reading is not None and round(reading) != round(m.reading) and inc.parent_id:
            # its fleet says its hottest GPU and range: a step that changes them touches the node
            self.record(inc, inc.add_event(now, EventKind.READING_CHANGED, f"{m.alertname}: {m.reading:g} -> {reading:g}"),
                        member=m.fingerprint)
        m.reading = reading
        if _code_unknown(m.signal) and alert.signal.kind == SignalKind.XID and alert.signal.xid is not None:
            m.signal = alert.signal  # the same alert now names its Xid (e.g. in its summary)
            self._refresh(inc)
            self.record(inc, inc.add_event(now, EventKind.CLASSIFICATION_UPGRADED, f"{m.alertname}: {alert.signal.title}"),
                        member=m.fingerprint)
        if alert.status == FIRING:
            if m.status == FIRING:
                m.starts_at = alert.starts_at
                return
            m.status, m.starts_at, m.ends_at = FIRING, alert.starts_at, None
            failed = resp.fault_back(inc, self.rules.response, m)
            inc.firing += 1
            m.response = bool(self._responds_to(inc, m))
            if m.response:
                self.state.responding[inc.id] = None
            event = flagged(inc.add_event(now, EventKind.ALERT_REFIRED, f"{m.alertname} firing again",
                                          fingerprint=m.fingerprint), m.response)
            if inc.quiet_since is not None:
                inc.quiet_since = None
                inc.flaps += 0 if m.response else 1
                event.data["flap"] = inc.flaps
            self.record(inc, event, member=m.fingerprint)
            if failed:
                self._repair_failed(inc, failed, now)
            return
        if m.status == RESOLVED:
            return
        m.status, m.ends_at = RESOLVED, alert.ends_at or now
        inc.firing -= 1
        if alert.receiver == RECONCILED_BY:
            self._reconciled(inc, m, now)
        else:
            self.record(inc, inc.add_event(now, EventKind.ALERT_RESOLVED, f"{m.alertname} resolved", fingerprint=m.fingerprint),
                        member=m.fingerprint)
        if m.response and m.signal.kind == resp.CORDON and (failed := resp.fault_back_before_uncordon_arrived(
                inc, self.rules.response)):
            self._repair_failed(inc, failed, now)
        if inc.firing == 0:
            inc.quiet_since = now
            self.record(inc, inc.add_event(now, EventKind.ALL_ALERTS_RESOLVED,
                                           f"resolving after {format_duration(self.rules.hold_down)} hold-down"))

    def _reconciled(self, inc: Incident, m: Member, now: datetime) -> None:
        """Alerts no Alertmanager holds any more: one timeline line per incident and step, naming them."""
        last = self.last_event(inc)
        if last is None or last.kind != EventKind.ALERT_RESOLVED or not last.data.get(RECONCILED):
            last = inc.add_event(now, EventKind.ALERT_RESOLVED, "", fingerprint=m.fingerprint)
            last.data[RECONCILED] = []
            self.record(inc, last, member=m.fingerprint)
        else:
            self._changes[inc.id].members.append(m.fingerprint)
        names = arr(last.data[RECONCILED], RECONCILED)
        names += [] if m.alertname in names else [m.alertname]
        last.text = f"resolved: Alertmanager no longer holds its alerts ({', '.join(map(str, names))})"

    def close(self, inc: Incident, now: datetime, text: str, actor: str = "") -> None:
        inc.status, inc.resolved_at, inc.quiet_since = CLOSED, now, None
        self.record(inc, inc.add_event(now, EventKind.RESOLVED, f"{text}; open for {format_duration(now - inc.opened_at)}", actor),
                    urgent=True)
        self.state.remove(inc)
        if inc.fleet:
            self.storms.fleet_closed(inc)
        elif inc.parent_id:
            self.storms.child_closed(inc, now)
        self.domains.closed(inc, now)

    def _absorb(self, inc: Incident, m: Member) -> None:
        """Fold one new member into what the incident shows, in O(1) of the member count."""
        sig = m.signal
        if m.signal.kind not in inc.signals:
            inc.signals = sorted(inc.signals + [sig.kind])
        if sig.xid and sig.xid not in inc.xids:
            inc.xids = sorted(inc.xids + [sig.xid])
        if m.subject.gpu is not None and len(inc.gpus) < MAX_GPUS_LISTED:
            gpu = m.subject.gpu.to_dict()
            if gpu not in inc.gpus:
                inc.gpus.append(gpu)
        if not inc.fleet:
            s, job = m.subject, is_job(inc)  # a job's nodes are listed apart (``nodes``), its pods are many
            inc.cluster, inc.node = inc.cluster or s.cluster, inc.node or ("" if job else s.node)
            inc.namespace, inc.pod = inc.namespace or s.namespace, inc.pod or ("" if job else s.pod)
        if sig.xid is not None and _code_unknown(inc.primary):
            self._refresh(inc)  # the code-unknown Xid gives way to the one that names its code
        elif sig.kind == SignalKind.OTHER and inc.primary is not None and inc.primary.kind != SignalKind.OTHER:
            pass  # an unclassified alert on the node is shown, but does not decide what the incident is
        elif not m.folded or inc.primary is None:
            if inc.primary is None or len(inc.members) == 1:
                inc.severity = sig.severity
            elif SEVERITY_RANK.get(sig.severity, 0) > SEVERITY_RANK.get(inc.severity, 0):
                inc.severity = sig.severity
            rule = self.rules.response  # the cause keeps the headline: a repair symptom never takes it
            if inc.primary is None or len(inc.members) == 1 or resp.lead_rank(rule, sig) > resp.lead_rank(rule, inc.primary):
                inc.primary = sig
        self.retitle(inc)

    def _refresh(self, inc: Incident) -> None:
        """Recompute what an incident shows from all its members and evidence (rare: evidence added)."""
        members = list(inc.members.values())
        leading = [m for m in members if not m.folded] or members
        signals = [m.signal for m in leading] + [Signal.from_dict(s) for s in objects(inc.annotations.get(EVIDENCE))]
        signals = _known_first(signals)
        if not signals:
            return
        inc.primary = max(signals, key=lambda sig: resp.lead_rank(self.rules.response, sig))
        inc.severity = max((s.severity for s in signals), key=lambda v: SEVERITY_RANK.get(v, 0))
        inc.signals = sorted({m.signal.kind for m in members} | {s.kind for s in signals})
        inc.xids = sorted({s.xid for s in [m.signal for m in members] + signals if s.xid})
        self.retitle(inc)

    def retitle(self, inc: Incident) -> None:
        primary = inc.primary
        if primary is None:
            return
        inc.category = primary.category
        if inc.fleet:
            inc.title = fleet_title(inc)
            return
        if is_job(inc):
            inc.title = self.jobs.title(inc)
            return
        where = inc.node or inc.pod or inc.cluster
        # By index; a GPU known only from a kernel line's PCI address (a log alert) by that address.
        single = len(inc.gpus) == 1 and (inc.gpus[0].get("index") or inc.gpus[0].get("pci_bus_id"))
        gpu = f" GPU {single}" if single else ""
        named = where and re.search(rf"(?<![\w.-]){re.escape(where)}(?![\w-]|\.\w)", primary.title)
        inc.title = f"{primary.title} on {where}{gpu}" if where and not named else primary.title  # its own text's host

    def record(self, inc: Incident, event: Event, *, member: str = "", urgent: bool = False) -> None:
        change = self._changes.get(inc.id)
        if change is None:
            change = self._changes[inc.id] = Change(incident=inc, kinds=[])
        change.kinds.append(event.kind)
        change.events.append(event)
        if member and member not in change.members:
            change.members.append(member)
        change.urgent = change.urgent or urgent

    def last_event(self, inc: Incident) -> Event | None:
        """The latest event this step recorded for ``inc``, if any (so a step can extend one line)."""
        change = self._changes.get(inc.id)
        return change.events[-1] if change and change.events else None

    def only_response(self, inc: Incident) -> bool:
        """Whether all this step tells of ``inc`` is the response to its fault (and resolutions)."""
        change = self._changes.get(inc.id)
        return change is not None and all(is_response(e) or e.kind in (EventKind.ALERT_RESOLVED, EventKind.ALL_ALERTS_RESOLVED)
                                          for e in change.events)

    def _settle(self, now: datetime) -> None:
        """Storms are decided once a step has given each node incident all of its alerts."""
        self.storms.settle([c.incident for c in list(self._changes.values())], now)
        self.jobs.settle([c.incident for c in list(self._changes.values())], now)
        self.domains.settle([c.incident for c in list(self._changes.values())], now)
        self.storms.grown(now, [c.incident for c in list(self._changes.values()) if c.incident.fleet and c.incident.is_open])

    def _flush(self) -> list[Change]:
        changes = list(self._changes.values())
        self._changes = {}
        for c in changes:
            c.incident.version += 1
        return changes


__all__ = ["Correlator", "EngineState", "fields_of", "group_for", "severity_label", "PIPELINE_KEY"]
