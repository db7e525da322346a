"""What every simulated scrape target server shares: its address as a Prometheus target, a thread to serve
from, and the scrape config of tests/sim/prometheus_config.py for its nodes."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

from tests.sim.prometheus_config import write_prometheus_config
from tests.support.loopback import LoopbackServer, serving_in_thread


class ScrapeTargets(LoopbackServer):
    """A LoopbackServer serving /nodes/{node}/metrics, /nodes/{node}/node-metrics and /ksm/metrics."""

    cluster: str

    @property
    def node_names(self) -> list[str]:
        raise NotImplementedError

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
