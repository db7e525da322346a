"""Admission: what a webhook meets on the request path, and nothing more.

A validated webhook is appended to the inbox log, durably, and the processor woken; the answer never
waits for the engine. A backlog counter (about once a second, off the request path) lets the handler
refuse webhooks with 503 while the inbox holds ``receiver.max_backlog`` not yet taken, so a sustained
overload cannot fill the disk (Alertmanager retries them).
"""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import Any, Callable, Coroutine, Protocol

from alertd.app.store_health import StoreHealth
from alertd.config.settings import Config
from alertd.core.model import Alert
from alertd.core.service_metrics import Metrics
from alertd.receive.payload import encode_webhook
from alertd.store.base import StoreUnavailable

log = logging.getLogger(__name__)
BACKLOG_EVERY = 1.0  # seconds between counts of the inbox backlog (receiver.max_backlog)
BACKLOG_WARN_EVERY = 10.0  # seconds between warnings about webhooks refused for the backlog


class InboxAppends(Protocol):
    """What admission needs of the store: the receive side of its inbox (alertd/store/inbox.py)."""

    async def append_hook(self, body: bytes, received_at: datetime, alerts: int) -> int: ...

    async def count_backlog_hooks(self) -> int: ...


class Admission:
    def __init__(self, cfg: Config, store: InboxAppends, *, clock: Callable[[], datetime], metrics: Metrics,
                 health: StoreHealth, wake: Callable[[], None]):
        self.cfg, self.store, self.clock, self.metrics, self.health = cfg, store, clock, metrics, health
        self._wake = wake
        self.backlog = 0  # webhooks not yet taken, as last counted (count_backlog)
        self._backlog_warned_at = -BACKLOG_WARN_EVERY
        self._tasks: list[asyncio.Task[Any]] = []

    async def receive(self, body: bytes, alerts: int, received_at: datetime | None = None) -> int:
        """Append a webhook (already validated, holding ``alerts`` alerts) to the inbox log, durably; its log id.
        Redelivered alerts are dropped when the engine takes it (alertd_alerts_duplicate_total)."""
        try:
            hook = await self.store.append_hook(body, received_at or self.clock(), alerts)
        except StoreUnavailable:
            self.metrics.store_errors.labels("append").inc()
            self.health.append_failed()
            raise
        self.health.append_ok()
        self.metrics.alerts.inc(alerts)
        self._wake()
        return hook

    async def receive_alerts(self, alerts: list[Alert]) -> int:
        """Alerts alertd makes itself (reconciliation) enter like any webhook, from the first one's receiver
        (which marks them: model.RECONCILED_BY)."""
        first = alerts[0] if alerts else None
        body = encode_webhook([a.to_wire() for a in alerts], first.receiver if first else "",
                              first.external_url if first else "")
        return await self.receive(body, len(alerts))

    def background(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run work off the request path (e.g. reading a truncated group), kept referenced until done."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def cancel_background(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def count_backlog(self) -> None:
        """Count the webhooks not yet taken about once a second: the handler compares the last count with
        receiver.max_backlog. A failed count keeps the last good one (a store that is down fails the append
        anyway)."""
        while True:
            try:
                self.backlog = await self.store.count_backlog_hooks()
                self.metrics.inbox_backlog.set(self.backlog)
            except Exception as exc:
                log.debug("could not count the inbox backlog, keeping %d: %s", self.backlog, exc)
            await asyncio.sleep(BACKLOG_EVERY)

    def backlog_refusal(self) -> str | None:
        """Why a webhook is refused now, or None: the inbox backlog (last count) is at receiver.max_backlog.
        Refused before it is read or stored, so a sustained overload cannot fill the disk; Alertmanager retries."""
        limit = self.cfg.max_backlog
        if not limit or self.backlog < limit:
            return None
        if time.monotonic() - self._backlog_warned_at >= BACKLOG_WARN_EVERY:
            self._backlog_warned_at = time.monotonic()
            log.warning("inbox backlog of %d webhooks is at receiver.max_backlog %d: webhooks are answered 503 "
                        "until the engine catches up (Alertmanager retries them)", self.backlog, limit)
        return f"the inbox holds {self.backlog:,} webhooks not yet processed (receiver.max_backlog {limit}); retry later"
