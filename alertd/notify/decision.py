"""Routing decisions: which receivers an incident change goes to at a given time, and which are muted.

``route_incident`` is a pure function of the routing section, the incident and a time,
so a rule test can ask it what the service would do without running one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Sequence

from alertd.core.matchers import match_all
from alertd.core.outbox_items import Intent
from alertd.integrations.registry import INTEGRATIONS
from alertd.core.json_types import as_object, as_text
from alertd.core.model import SEVERITY_RANK, STORM_EXTENT, Incident, iso, max_severity
from alertd.rules.fields import incident_fields
from alertd.rules.routing import Escalation, Routing
from alertd.rules.windows import Cordon, CordonPolicy, cordon_of, unplanned_severity


@dataclass(slots=True)
class Hit:
    receiver: str
    route: str
    muted: str = ""  # why this route's receivers are muted now
    team: str = ""
    escalate: Escalation | None = None


@dataclass(slots=True)
class RouteDecision:
    hits: list[Hit] = field(default_factory=list)
    escalations: list[Escalation] = field(default_factory=list)
    suppressed: str = ""  # why everything is muted (maintenance, cordon)
    note: str = ""  # shown on the message, e.g. a downgrade
    severity: str = ""  # effective severity (after a cordon downgrade)
    planned: bool = False  # everything it shows is planned work on cordoned nodes

    @property
    def receivers(self) -> list[str]:
        return list(dict.fromkeys(h.receiver for h in self.hits))  # a receiver two routes reach, once

    @property
    def active_receivers(self) -> list[str]:
        return list(dict.fromkeys(h.receiver for h in self.hits if not h.muted and not self.suppressed))


# integrations whose targets page someone
PAGING_KINDS = frozenset(name for name, integration in INTEGRATIONS.items() if Intent.PAGE in integration.intents)


def muted_notes(routing: Routing, decision: RouteDecision) -> list[str]:
    """What a mute window holds back, in words for the incident and its messages: ``page muted by window
    'nights' until 08:00 Europe/Berlin (route 'errors' to gpu-oncall)``, once per route and receiver."""
    out: list[str] = []
    loud = set(decision.active_receivers)  # a receiver another route reaches is not muted
    for hit in decision.hits:
        if not hit.muted or decision.suppressed or hit.receiver in loud:
            continue
        receiver = routing.receivers.get(hit.receiver)
        pages = receiver is not None and any(t.kind in PAGING_KINDS for t in receiver.targets())
        line = f"{'page' if pages else 'posts'} muted by {hit.muted} (route {hit.route!r} to {hit.receiver})"
        if line not in out:
            out.append(line)
    return out


def cordon_severity(policy: CordonPolicy, inc: Incident, cordoned_at: datetime | None) -> str | None:
    """How a node incident stands to its node's cordon: None (no cordon: route as it is), "" (planned
    work only) or the severity of what is not planned. ``cordoned_at``: a cordon known from elsewhere."""
    cordon = cordon_of(inc)
    if cordoned_at is not None and (cordon is None or cordoned_at < cordon.since):
        cordon = Cordon(cordoned_at)  # shown by another incident of the node: its end is not known here
    if cordon is None:
        return None
    return unplanned_severity(inc, cordon, policy) or ""


def fleet_severity(children: Sequence[tuple[str, str | None]]) -> str | None:
    """A fleet is planned work when every node incident of it is (a rollout draining nodes that then show
    exporters down); otherwise the severity of its nodes' unplanned parts. ``children``: each node
    incident's severity and its ``cordon_severity``. None: no node was cordoned."""
    if all(j is None for _, j in children):
        return None
    rest = [severity if j is None else j for severity, j in children if j != ""]
    return max_severity(*rest) if rest else ""


def _judged(policy: CordonPolicy, inc: Incident, cordoned_at: datetime | None,
            children: Sequence[tuple[str, str | None]] | None) -> str | None:
    """How the incident stands to its cordon (``cordon_severity``; a fleet: ``fleet_severity``), None when
    the policy notifies as is. A storm stays as severe as its extent made it (engine/storm/extent.py: its
    event's escalate step): its nodes' repair takes none of that away."""
    if policy.action == "notify":
        return None
    if not inc.fleet:
        return cordon_severity(policy, inc, cordoned_at)
    judged = fleet_severity(children) if children else None
    extent = as_text(as_object(inc.annotations.get(STORM_EXTENT)).get("severity"))
    return extent if judged and SEVERITY_RANK.get(judged, 0) < SEVERITY_RANK.get(extent, 0) else judged


def route_incident(routing: Routing, inc: Incident, now: datetime, *, cordoned_at: datetime | None = None,
           children: Sequence[tuple[str, str | None]] | None = None) -> RouteDecision:
    """Route one incident at ``now``. ``cordoned_at``: when its node was cordoned, if known from elsewhere;
    ``children``: a fleet's node incidents as ``fleet_severity`` takes them (what makes a fleet cordon-aware)."""
    fields = incident_fields(inc)
    decision = RouteDecision(severity=inc.severity)
    for m in routing.maintenance:
        if m.covers(inc, fields, now):
            decision.suppressed = f"maintenance window {m.name!r} until {iso(m.end)}"
            break
    policy = routing.cordoned
    judged = _judged(policy, inc, cordoned_at, children)
    where = inc.node or ("its nodes" if inc.fleet else "the node")
    if judged == "":
        decision.planned = True
        if policy.action == "mute":
            decision.suppressed = decision.suppressed or f"{where} {'were' if inc.fleet else 'is'} cordoned"
        elif SEVERITY_RANK.get(policy.severity, 0) < SEVERITY_RANK.get(inc.severity, 0):
            decision.note = f"severity {inc.severity} downgraded to {policy.severity}: {where} was cordoned first"
            decision.severity = policy.severity
            fields["severity"] = policy.severity
    elif judged and SEVERITY_RANK.get(judged, 0) < SEVERITY_RANK.get(inc.severity, 0):
        work = "the repair of its fault" if any(m.response for m in inc.members.values()) else \
            "planned work on a cordoned node"
        decision.note = f"severity {inc.severity} is {work}; the rest is {judged}"
        decision.severity = judged
        fields["severity"] = judged
    matched = False
    for i, route in enumerate(routing.routes):
        if not match_all(route.matchers, fields):
            continue
        matched = True
        muted = ""
        for name in route.mute:
            w = routing.windows.get(name)
            if w is not None and w.contains(now):
                muted = " ".join(filter(None, (f"window {name!r}", w.until_text(now))))
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
