"""Route matchers on a field no incident has.

A missing field matches "" (Alertmanager's rule), so ``sigal!="other"`` is true of every incident: the
route meant for GPU incidents takes everything, and nothing else says so. A name that is neither an
incident field, nor a label alertd or the site's rules know, is refused when it is close to one that is
(a typo) and warned about otherwise (declare the site's own labels in ``routing.labels``)."""
from __future__ import annotations

from typing import Any, Iterable

from alertd.core.json_types import JSONObject, as_array
from alertd.core.matchers import MatcherError, parse_matchers
from alertd.core.yamlio import Path_
from alertd.schemas.messages import did_you_mean

# What alertd.rules.fields.incident_fields gives every incident (the header of rules/routing.yml lists them).
INCIDENT_FIELDS = frozenset({"id", "severity", "category", "status", "group", "cluster", "node", "namespace", "pod",
                             "signal", "signals", "xid", "xids", "action", "gpu", "fleet", "title"})
# Labels every Alertmanager alert or the shipped alert rules carry.
ALERT_LABELS = frozenset({"alertname", "team", "label_team", "prometheus", "receiver"})


def route_field_findings(routing: JSONObject, known_labels: Iterable[str]) -> list[tuple[bool, Path_, str]]:
    """Every matcher of ``routes[].match`` and ``maintenance[].match`` against the fields an incident has:
    (refused, where, message) for each name no incident has; refused when it looks like a typo."""
    out: list[tuple[bool, Path_, str]] = []
    declared = {x for x in as_array(routing.get("labels")) if isinstance(x, str)}
    owners = routing.get("owners")
    owner_labels = {str(x) for x in as_array(owners.get("labels"))} if isinstance(owners, dict) else set()
    fields = INCIDENT_FIELDS | ALERT_LABELS | frozenset(known_labels) | declared | owner_labels
    for section in ("routes", "maintenance"):
        for i, item in enumerate(as_array(routing.get(section))):
            match = item.get("match") if isinstance(item, dict) else None
            for j, text in enumerate(match if isinstance(match, list) else []):
                for name in _names(text):
                    if name in fields:
                        continue
                    path = ("routing", section, i, "match", j)
                    out.append(_finding(name, str(text), path, INCIDENT_FIELDS | ALERT_LABELS | declared))
    return out


def _finding(name: str, text: str, path: Path_, fields: Iterable[str]) -> tuple[bool, Path_, str]:
    hint = did_you_mean(name, fields)
    if hint:
        return True, path, (f"no incident has a field {name!r}{hint}: a missing field matches \"\", so {text!r} "
                            "decides the same for every incident")
    return False, path, (f"{name!r} is no incident field and no label alertd knows: it matches only incidents "
                         "whose alerts carry it (declare the site's labels in routing.labels)")


def _names(text: Any) -> list[str]:
    try:
        return [m.name for m in parse_matchers([text])]
    except (MatcherError, TypeError):
        return []  # the routing loader reports it

