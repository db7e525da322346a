"""The sources besides the webhook, as parts of the service: the kube-health watch runs on the leader only.

It reads Kubernetes through enrich.kube's credentials (the same client enrichment uses, its own
connection pool), stores through the service's inbox append, reports its watches in /metrics
(``alertd_source_watch_up``) and, when one stays broken, in /readyz.
"""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import Callable

from alertd.config.settings import Config
from alertd.core.service_metrics import Metrics
from alertd.enrich.kube_api import KubeApi
from alertd.enrich.settings import KubeSettings
from alertd.rules.kube_health import KubeHealthRules
from alertd.sources.kube_health import KubeHealthSource, Receives

log = logging.getLogger(__name__)
METRICS_EVERY = 1.0  # seconds between copies of the watches' state into the gauges


class KubeHealthPart:
    """A leader part: started when this process becomes the engine, stopped at once when it stops being it."""

    name = "kube-health"

    def __init__(self, cfg: Config, rules: Callable[[], KubeHealthRules], receive: Receives, *,
                 clock: Callable[[], datetime], metrics: Metrics, api: KubeApi | None = None):
        self.api = api or KubeApi(cfg.enrich.kube or KubeSettings())
        self.source = KubeHealthSource(cfg.sources.kube_health, rules, self.api, receive, clock=clock)
        self.metrics = metrics
        self._task: asyncio.Task[None] | None = None
        for s in self.source.statuses():
            metrics.watch_up.labels(s.name)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="alertd-kube-health")

    async def _run(self) -> None:
        run = asyncio.create_task(self.source.run(), name="alertd-kube-watches")
        try:
            while not run.done():
                self.observe()
                await asyncio.wait({run}, timeout=METRICS_EVERY)
            run.result()
        finally:
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)

    def observe(self) -> None:
        for s in self.source.statuses():
            self.metrics.watch_up.labels(s.name).set(1 if s.up else 0)
            self.metrics.watch_relists.labels(s.name).set(s.relists)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for s in self.source.statuses():
            s.up, s.failing_since = False, None
        self.observe()

    def failure(self) -> str:
        """For /readyz: a watch broken too long ("" otherwise, and always on a follower)."""
        return self.source.failure(time.monotonic()) if self._task is not None else ""

    async def close(self) -> None:
        await self.api.close()


__all__ = ["KubeHealthPart"]
