"""Job owners: which team owns an incident, and which receiver hears for that team.

Routes with ``owners: true`` send application Xids to the owning team's
receiver; the team comes from member labels, the ``owners`` annotation that
enrichment adds, or namespace patterns, in that order.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Container, Iterable

from alertd.model import Incident
from alertd.notify.fields import members_in_order


@dataclass(frozen=True, slots=True)
class Owners:
    labels: tuple[str, ...] = ("team", "label_team", "owner", "label_owner")
    namespaces: tuple[tuple[str, str], ...] = ()  # (glob, team), first match wins
    teams: tuple[tuple[str, str], ...] = ()  # team -> receiver
    default: str = ""
    use_channels: bool = False  # a Slack channel named by the owner (enrichment: namespace/workload annotation)

    def team_for(self, inc: Incident) -> str:
        members = members_in_order(inc)
        for name in self.labels:
            for m in members:
                if m.labels.get(name):
                    return m.labels[name]
        for team in _annotation_teams(inc.annotations.get("owners"), self.labels):
            return team
        namespaces = {inc.namespace} | {m.subject.namespace for m in members}
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
                return str(o["channel"]).strip()
        return ""

    def receiver_for(self, inc: Incident, receivers: Container[str]) -> tuple[str, str]:
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
        labels: dict[str, Any] = value["labels"] if isinstance(value.get("labels"), dict) else value
        return [str(labels[n]) for n in label_names if isinstance(labels.get(n), str) and labels.get(n)]
    if isinstance(value, list):
        out: list[str] = []
        for v in value:
            out.extend(_annotation_teams(v, label_names))
        return out
    return []
