"""Where an RMA handoff opens its tickets: the configuration section ``rma`` and what a ticket system does.

Two systems: Jira Cloud (alertd/integrations/jira.py: REST v3 issue create, basic auth with an API token) and
a signed JSON webhook (alertd/integrations/rma_webhook.py: ServiceNow or anything else), either or both.
Secrets come from the environment (``${JIRA_API_TOKEN}``) or files (``api_token_file``,
``signing_secret_file``: alertd/config/secrets.py), like every other integration's.

A ticket system has no idempotency key to lean on (Jira's issue create has none), so alertd claims a row
per incident, GPU and target in the store before asking (alertd/store/tickets.py); ``find`` looks for a
ticket a crashed holder may have opened, by the ticket's own label, before opening another.
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Protocol

import msgspec
from msgspec import Meta

from alertd.core.sections import Seconds, Section, duration
from alertd.core.tickets import RmaEvidence, TicketLink


class TicketError(RuntimeError):
    """A ticket system refused or failed a request; ``retry``: worth trying again later (429, 5xx, network)."""

    def __init__(self, message: str, *, retry: bool):
        super().__init__(message)
        self.retry = retry


def worth_retrying(status: int) -> bool:
    """Whether a ticket system's HTTP status may pass on a later try (408, 429, 5xx); any other refusal is the
    request's or the configuration's fault and is not sent again."""
    return status in (408, 429) or status >= 500


class TicketSystem(Protocol):
    """One configured target: ``target`` names it (the store's row and the incident's link), ``system`` says
    which kind it is (jira, webhook)."""

    @property
    def target(self) -> str: ...

    @property
    def system(self) -> str: ...

    async def find(self, evidence: RmaEvidence) -> TicketLink | None:
        """The ticket opened for this evidence before (its label), if the system can tell; None otherwise."""

    async def open(self, evidence: RmaEvidence, now: datetime) -> TicketLink: ...

    async def close(self) -> None: ...


class JiraSettings(Section, frozen=True, kw_only=False):
    """Jira Cloud (REST API v3): an issue with the evidence as its description."""

    url: Annotated[str, Meta(pattern="^https?://", description="The site, e.g. https://example.atlassian.net.")]
    email: Annotated[str, Meta(min_length=3, description="The account the API token belongs to (basic auth).")]
    api_token: Annotated[str, Meta(min_length=1, description="The account's API token, e.g. ${JIRA_API_TOKEN}.")]
    project: Annotated[str, Meta(pattern="^[A-Z][A-Z0-9_]+$", description="The project key.")]
    issue_type: Annotated[str, Meta(min_length=1, description="The issue type of every ticket.")] = "Task"
    labels: Annotated[tuple[Annotated[str, Meta(pattern="^[^\\s]+$")], ...], Meta(description=(
        "Labels every issue gets (Jira refuses labels with spaces). alertd adds one of its own per "
        "ticket."))] = ("gpu-rma",)

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "url", self.url.rstrip("/"))  # paths are appended to it


class RmaWebhookSettings(Section, frozen=True, kw_only=False):
    """A signed JSON webhook (ServiceNow, or anything): the evidence, signed like notify.webhook's."""

    url: Annotated[str, Meta(pattern="^https?://", description="Where the evidence is POSTed.")]
    signing_secret: Annotated[str, Meta(min_length=16, description="HMAC-SHA256 key for X-Alertd-Signature.")]
    headers: Annotated[dict[str, str], Meta(description="Headers every request carries.")] = \
        msgspec.field(default_factory=dict)


class RmaSettings(Section, frozen=True):
    """Where an approved RMA handoff opens its tickets, one per GPU and incident in each (docs/remediation.md, "RMA handoff"). Secrets: ${ENV} or api_token_file / signing_secret_file."""

    jira: JiraSettings | None = None
    webhook: RmaWebhookSettings | None = None
    timeout: Annotated[Seconds, Meta(description="Per request.")] = duration("10s")

    @property
    def enabled(self) -> bool:
        """Without a ticket system an approved RMA step says so and fails."""
        return self.jira is not None or self.webhook is not None


__all__ = ["JiraSettings", "RmaSettings", "RmaWebhookSettings", "TicketError", "TicketSystem", "worth_retrying"]
