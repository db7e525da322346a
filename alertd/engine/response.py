"""The response belongs to the fault: what is done to a node after its fault is part of that fault's story.

A cordon, drain, reboot (NodeDown), NotReady or uncordon that starts after a fault on the node, within
``correlation.response.window`` of the fault's last alert ending, is the RESPONSE to that fault, whoever did
it (a person, alertd's own remediation, an external remediator: the alert is the same). Its member is marked
``response``; it joins the fault's incident (reopening it when it resolved meanwhile, and its fleet with it),
shows in the timeline, may raise the severity, but never takes the headline and never pages on its own
(routing reads the ``response`` flag of the events it makes). The fault is looked for over the incident's
whole history: a reopened incident keeps its earlier members and their times.

What is new and worth a page is a repair that fails: a node still unreachable ``down_timeout`` after its
reboot, back but still NotReady ``repair_timeout`` after it came back, or a fault signal back after the
uncordon. That is said once (annotation ``repair_failed``).
Pure functions of an incident, the rules and a time.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from alertd.core.durations import format_duration
from alertd.core.matchers import match_all
from alertd.core.model import FIRING, Incident, Member, Signal, iso, signal_rank
from alertd.core.response_marks import REPAIR_FAILED
from alertd.core.vocabulary import NEVER_CAUSE, SignalKind
from alertd.rules.ruleset import ResponseRule

CORDON = SignalKind.NODE_CORDONED
SLACK = timedelta(minutes=1)  # Prometheus' clock against another's (kube-state-metrics, node exporter)


def signal_fields(sig: Signal) -> dict[str, str]:
    return {"signal": sig.kind, "category": sig.category, "severity": sig.severity, "xid": str(sig.xid or ""),
            "detail": sig.detail}


def is_symptom(rule: ResponseRule, sig: Signal) -> bool:
    """A repair symptom (cordon, node down, NotReady, exporter down): what a node shows while it is worked on."""
    return match_all(rule.signals, signal_fields(sig))


def is_cause(rule: ResponseRule, sig: Signal) -> bool:
    return sig.kind not in NEVER_CAUSE and not is_symptom(rule, sig)


def lead_rank(rule: ResponseRule, sig: Signal) -> tuple[int, int, int]:
    """What leads an incident (its title and primary): a cause before any repair symptom, then severity and
    kind. A NodeDown of the repair reboot is critical, but the Xid it repairs stays the headline."""
    return (0 if is_symptom(rule, sig) else 1, *signal_rank(sig))


def fault_of(inc: Incident, rule: ResponseRule, start: datetime, fleet: Incident | None = None) -> str:
    """The fault (its title) a repair symptom starting at ``start`` responds to, or "" when none: a cause
    member of the incident that started before it and was firing, or ended within the response window;
    else the node's fleet, when it was open for a fault before ``start`` and the node showed its part of it
    before (a cordon before anything else is planned work, even during a storm)."""
    for m in inc.members.values():
        if m.response or not is_cause(rule, m.signal) or m.starts_at > start + SLACK:
            continue
        if m.status == FIRING or m.ends_at is None or start - m.ends_at <= rule.window:
            return m.signal.title
    if fleet is not None and fleet.primary is not None and is_cause(rule, fleet.primary) \
            and fleet.opened_at <= start + SLACK and (fleet.resolved_at is None or start - fleet.resolved_at <= rule.window) \
            and any(m.starts_at < start for m in inc.members.values()):  # the node was in the fleet's story first
        return f"{fleet.primary.title} (fleet incident {fleet.id})"
    return ""


def still_down(inc: Incident, rule: ResponseRule, now: datetime) -> str:
    """Why the repair failed, when a node rebooted in response to its fault is not back: unreachable
    ``down_timeout`` after it went down, or reachable again but still not ready ``repair_timeout`` after it came
    back; "" otherwise (and once it was said)."""
    if REPAIR_FAILED in inc.annotations or not inc.firing:
        return ""
    for m, due, since in _down_clocks(inc, rule):
        if now >= due:
            return f"repair failed: {m.alertname} still firing {format_duration(now - m.starts_at)} after it started" \
                   f"{since} ({m.signal.title})"
    return ""


def repair_due(inc: Incident, rule: ResponseRule) -> datetime | None:
    """When ``still_down`` may next find the repair failed (for a clock that ticks only when something is due)."""
    if REPAIR_FAILED in inc.annotations or not inc.firing:
        return None
    return min((due for _, due, _ in _down_clocks(inc, rule)), default=None)


def _down_clocks(inc: Incident, rule: ResponseRule) -> list[tuple[Member, datetime, str]]:
    """Each firing response member that says the node is not back, with when it makes the repair a failure
    and how that is measured. An unreachable node (NodeDown) runs ``down_timeout`` from its start: a reboot is
    minutes, a swap hours. Not ready (NotReady, no exporter) while the node is reachable runs ``repair_timeout``
    from when the node came back, so NotReady that began during the reboot is not counted twice."""
    response = [m for m in inc.members.values() if m.response and match_all(rule.still_down, signal_fields(m.signal))]
    down = [m for m in response if match_all(rule.unreachable, signal_fields(m.signal))]
    clocks: list[tuple[Member, datetime, str]] = []
    if rule.down_timeout:
        clocks += [(m, m.starts_at + rule.down_timeout, "") for m in down if m.status == FIRING]
    if clocks or not rule.repair_timeout or any(m.status == FIRING for m in down):
        return clocks  # down: not ready is not judged while the node is unreachable
    back = max((m.ends_at for m in down if m.ends_at is not None), default=None)
    for m in response:
        if m.status == FIRING and m not in down:
            since = m.starts_at if back is None or back < m.starts_at else back
            clocks.append((m, since + rule.repair_timeout, "" if since == m.starts_at else
                           f", {format_duration(since - m.starts_at)} of them before the node was back"))
    return clocks


def fault_back(inc: Incident, rule: ResponseRule, member: Member) -> str:
    """Why the repair failed, when a fault signal starts after the uncordon that ended the node's response;
    "" otherwise (and once it was said)."""
    if REPAIR_FAILED in inc.annotations or not is_cause(rule, member.signal):
        return ""
    uncordoned = uncordoned_at(inc)
    if uncordoned is None or member.starts_at <= uncordoned:
        return ""
    return f"repair failed: {member.alertname} ({member.signal.title}) back " \
           f"{format_duration(member.starts_at - uncordoned)} after the uncordon"


def fault_back_before_uncordon_arrived(inc: Incident, rule: ResponseRule) -> str:
    """``fault_back`` judged when the uncordon's resolve arrives: Alertmanager delivers each group on its own
    group_interval, so the fault's return may reach alertd before the resolve of the uncordon that came first
    (the alerts' own times say which came first)."""
    back = sorted((m for m in inc.members.values() if m.status == FIRING and not m.response),
                  key=lambda m: m.starts_at)
    return next((why for m in back if (why := fault_back(inc, rule, m))), "")


def uncordoned_at(inc: Incident) -> datetime | None:
    """When the node's response ended: its last cordon's end, once every cordon of the response ended."""
    cordons = [m for m in inc.members.values() if m.response and m.signal.kind == CORDON]
    ends = [m.ends_at for m in cordons if m.status != FIRING and m.ends_at is not None]
    return max(ends) if cordons and len(ends) == len(cordons) else None


def mark_failed(inc: Incident, why: str, now: datetime) -> None:
    inc.annotations[REPAIR_FAILED] = {"at": iso(now), "why": why}


def has_response(inc: Incident) -> bool:
    return any(m.response for m in inc.members.values())
