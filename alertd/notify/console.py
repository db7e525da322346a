"""The default notifier: one log line per incident change, for the embedded setup and for tests."""
from __future__ import annotations

import logging

from alertd.notify.base import Delivered, Notifier
from alertd.store.base import OutboxItem

log = logging.getLogger("alertd.incidents")


class ConsoleNotifier(Notifier):
    kind = "console"

    async def deliver(self, item: OutboxItem, ref: str | None) -> Delivered:
        if not log.isEnabledFor(logging.INFO):
            return Delivered()
        inc = item.payload.get("incident", {})
        events = "; ".join(f"{e['kind']}: {e.get('text', '')}".rstrip(": ") for e in item.payload.get("events", []))
        log.info(
            "%s [%s %s] %s — %s",
            inc.get("id"), inc.get("status"), inc.get("severity"), inc.get("title"), events,
            extra={"incident": inc, "change": item.payload.get("kinds", [])},  # JSON logs carry the incident
        )
        return Delivered()
