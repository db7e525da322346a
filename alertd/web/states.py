"""Why a page shows nothing where a reader expects something: a page muted by a window, notifiers not
configured, an empty list. Each says what decided it and what to configure, instead of leaving a blank."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from alertd.app.notifiers import available_kinds
from alertd.config.settings import Config
from alertd.core.model import Incident, iso
from alertd.notify.decision import muted_notes, route_incident
from alertd.rules.routing import Routing

# What the incident list's query may hold besides its filters.
NOT_FILTERS = frozenset({"limit", "cursor", "fragment"})


def routing_notes(cfg: Config, routing: Any, inc: Incident, now: datetime) -> list[str]:
    """Sentences for the incident page: notifiers that are not configured, and routes muted when the
    incident opened or now (a mute window of rules/routing.yml, maintenance, a cordon)."""
    notes = []
    if available_kinds(cfg) <= {"console"}:
        notes.append("Slack and PagerDuty are not configured (notify.slack, notify.pagerduty in the config): "
                     "every routed notification goes to the console log.")
    if not isinstance(routing, Routing) or inc.parent_id:
        return notes
    seen: set[str] = set()
    for when, at in (("when it opened", inc.opened_at), ("now", now)):
        decision = route_incident(routing, inc, at)
        lines = muted_notes(routing, decision) if not decision.suppressed else [
            f"notifications muted by {decision.suppressed} (route {h.route!r} to {h.receiver})" for h in decision.hits]
        for line in lines:
            key = line.split(" (route ", 1)[-1]
            if key not in seen:
                seen.add(key)
                notes.append(f"{line[:1].upper()}{line[1:]} {when} ({iso(at)[:16]} UTC): its Slack and PagerDuty "
                             "targets stay quiet while it lasts; the console log has every change.")
    return notes


def empty_list_text(query: Mapping[str, str]) -> str:
    """The incident list with no row: a filter that matches nothing, or no incident at all yet."""
    if any(v for k, v in query.items() if k not in NOT_FILTERS):
        return "No incident matches these filters."
    return ("No incidents yet. alertd opens one when Alertmanager sends an alert to POST /api/v1/alerts/alertmanager "
            "(README: \"Point Alertmanager at it\"; examples/webhook-gpu-node.json is one to send by hand).")
