"""What the web app needs from the service (alertd/app/service.py's Service) and from its store: Protocols, so
the handlers depend on this surface instead of the service's insides, and the type checker says which parts of
the store the web relies on (history reads, the audit trail, the quarantine, sessions: alertd/store/facade.py)."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Collection, Coroutine, Protocol

from alertd.core.json_types import JSONObject
from alertd.app.remediate import RemediationRunner
from alertd.app.service import Records
from alertd.app.store_health import StoreHealth
from alertd.config.settings import Config
from alertd.ha.commands import CommandRunner
from alertd.core.model import Incident
from alertd.core.service_metrics import Metrics
from alertd.rules.ruleset import RuleSet
from alertd.report.compute import Period
from alertd.store.base import AuditEntry
from alertd.store.quarantine import SetAside
from alertd.web.fleet_views import FleetReads


class Reports(Protocol):
    """The reliability report (alertd/app/reporting.py) as the report routes ask it."""

    async def report(self, p: Period) -> JSONObject: ...

    @property
    def no_fleet_size(self) -> str:
        """Why GPU-days cannot be counted (no fleet-size samples), or ""."""


class GroupFetcher(Protocol):
    """Reconciliation as the webhook handler uses it: fetch a truncated group's full set from Alertmanager."""

    async def fetch_group(self, group_labels: dict[str, str], receiver: str) -> None: ...


class WebStore(FleetReads, Protocol):
    """The store as the pages and the API use it: incidents and their history, the audit trail, the set-aside
    inbox, browser sessions and Slack's replay cache."""

    async def get_incident(self, incident_id: str) -> Incident | None: ...

    async def list_remediations(self, *, incident_id: str | None = None, states: tuple[str, ...] = (),
                                cluster: str | None = None, limit: int = 500) -> list[JSONObject]: ...

    async def incident_docs(self, ids: list[str]) -> list[JSONObject]: ...

    async def incidents_with_members(self, ids: list[str]) -> list[Incident]: ...

    async def open_incidents_on(self, nodes: list[str], limit: int, known: Collection[str] = ()) -> list[Incident]: ...

    async def list_incidents(self, *, status: str | None = None, node: str | None = None,
                             limit: int = 100) -> list[JSONObject]: ...

    async def notification_state(self, incident_id: str) -> dict[str, JSONObject]: ...

    async def list_set_aside(self, *, limit: int = 100, before: int | None = None) -> list[SetAside]: ...

    async def list_audit(self, *, since: datetime | None = None, actor: str | None = None,
                         action: str | None = None, limit: int = 100) -> list[AuditEntry]: ...

    async def remember_once(self, key: str, now: datetime, forget_before: datetime) -> bool: ...

    async def create_session(self, key: str, name: str, token: str, now: float, expires_at: float) -> None: ...

    async def find_session(self, key: str, now: float) -> tuple[str, str] | None: ...

    async def end_session(self, key: str) -> bool: ...

    async def member_labels(self, ids: list[str]) -> list[tuple[str, dict[str, str]]]: ...


class WebHost(CommandRunner, Protocol):
    """The service as the web app sees it: configuration, metrics, readiness, the inbox, the actions a person
    takes on an incident (the commands of alertd/core/incident_commands.py, run or forwarded), and the parts
    it reads directly."""

    @property
    def cfg(self) -> Config: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def store(self) -> WebStore: ...

    @property
    def rules(self) -> RuleSet: ...

    @property
    def health(self) -> StoreHealth: ...

    @property
    def reporting(self) -> Reports: ...

    @property
    def remediation(self) -> RemediationRunner: ...

    @property
    def reconciler(self) -> GroupFetcher | None:
        """Set when Alertmanager URLs are configured: reads a truncated group's full set."""

    @property
    def recorder(self) -> Records | None:
        """Set under ``alertd serve --record``: every accepted webhook is appended to a file."""

    @property
    def clock(self) -> Callable[[], datetime]: ...

    @property
    def ready(self) -> bool: ...

    @property
    def role_name(self) -> str: ...

    @property
    def held_summarised(self) -> int: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def backlog_refusal(self) -> str | None: ...

    async def receive(self, body: bytes, alerts: int, received_at: datetime | None = None) -> int: ...

    def background(self, coro: Coroutine[Any, Any, Any]) -> None: ...

    async def audit(self, actor: str, action: str, target: str, via: str, outcome: str = "ok",
                    detail: str = "") -> None: ...

    async def replay(self, item_id: int) -> tuple[SetAside, int] | None: ...

    def reload_rules(self) -> tuple[bool, str]: ...


__all__ = ["WebHost", "WebStore"]
