"""The ``report`` section of the configuration, parsed once (alertd/config/settings.py) into what the report's
background work reads (alertd/app/reporting.py): docs/reliability-report.md."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypedDict

from alertd.core.durations import parse_duration
from alertd.report.digest import DigestDoc, DigestSettings


class ReportDoc(TypedDict, total=False):
    """The ``report`` config section as config.schema.json admits it."""

    sample_interval: str
    sample_fleet: bool
    cluster: str
    digest: DigestDoc


@dataclass(frozen=True, slots=True)
class ReportSettings:
    """``sample_interval``: how often the fleet's GPU nodes are sampled from the Kubernetes API (the day's last
    sample is the day's row), ``sample_fleet`` false: never; ``cluster``: the cluster the samples are of ("": the
    Kubernetes client's, else ``normalize.cluster``); ``digest``: the weekly digest."""

    sample_interval: timedelta = timedelta(hours=1)
    sample_fleet: bool = True
    cluster: str = ""
    digest: DigestSettings = field(default_factory=DigestSettings)

    @classmethod
    def from_doc(cls, doc: ReportDoc | None) -> "ReportSettings":
        doc = doc or {}
        return cls(sample_interval=parse_duration(doc.get("sample_interval", "1h")),
                   sample_fleet=bool(doc.get("sample_fleet", True)), cluster=str(doc.get("cluster") or ""),
                   digest=DigestSettings.from_doc(doc.get("digest")))


__all__ = ["ReportSettings"]
