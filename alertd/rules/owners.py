"""Job owners: which team owns an incident, and which receiver hears for that team.

Routes with ``owners: true`` send application Xids to the owning team's
receiver; the team comes from member labels, the ``owners`` annotation that
enrichment adds, or namespace patterns, in that order.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Container

from alertd.core.model import Incident
from alertd.rules.fields import members_in_order
from alertd.rules.routing_section import DECLARED_OWNERS


@dataclass(frozen=True, slots=True)
class OwnerRouting:
    """The routing section's ``owners``: how an incident's owning team is found and which receiver hears it."""

    labels: tuple[str, ...] = DECLARED_OWNERS.labels  # the declaration's (alertd/rules/routing_section.py)
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
        for team in inc.findings.teams(self.labels):
            return team
        namespaces = {inc.namespace} | {m.subject.namespace for m in members}
        namespaces.discard("")
        for pattern, team in self.namespaces:
            for ns in sorted(namespaces):
                if fnmatch.fnmatchcase(ns, pattern):
                    return team
        return ""

    def channel_for(self, inc: Incident) -> str:
        return inc.findings.channel()

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
