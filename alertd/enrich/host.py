"""What enrichment needs from the service (alertd/app/service.py's Service): Protocols, so enrich depends on
this narrow surface instead of the service's insides (its engine and state), and tests or benchmarks can
hand it anything that has it."""
from __future__ import annotations

from typing import Iterable, Mapping, Protocol, Sequence

from prometheus_client import Histogram
from prometheus_client.registry import Collector

from alertd.core.json_types import JSONValue
from alertd.gpu.catalog import XidCatalog
from alertd.gpu.sxid import SxidCatalog
from alertd.core.model import Change, Incident, Signal


class HasCatalog(Protocol):
    """The loaded rules: enrichment reads the Xid and SXid catalogs to classify what it finds in the kernel log."""

    @property
    def catalog(self) -> XidCatalog: ...

    @property
    def sxids(self) -> SxidCatalog: ...


class HasMetrics(Protocol):
    """The service's metrics (alertd/core/service_metrics.py): enrichment adds its histogram and counters to them."""

    def histogram(self, name: str, documentation: str, buckets: Iterable[float]) -> Histogram: ...

    def add_collector(self, collector: Collector) -> None: ...


class EnrichHost(Protocol):
    """The service as enrichment sees it: read an open incident, write what was found back."""

    @property
    def rules(self) -> HasCatalog: ...

    @property
    def metrics(self) -> HasMetrics: ...

    def open_incident(self, incident_id: str) -> Incident | None:
        """The incident as the engine holds it now; None once it is gone or when this process is not the engine."""

    def fleet_children_on(self, fleet_id: str, node: str) -> list[Incident]:
        """A fleet incident's open child incidents on one node (looked up by node, not walked)."""

    async def enrich(self, incident_id: str, annotations: Mapping[str, tuple[JSONValue, str]], signals: Sequence[Signal],
                     source: str) -> list[Change]:
        """Write annotations (key -> value and the event's text; None removes) and evidence in one step."""


__all__ = ["EnrichHost", "HasCatalog", "HasMetrics"]
