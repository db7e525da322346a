"""What every simulated scrape target server shares: its address as a Prometheus target, a thread to serve
from, and the scrape config of testkit/sim/prometheus_config.py for its nodes."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from testkit.sim.prometheus_config import write_prometheus_config
from testkit.loopback import LoopbackServer, serving_in_thread


class ScrapeTargets(LoopbackServer):
    """A LoopbackServer serving /nodes/{node}/metrics, /nodes/{node}/node-metrics and /ksm/metrics."""

    cluster: str

    @property
    def node_names(self) -> list[str]:
        raise NotImplementedError

    def render_ksm(self) -> str:
        raise NotImplementedError

    def app(self) -> web.Application:
        """The three scrape routes; a simulator adds its own routes to them."""
        app = web.Application()
        app.router.add_get("/nodes/{node}/metrics", self._h_dcgm)
        app.router.add_get("/nodes/{node}/node-metrics", self._h_node)
        app.router.add_get("/ksm/metrics", self._h_ksm)
        return app

    async def _h_dcgm(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _h_node(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _h_ksm(self, request: web.Request) -> web.Response:
        return self.exposition(self.render_ksm())

    @staticmethod
    def exposition(body: str) -> web.Response:
        """A scrape's answer in the text exposition format."""
        return web.Response(text=body, content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})

    @property
    def address(self) -> str:
        """host:port, as a Prometheus target."""
        if self.port is None:
            raise RuntimeError("simulator not started")
        return f"{self.host}:{self.port}"

    @contextlib.contextmanager
    def running_in_thread(self, timeout: float = 10.0) -> Iterator[Self]:
        """Run the server on a private event loop in a daemon thread."""
        with serving_in_thread(self, timeout=timeout):
            yield self

    def write_prometheus_config(self, path: str | Path, **kwargs: Any) -> Path:
        """`write_prometheus_config` for this running simulator."""
        return write_prometheus_config(path, self.address, self.node_names, cluster=self.cluster, **kwargs)
