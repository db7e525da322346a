"""The ``report`` section of the configuration, parsed once (alertd/config/settings.py) into what the report's
background work reads (alertd/app/reporting.py): docs/reliability-report.md."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from alertd.core.sections import Section, Span, written
from alertd.report.digest import DigestSettings


class ReportSettings(Section, frozen=True):
    """The fleet reliability report (docs/reliability-report.md): fleet size samples, metrics and the weekly Slack digest."""

    sample_fleet: Annotated[bool, Meta(description=(
        "Sample the GPU nodes (allocatable nvidia.com/gpu, type label, cordon) from the Kubernetes API of "
        "enrich.kube."))] = True
    sample_interval: Annotated[Span, Meta(description=(
        "How often the fleet is sampled; the day's latest sample is the day's row."))] = written(Span.from_config, "1h")
    cluster: Annotated[str, Meta(description=(
        "The cluster name samples are stored under; empty: enrich.kube.cluster, else normalize.cluster."))] = ""
    digest: DigestSettings = msgspec.field(default_factory=lambda: DigestSettings(channel=""))  # "": no digest


__all__ = ["ReportSettings"]
