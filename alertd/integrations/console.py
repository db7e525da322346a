"""The console: one log line per incident change, for the embedded setup and for tests.

Targets ``console``; accepts ``show`` only. A log line cannot be edited, so
items that would only keep a message current are never queued for it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Callable

from msgspec import UNSET, Meta, UnsetType

from alertd.core.json_types import JSONValue
from alertd.core.outbox_items import Intent, OutboxItem, Show, Target, Timeline
from alertd.core.yamlio import Path_
from alertd.core.sections import Section
from alertd.integrations.base import Delivered, Integration, Links, Notifier, NotifierSettings, NotifyStore, Problem

log = logging.getLogger("alertd.incidents")


class ConsoleNotifier(Notifier):
    kind = "console"

    async def deliver(self, items: list[OutboxItem], ref: str | None) -> Delivered:
        if not log.isEnabledFor(logging.INFO):
            return Delivered()
        for item in items:
            p = item.payload
            inc = (p.incident if isinstance(p, Show) else None) or {}
            events = "; ".join(f"{e['kind']}: {e.get('text', '')}".rstrip(": ")
                               for e in (p.events if isinstance(p, (Show, Timeline)) else ()))
            log.info(
                "%s [%s %s] %s — %s",
                inc.get("id"), inc.get("status"), inc.get("severity"), inc.get("title"), events,
                extra={"incident": inc, "change": list(p.kinds)},  # JSON logs carry the incident
            )
        return Delivered()


class ConsoleSection(Section, frozen=True):
    """One log line per incident change."""

    enabled: Annotated[bool | UnsetType, Meta(description=(
        "Log every incident change (default true when no other notifier is configured)."))] = UNSET

    @property
    def on(self) -> bool | None:
        """None when the file does not say: on unless another integration is configured."""
        return None if isinstance(self.enabled, UnsetType) else self.enabled


@dataclass(slots=True)
class ConsoleSettings(NotifierSettings):
    on: bool | None = None  # None: on unless another integration is configured

    @property
    def enabled(self) -> bool:
        return self.on is not False


class Console(Integration[ConsoleSettings, ConsoleSection]):
    name = "console"
    intents = frozenset({Intent.SHOW})
    remembers = False
    receiver_schema = {"type": "boolean", "description": "Also log to the console."}
    section = ConsoleSection

    def targets(self, doc: JSONValue, problem: Problem, path: Path_) -> list[Target]:
        return [self.target()] if doc else []

    def settings(self, section: ConsoleSection, links: Links) -> ConsoleSettings:
        return ConsoleSettings(on=section.on)

    def notifier(self, settings: ConsoleSettings, store: NotifyStore, clock: Callable[[], datetime], *,
                 installation: Callable[[], str] = lambda: "") -> Notifier:
        return ConsoleNotifier()


INTEGRATION = Console()
