"""What people and enrichment do to incidents (API, Slack buttons, forwarded commands), and the audit trail.

On the engine an action is one engine step (alertd/app/processor.py); where no engine runs (a follower, a
receiver) it is forwarded through the store to the process that leads (alertd/ha/commands.py).
"""
from __future__ import annotations

import json
import logging
from typing import Awaitable, Callable, Mapping, Protocol, Sequence

from alertd.core.incident_commands import IncidentCommand
from alertd.core.json_types import JSONValue
from alertd.app.processor import Processor
from alertd.core.model import Change, Signal
from alertd.core.service_metrics import Metrics
from alertd.ha import commands
from alertd.store.base import AuditEntry
from alertd.store.quarantine import SetAside

log = logging.getLogger(__name__)


class ActionsStore(commands.CommandStore, Protocol):
    """What actions need of the store: forwarding to the leader (alertd/store/coordination.py), the audit trail
    (alertd/store/audit.py) and the set-aside rows taken for replay (alertd/store/quarantine.py)."""

    async def record_audit(self, entry: AuditEntry) -> None: ...

    async def take_for_replay(self, item_id: int) -> SetAside | None: ...


class Actions:
    def __init__(self, store: ActionsStore, processor: Processor, *, metrics: Metrics,
                 receive: Callable[[bytes, int], Awaitable[int]]):
        self.store, self.processor, self.metrics, self._receive = store, processor, metrics, receive

    @property
    def leading(self) -> bool:
        return self.processor.engine is not None

    async def run(self, command: IncidentCommand) -> list[Change]:
        """One incident command (alertd/core/incident_commands.py): an engine step here, or forwarded to the
        process that leads."""
        if not self.leading:
            return await commands.forward(self.store, command)
        return await self.processor.step(lambda e, now: command.apply(e.correlator, now))

    async def enrich(self, incident_id: str, annotations: Mapping[str, tuple[JSONValue, str]], signals: Sequence[Signal],
                     source: str) -> list[Change]:
        """What enrichment found, in one engine step (Correlator.enrich)."""
        if not self.leading:
            return []  # enrichment runs on the leader only; a deposed leader's late results are dropped
        return await self.processor.step(
            lambda e, now: e.correlator.enrich(incident_id, now, source, annotations, signals))

    async def audit(self, actor: str, action: str, target: str, via: str, outcome: str = "ok",
                    detail: str = "") -> None:
        """Record who did what in the store's audit trail (``alertd audit``); a failed write is logged, not raised."""
        entry = AuditEntry(self.processor.clock(), actor, action, target, via, outcome, detail)
        log.info("audit: %s %s %s via %s: %s", actor, action, target, via, outcome)
        try:
            await self.store.record_audit(entry)
        except Exception as exc:
            self.metrics.store_errors.labels("audit").inc()
            log.error("could not record audit entry (%s %s %s): %s", actor, action, target, exc)

    async def replay(self, item_id: int) -> tuple[SetAside, int] | None:
        """Append a set-aside webhook or alert to the inbox log again (after a rule fix); its row is marked
        replayed first, under a renamed key, so the engine takes the copy. (row, new log id), or None."""
        item = await self.store.take_for_replay(item_id)
        if item is None:
            return None
        try:
            alerts = len(json.loads(item.body).get("alerts") or [])
        except (ValueError, AttributeError):  # a body that never read: it is set aside again, with the reason
            alerts = 0
        hook_id = await self._receive(item.body.encode(), alerts)
        log.warning("set-aside %s %s replayed as webhook %d", item.kind, item.key, hook_id)
        return item, hook_id
