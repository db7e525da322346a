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

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypedDict

from alertd.core.durations import parse_duration
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


class JiraDoc(TypedDict, total=False):
    """``rma.jira`` (config.schema.json; url, email, api_token and project required)."""

    url: str
    email: str
    api_token: str
    project: str
    issue_type: str
    labels: list[str]


class RmaWebhookDoc(TypedDict, total=False):
    """``rma.webhook`` (config.schema.json; url and signing_secret required)."""

    url: str
    signing_secret: str
    headers: dict[str, str]


class RmaDoc(TypedDict, total=False):
    jira: JiraDoc
    webhook: RmaWebhookDoc
    timeout: str


@dataclass(frozen=True, slots=True)
class JiraSettings:
    url: str  # https://your-site.atlassian.net
    email: str
    api_token: str
    project: str  # the project key
    issue_type: str = "Task"
    labels: tuple[str, ...] = ("gpu-rma",)


@dataclass(frozen=True, slots=True)
class RmaWebhookSettings:
    url: str
    signing_secret: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RmaSettings:
    """The ``rma`` section: where an approved RMA step opens its tickets (none: the step says so and fails)."""

    jira: JiraSettings | None = None
    webhook: RmaWebhookSettings | None = None
    timeout: float = 10.0  # seconds per request

    @property
    def enabled(self) -> bool:
        return self.jira is not None or self.webhook is not None

    @classmethod
    def from_doc(cls, doc: "RmaDoc | None") -> "RmaSettings":
        """The ``rma`` section of the configuration, valid by config.schema.json."""
        doc = doc or {}
        jira, hook = doc.get("jira"), doc.get("webhook")
        return cls(
            jira=JiraSettings(url=str(jira["url"]).rstrip("/"), email=jira["email"], api_token=jira["api_token"],
                              project=jira["project"], issue_type=jira.get("issue_type", "Task"),
                              labels=tuple(jira.get("labels", ("gpu-rma",)))) if jira else None,
            webhook=RmaWebhookSettings(url=hook["url"], signing_secret=hook["signing_secret"],
                                       headers=tuple(sorted((hook.get("headers") or {}).items()))) if hook else None,
            timeout=parse_duration(doc.get("timeout", "10s")).total_seconds())


__all__ = ["JiraDoc", "JiraSettings", "RmaDoc", "RmaSettings", "RmaWebhookDoc", "RmaWebhookSettings", "TicketError", "TicketSystem", "worth_retrying"]
