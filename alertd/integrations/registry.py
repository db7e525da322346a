"""The integrations alertd knows, by name: the routing loader, the schemas, the config and setup ask here.

Adding an integration is one module with an ``Integration`` subclass, its line in INTEGRATIONS and its
section's line in NotifySection (docs/notifications.md, "Adding an integration: one file").
"""
from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from alertd.integrations import console

from alertd.integrations import opsgenie

from alertd.integrations import pagerduty

from alertd.integrations.slack import integration as slack

from alertd.integrations import outgoing_webhook as webhook
from alertd.core.json_types import JSONObject
from alertd.core.sections import Section, Span, written
from alertd.integrations.base import Integration, Links, NotifierSettings
from alertd.integrations.console import ConsoleSection
from alertd.integrations.opsgenie import OpsgenieSection
from alertd.integrations.outgoing_webhook import WebhookSection
from alertd.integrations.pagerduty import PagerDutySection
from alertd.integrations.slack.integration import SlackSection

__all__ = ["INTEGRATIONS", "Links", "NotifySection", "RetrySection", "get", "parse_settings", "receiver_parts"]

INTEGRATIONS: dict[str, Integration[Any, Any]] = {
    i.name: i for i in (console.INTEGRATION, slack.INTEGRATION, pagerduty.INTEGRATION, webhook.INTEGRATION,
                        opsgenie.INTEGRATION)
}


class RetrySection(Section, frozen=True):
    """How failed deliveries (5xx, 429, refused, timeouts) are retried: full-jitter exponential backoff from 1s, kept in the store so it survives restarts."""

    max_backoff: Annotated[Span, Meta(description=(
        "Longest wait between two attempts of one delivery; bounds how late a backlog goes out after an "
        "outage."))] = written(Span.from_config, "5m")
    max_attempts: Annotated[int, Meta(ge=1, description=(
        "Attempts before a delivery is given up (logged, counted as failed)."))] = 15


class NotifySection(Section, frozen=True):
    """Notifiers: the outbox's retries and each integration's section (a field per entry of INTEGRATIONS)."""

    retry: RetrySection = msgspec.field(default_factory=RetrySection)
    console: ConsoleSection = msgspec.field(default_factory=ConsoleSection)
    slack: SlackSection = msgspec.field(default_factory=SlackSection)
    pagerduty: PagerDutySection = msgspec.field(default_factory=PagerDutySection)
    webhook: WebhookSection = msgspec.field(default_factory=WebhookSection)
    opsgenie: OpsgenieSection = msgspec.field(default_factory=OpsgenieSection)


def get(name: str) -> Integration[Any, Any] | None:
    return INTEGRATIONS.get(name)


def receiver_parts() -> JSONObject:
    """The schema of each integration's part of a routing receiver (``receivers[].<name>``), by name, in the
    registry's order: routing.schema.json declares them as a receiver's keys."""
    return {name: i.receiver_schema for name, i in INTEGRATIONS.items()}


def parse_settings(notify: NotifySection, links: Links) -> dict[str, NotifierSettings]:
    """Every integration's settings from the decoded ``notify`` section (absent sections: defaults)."""
    return {name: i.settings(getattr(notify, name), links) for name, i in INTEGRATIONS.items()}
