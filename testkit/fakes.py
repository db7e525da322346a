"""In-process stand-ins for the enrichment tests: a notifier that records what it is
given, and the common part of the in-memory log backends."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from alertd.core.outbox_items import encode_payload
from alertd.enrich.logs import LogBackend, LogQuery
from alertd.enrich.settings import LogSettings
from alertd.integrations.base import Delivered, Notifier


class Recorder(Notifier):
    """A console notifier that keeps every payload (as stored: JSON) with its ``time.monotonic()`` in ``items``."""

    kind = "console"

    def __init__(self) -> None:
        self.items: list[tuple[float, dict]] = []

    async def deliver(self, items, ref) -> Delivered:
        self.items.extend((time.monotonic(), encode_payload(item.payload)) for item in items)
        return Delivered()


class ScriptedLogBackend(LogBackend):
    """A log backend answered in-process by :meth:`respond`.

    Every ``search`` counts a request, records the batch's nodes in ``batches``,
    waits for ``gate`` (an ``asyncio.Event``) and sleeps ``delay`` seconds when set,
    and raises ``fail`` when set; tests may change them at any time.
    """

    max_batch = 64

    def __init__(self, settings: LogSettings, *, delay: float = 0.0, fail: Exception | None = None):
        super().__init__(settings)
        self.delay, self.fail = delay, fail
        self.gate: asyncio.Event | None = None
        self.batches: list[list[str]] = []

    async def search(self, queries: Sequence[LogQuery]) -> Any:
        self.requests += 1
        self.batches.append([q.node for q in queries])
        if self.gate is not None:
            await self.gate.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return self.respond(queries)

    def respond(self, queries: Sequence[LogQuery]) -> Any:
        """The answer to a batch that neither waited out nor failed."""
        raise NotImplementedError
