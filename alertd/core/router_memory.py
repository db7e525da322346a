"""The router's memory: the records a routing step changes and the store commits with the step.

Kept apart from both the router and the store, so neither imports the other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

Cordon = tuple[datetime, str]  # (cordoned since, the incident that showed it)


@dataclass(slots=True)
class RouterMemory:
    """What the router remembers between steps. It is stored with each step, so a failed commit,
    a restart or another instance taking over carries on from exactly what was committed."""

    sent: dict[str, set[str]] = field(default_factory=dict)  # incident -> targets it went to (loud)
    # closed incident -> when it can no longer reopen: its ``sent`` is kept until then, so a reopen tells a
    # target already paged (a flap) from one never paged (the info incident a fault came back to)
    reopenable: dict[str, datetime] = field(default_factory=dict)
    escalations: dict[str, set[str]] = field(default_factory=dict)  # incident -> escalations scheduled
    cordons: dict[tuple[str, str], Cordon] = field(default_factory=dict)  # (cluster, node) -> cordon


# Roles of the marks a router keeps per incident (RouterMemory.sent and .escalations).
SENT, ESCALATION, REOPENABLE = "sent", "escalation", "reopenable"  # REOPENABLE's value: an ISO instant


@dataclass(slots=True)
class MemoryDelta:
    """What one routing step changed in RouterMemory: committed in the step's transaction."""

    marks: set[tuple[str, str, str]] = field(default_factory=set)  # (incident, role, value) added
    forget: set[str] = field(default_factory=set)  # incidents that can no longer reopen: all their marks go
    drop: set[tuple[str, str]] = field(default_factory=set)  # (incident, role): that role's marks go, before ``marks``
    cordons: dict[tuple[str, str], Cordon | None] = field(default_factory=dict)  # None: the cordon ended

    def __bool__(self) -> bool:
        return bool(self.marks or self.forget or self.drop or self.cordons)
