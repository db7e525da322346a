"""Routing decisions: which receivers an incident change goes to at a given time, and which are muted.

``decide`` is a pure function of the routing section, the incident and a time,
so a rule test can ask it what the service would do without running one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from alertd.matchers import match_all
from alertd.model import SEVERITY_RANK, Incident, iso
from alertd.notify.fields import incident_fields
from alertd.notify.routing import Escalation, Routing
from alertd.notify.windows import cordon_since, first_problem_at


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


def decide(routing: Routing, inc: Incident, now: datetime, *, cordoned_at: datetime | None = None) -> Decision:
    """Route one incident at ``now``. ``cordoned_at``: when its node was cordoned, if known from elsewhere."""
    fields = incident_fields(inc)
    decision = Decision(severity=inc.severity)
    for m in routing.maintenance:
        if m.covers(inc, fields, now):
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
