"""The ``classify`` section: where the recording rules that alerts' expressions use come from, parsed once
with the configuration (alertd/app/recording_rules.py reads them)."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from alertd.core.sections import Seconds, Section, duration

PrometheusURL = Annotated[str, Meta(pattern="^https?://[^/?#]+(/[^?#]*)?$")]


class RulesApiSettings(Section, frozen=True):
    """Ask the Prometheus named in an alert's generatorURL for its recording rules (GET /api/v1/rules?type=record). Off unless `prometheus` lists it."""

    prometheus: Annotated[tuple[PrometheusURL, ...], Meta(description=(
        "Base URLs of the Prometheus servers alertd may ask (as in their generatorURL, e.g. "
        "http://prometheus.monitoring:9090). A generatorURL under none of them is never fetched."))] = ()
    ttl: Annotated[Seconds, Meta(description=(
        "How long a Prometheus's rules are trusted before they are asked again."))] = duration("10m")
    retry: Annotated[Seconds, Meta(description=(
        "How long after a failed request a Prometheus is asked again."))] = duration("1m")
    timeout: Annotated[Seconds, Meta(description="Longest a request may take.")] = duration("5s")
    wait: Annotated[Seconds, Meta(description=(
        "Longest an engine step waits for rules it is missing before it classifies with what it knows "
        "(webhooks are answered before, never after)."))] = duration("2s")
    max_bytes: Annotated[int, Meta(ge=1024, description="Largest rules response read (8 MiB by default).")] = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        # Compared with generatorURLs by prefix: one trailing slash or none is the same server.
        msgspec.structs.force_setattr(self, "prometheus", tuple(p.rstrip("/") for p in self.prometheus))


class ClassifySettings(Section, frozen=True):
    """The site's Prometheus rule files and rules API, for alerts that read recording rules."""

    prometheus_rules: Annotated[tuple[Annotated[str, Meta(min_length=1)], ...], Meta(description=(
        "The site's Prometheus rule files (paths or globs, relative to the config file; plain files or "
        "PrometheusRule resources). Their recording rules are expanded when an alert's expression reads a "
        "recorded series (node:dcgm_up:min == 0)."))] = ()
    rules_api: RulesApiSettings = msgspec.field(default_factory=RulesApiSettings)


__all__ = ["ClassifySettings", "RulesApiSettings"]
