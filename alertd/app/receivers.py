"""The receiver group of ``serve --receivers N``, as a part of the engine process.

Started after the service (the engine migrated the store before any receiver opens it): the control
socket the receivers forward POST /-/reload to, the health report their /readyz answers from (written
once before any receiver starts), the receiver processes, and a supervisor that restarts a dead one
and publishes the engine's collector-kept counters into the group's metrics files. Stopped before the
service: the receivers finish their requests while the engine still takes their webhooks.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from alertd.app.receiver_group import GroupDir, HealthReport, serve_control
from alertd.app.receiver_processes import ReceiverPool

log = logging.getLogger(__name__)
SUPERVISE_EVERY = 5.0  # seconds between looks at the receiver processes


class ReceiverGroup:
    name = "receiver group"

    def __init__(self, group: GroupDir, pool: ReceiverPool, *, reload: Callable[[], tuple[bool, str]],
                 failure: Callable[[], str], publish: Callable[[], None]):
        self.group, self.pool = group, pool
        self._reload, self._failure, self._publish = reload, failure, publish
        self._control: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        self._control = await serve_control(self.group.control, self._reload)
        reporting = HealthReport(self.group.health, self._failure)
        reporting.write()  # before any receiver asks: the receivers answer /readyz for the group
        self.pool.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(reporting.run(), name="alertd-group-health"),
                       loop.create_task(self._supervise(), name="alertd-group-supervisor")]

    async def _supervise(self) -> None:
        while True:
            await asyncio.sleep(SUPERVISE_EVERY)
            self.pool.restart_dead()
            self._publish()  # the engine's collector-kept counters (enrichment) into the group's files

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._control is not None:
            self._control.close()
            self._control = None
        self.pool.stop()
