"""The ``sources`` config section, parsed: the kube-health watch and the CloudEvents receiver."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict

from alertd.core.durations import parse_duration


class KubeHealthDoc(TypedDict, total=False):
    """``sources.kube_health`` as config.schema.json admits it."""

    enabled: bool
    cluster: str
    max_event_age: str  # a Prometheus duration
    unready_after: str


class CloudEventsDoc(TypedDict, total=False):
    enabled: bool
    cluster: str


class SourcesDoc(TypedDict, total=False):
    kube_health: KubeHealthDoc
    cloudevents: CloudEventsDoc


@dataclass(frozen=True, slots=True)
class KubeHealthSettings:
    enabled: bool = False
    cluster: str = ""
    max_event_age: timedelta = timedelta(hours=1)
    unready_after: float = 60.0  # seconds; 0: a broken watch never fails /readyz

    @classmethod
    def from_doc(cls, doc: KubeHealthDoc | None) -> "KubeHealthSettings":
        doc, d = doc or {}, cls()
        return cls(enabled=bool(doc.get("enabled", False)), cluster=str(doc.get("cluster", "")),
                   max_event_age=parse_duration(doc["max_event_age"]) if "max_event_age" in doc else d.max_event_age,
                   unready_after=parse_duration(doc["unready_after"]).total_seconds() if "unready_after" in doc
                   else d.unready_after)


@dataclass(frozen=True, slots=True)
class CloudEventsSettings:
    enabled: bool = True
    cluster: str = ""

    @classmethod
    def from_doc(cls, doc: CloudEventsDoc | None) -> "CloudEventsSettings":
        doc = doc or {}
        return cls(enabled=bool(doc.get("enabled", True)), cluster=str(doc.get("cluster", "")))


@dataclass(frozen=True, slots=True)
class SourcesSettings:
    kube_health: KubeHealthSettings = KubeHealthSettings()
    cloudevents: CloudEventsSettings = CloudEventsSettings()

    @classmethod
    def from_doc(cls, doc: SourcesDoc | None) -> "SourcesSettings":
        doc = doc or {}
        return cls(KubeHealthSettings.from_doc(doc.get("kube_health")), CloudEventsSettings.from_doc(doc.get("cloudevents")))


__all__ = ["CloudEventsDoc", "CloudEventsSettings", "KubeHealthDoc", "KubeHealthSettings", "SourcesDoc", "SourcesSettings"]
