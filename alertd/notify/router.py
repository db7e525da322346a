"""Changes -> outbox work. Without a routing section every change goes to the console."""
from __future__ import annotations

from datetime import datetime
from typing import Iterable

from alertd.model import Change
from alertd.store.base import OutboxItem


def change_payload(change: Change) -> dict:
    return {
        "kinds": change.kinds,
        "urgent": change.urgent,
        "incident": change.incident.to_dict(with_members=False),
        "events": [e.to_dict() for e in change.events],
    }


class ConsoleRouter:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def route(self, changes: Iterable[Change], now: datetime) -> list[OutboxItem]:
        if not self.enabled:
            return []
        return [OutboxItem(c.incident.id, "console", "log", change_payload(c), now) for c in changes]
