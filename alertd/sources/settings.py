"""The ``sources`` config section, declared once (alertd/core/sections.py): the kube-health watch and the
CloudEvents receiver."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from alertd.core.sections import Seconds, Section, duration


class KubeHealthSettings(Section, frozen=True):
    """Watch node conditions and Events (rules/sources.yml says which) on the elected engine, through enrich.kube's credentials. Needs list and watch on nodes and events, get on pods."""

    enabled: Annotated[bool, Meta(description="Run the watch.")] = False
    cluster: Annotated[str, Meta(description=(
        "The cluster label the alerts carry (default: none, normalize.cluster applies)."))] = ""
    max_event_age: Annotated[Seconds, Meta(description=(
        "Events older than this are ignored (a first list returns old ones)."))] = duration("1h")
    unready_after: Annotated[Seconds, Meta(description="A watch failing this long fails /readyz; 0: never.")] = \
        duration("1m")


class CloudEventsSettings(Section, frozen=True):
    """The CloudEvents receiver (HTTP binding, structured and binary), authenticated like the webhook."""

    enabled: Annotated[bool, Meta(description="Serve the route; false answers 404.")] = True
    cluster: Annotated[str, Meta(description="The cluster label for events that name none.")] = ""


class SourcesSettings(Section, frozen=True):
    """Signals besides Alertmanager's webhook (docs/sources.md)."""

    kube_health: KubeHealthSettings = msgspec.field(default_factory=KubeHealthSettings)
    cloudevents: CloudEventsSettings = msgspec.field(default_factory=CloudEventsSettings)


__all__ = ["CloudEventsSettings", "KubeHealthSettings", "SourcesSettings"]
