"""The service: its parts wired together at construction, started in order and stopped in reverse.

Receive path: validate -> append the webhook to the inbox log -> 2xx (alertd/app/admission.py).
Processor:    log -> drop redelivered alerts -> engine -> route -> one commit (alertd/app/processor.py).
Outbox:       due work -> notifiers, with durable retries (alertd/notify/outbox.py).
Leadership:   when this process runs the engine, and what runs only then (alertd/app/leadership.py).

The parts, in the order they start: the store (and the installation id it keeps), the clients that close
with it (notifiers, lookups, reconciler, the classification budget), the backlog counter, leadership (which
starts the processor, ticker, outbox, housekeeping and reconciler while it leads). The web handlers see
the service through this class; what they call is delegated to the part that does it.
"""
from __future__ import annotations

import logging
import secrets
from datetime import datetime, timezone
from typing import Any, Callable, Coroutine, Mapping, Protocol, Sequence, runtime_checkable

from alertd.core.incident_commands import IncidentCommand, LinkTicket
from alertd.core.json_types import JSONValue
from alertd.app.actions import Actions
from alertd.app.budget import Budget
from alertd.app.admission import Admission
from alertd.app.housekeeping import Housekeeping
from alertd.app.leadership import Leadership, Resumes
from alertd.app.lifecycle import Hooks, Lifecycle, Part, Task
from alertd.app.intake import EdgeLookup
from alertd.app.processor import OutboxRunner, Processor, Submits
from alertd.app.recording_rules import fetcher_for
from alertd.app.reload import RuleReload
from alertd.app.remediate import RemediationRunner
from alertd.app.rma_handoff import RmaHandoff, build_systems
from alertd.app.reporting import Reporting
from alertd.app.sources import KubeHealthPart
from alertd.app.store_health import StoreHealth
from alertd.config.settings import Config
from alertd.core.model import Alert, Change, Incident, Signal
from alertd.core.service_metrics import Metrics
from alertd.engine.pipeline import Engine
from alertd.enrich.kube import KubeContext
from alertd.enrich.node_index import NodeIndex
from alertd.ha import commands
from alertd.ha.elector import Elector, replica_name
from alertd.integrations.base import Notifier
from alertd.integrations.console import ConsoleNotifier
from alertd.notify.outbox import OutboxWorker
from alertd.notify.router import ConsoleRouter, Router
from alertd.rules.ruleset import RuleSet
from alertd.store.facade import SqlStore
from alertd.store.quarantine import SetAside

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Enriches(Submits, Resumes, Protocol):
    """The enricher (alertd/enrich/enricher.py) as the service wires it: bound to the service at construction."""

    def bind(self, service: Any) -> None: ...

    @property
    def kube(self) -> KubeContext | None:
        """Its Kubernetes client, when it has one: the report samples the fleet with it."""


class Reconciles(Protocol):
    """Reconciliation with Alertmanager (alertd/alertmanager/reconcile_loop.py): runs on the leader."""

    async def run(self) -> None: ...

    async def close(self) -> None: ...

    async def fetch_group(self, group_labels: dict[str, str], receiver: str) -> None: ...


@runtime_checkable
class KeepsMeta(Protocol):
    """The store as the service's start reads it: the installation id kept at the first start."""

    async def meta_setdefault(self, key: str, value: str) -> str: ...


class Records(Protocol):
    """``serve --record FILE`` (alertd/authoring/record.py): the webhook handler appends each accepted webhook."""

    def write(self, received_at: datetime, raw_body: bytes | str) -> None: ...


class Service:
    def __init__(self, cfg: Config, store: SqlStore, rules: RuleSet, *, clock: Callable[[], datetime] = utcnow,
                 notifiers: dict[str, Notifier] | None = None, router: ConsoleRouter | Router | None = None,
                 enricher: Enriches | None = None, role: str = "engine", shared_inbox: bool | None = None,
                 nodes: NodeIndex | None = None, metrics: Metrics | None = None, health: StoreHealth | None = None,
                 reconciler: Callable[[Service], Reconciles | None] | None = None,
                 recorder: Records | None = None):
        self.cfg, self.store, self.clock, self.role = cfg, store, clock, role
        self.shared_inbox = role != "engine" if shared_inbox is None else shared_inbox
        self.metrics = metrics or Metrics()
        self.health = health or StoreHealth()  # for /readyz
        self.nodes = nodes  # exporter pod / address -> node, from Kubernetes (enrich/node_index.py)
        self.notifiers: dict[str, Notifier] = notifiers if notifiers is not None else {"console": ConsoleNotifier()}
        self.router = router or ConsoleRouter(enabled=cfg.console is not False)
        self.enricher = enricher  # runs after commit, off the request path; reports back through enrich()
        self.recorder = recorder  # serve --record: the webhook handler appends every accepted webhook
        self.ready = False
        self.reporting = Reporting(  # fleet samples, report facts, digest
            self, cfg.report, clock, kube=enricher.kube if enricher is not None else None, metrics=self.metrics,
            cluster_default=cfg.normalize.cluster_default, external_url=cfg.external_url)
        # Cordon / drain proposals, approvals and the executor (alertd/app/remediate.py, docs/remediation.md).
        # A replica's name in the engine lease also fences the remediations it claims; one engine is "engine".
        self.holder = replica_name() if role == "replica" else "engine"
        self.tickets = RmaHandoff(store, build_systems(cfg.rma), holder=self.holder, clock=self.clock,
                                  link=lambda incident_id, ticket: self.run(LinkTicket(incident_id, ticket)), alertd_url=cfg.external_url) if cfg.rma.enabled else None
        self.remediation = RemediationRunner.from_config(self, cfg.enrich.kube, holder=self.holder, tickets=self.tickets)
        self.processor = self._processor(rules)
        self.admission = Admission(cfg, store, clock=clock, metrics=self.metrics, health=self.health,
                                   wake=self.processor.wake)
        self.actions = Actions(store, self.processor, metrics=self.metrics, receive=self.admission.receive)
        self.reload_rules = RuleReload(cfg, self.processor, self.router, self.metrics)
        self.reconciler = reconciler(self) if reconciler is not None else None
        self.kube_health = KubeHealthPart(cfg, lambda: self.rules.kube_health, self.receive, clock=clock,
                                          metrics=self.metrics) if cfg.sources.kube_health.enabled else None
        if self.kube_health is not None:
            self.health.sources_report = self.kube_health.failure
        if enricher is not None:
            enricher.bind(self)
        self.leadership = Leadership(cfg, store, self.processor, role=role, parts=self._leader_parts(),
                                     nodes=nodes, enricher=enricher, holder=self.holder)
        self._lifecycle = Lifecycle(self._parts())
        if store.disk_bytes is not None:  # SQLite: a few stat() calls, so measured at each scrape
            self.metrics.measure_store_bytes(store.disk_bytes)

    def _processor(self, rules: RuleSet) -> Processor:
        def worker() -> OutboxWorker:
            return OutboxWorker(self.store, self.notifiers, self.metrics, self.clock,
                                max_attempts=self.cfg.retry_max_attempts,
                                max_backoff=self.cfg.retry_max_backoff.total_seconds())

        async def forwarded() -> int:
            return await commands.run_pending(self.store, self)

        self.rules_fetcher = fetcher_for(self)  # recording rules from the alerts' Prometheus (rules API)
        # What an engine step's alerts need from outside, asked before the step, each bounded in time.
        self._lookups: list[EdgeLookup] = [x for x in (self.nodes, self.rules_fetcher) if x is not None]
        return Processor(self.cfg, self.store, rules, clock=self.clock, metrics=self.metrics, health=self.health,
                         router=self.router, outbox=OutboxRunner(worker), lookups=self._lookups,
                         after_commit=[x for x in (self.enricher, self.remediation) if x is not None],
                         shared_inbox=self.shared_inbox, forwarded=forwarded if self.shared_inbox else None,
                         history=self.store)

    def _leader_parts(self) -> list[Part]:
        """What runs only while this process leads, in the order it starts."""
        housekeeping = Housekeeping(self.cfg, self.store, clock=self.clock, metrics=self.metrics,
                                    failed=self.processor.step_failed, before_prune=self.reporting.rollup,
                                    measured_at_scrape=self.store.disk_bytes is not None)
        parts: list[Part] = [Task("alertd-processor", self.processor.run), Task("alertd-ticker", self.processor.tick),
                             self.processor.outbox, Task("alertd-housekeeping", housekeeping.run),
                             Task("alertd-reporting", self.reporting.run), Task("alertd-remediation", self.remediation.run)]
        if self.reconciler is not None:
            parts.append(Task("alertd-reconciler", self.reconciler.run))
        if self.kube_health is not None:  # the watches: one reader in the fleet, the engine
            parts.append(self.kube_health)
        return parts

    def _parts(self) -> list[Part]:
        """The service's parts in the order they start (they stop in reverse)."""
        parts: list[Part] = [Hooks("store", self._open_store, self._close_store),
                             Hooks("clients", stop=self._close_clients)]
        if not (self.role == "engine" and self.shared_inbox):  # a --receivers group's engine takes no webhook
            parts.append(Task("alertd-backlog", self.admission.count_backlog))
        parts += [Hooks("background", stop=self.admission.cancel_background), self.leadership,
                  Hooks("ready", self._now_ready, self._not_ready)]
        return parts

    # ----- lifecycle -----

    @property
    def parts(self) -> list[Part]:
        """The service's parts in the order they start, for an App that runs more (alertd/cli/serve.py)."""
        return list(self._lifecycle.parts)

    async def start(self) -> None:
        await self._lifecycle.start()

    async def stop(self) -> None:
        await self._lifecycle.stop()

    async def _open_store(self) -> None:
        """Open the store; the installation id is configured, or generated at the first start and stored, so
        every replica and restart agrees."""
        await self.store.open()
        assert isinstance(self.store, KeepsMeta), f"{type(self.store).__name__} keeps no meta values"
        stored = await self.store.meta_setdefault("installation_id", self.cfg.installation_id or secrets.token_hex(4))
        if self.cfg.installation_id and stored != self.cfg.installation_id:
            log.warning("installation_id %r from the config overrides %r stored at the first start",
                        self.cfg.installation_id, stored)
            stored = self.cfg.installation_id
        self.cfg.installation_id = stored

    async def _close_store(self) -> None:
        await self.store.close()
        log.info("alertd stopped: pending work finished or left in the store for the next start")

    async def _close_clients(self) -> None:
        if self.reconciler is not None:
            await self.reconciler.close()
        await self.remediation.close()
        self.processor.budget.close()
        for notifier in self.notifiers.values():
            await notifier.close()
        for lookup in self._lookups:
            await lookup.close()
        if self.kube_health is not None:
            await self.kube_health.close()

    async def _now_ready(self) -> None:
        self.ready = True
        if self.role == "replica":  # leader or follower means something only among replicas
            log.info("alertd replica started as %s", self.role_name)

    async def _not_ready(self) -> None:
        self.ready = False

    # ----- what the web handlers, enrichment and tests read -----

    @property
    def rules(self) -> RuleSet:
        return self.processor.rules

    @property
    def engine(self) -> Engine | None:
        return self.processor.engine

    @property
    def outbox(self) -> OutboxWorker:
        return self.processor.outbox.worker

    @property
    def budget(self) -> Budget:
        return self.processor.budget

    @property
    def elector(self) -> Elector | None:
        return self.leadership.elector

    @property
    def leading(self) -> bool:
        return self.processor.engine is not None

    @property
    def role_name(self) -> str:
        """What /readyz reports: leader, follower or receiver."""
        if self.role == "receiver":
            return "receiver"
        return "leader" if self.leading else "follower"

    @property
    def backlog(self) -> int:
        return self.admission.backlog

    @backlog.setter
    def backlog(self, value: int) -> None:
        self.admission.backlog = value

    def open_incident(self, incident_id: str) -> Incident | None:
        """The incident as the engine holds it now; None once it is gone or when this process is not the engine
        (enrichment reads it here, alertd/enrich/host.py)."""
        return self.engine.state.incidents.get(incident_id) if self.engine is not None else None

    @property
    def held_summarised(self) -> int:
        """Open incidents the engine holds summarised, past ``processing.detailed_incidents`` (/readyz says so)."""
        return len(self.engine.state.summarised) if self.engine is not None else 0

    def fleet_children_on(self, fleet_id: str, node: str) -> list[Incident]:
        """A fleet incident's open child incidents on one node, by the engine's index (enrichment)."""
        return self.engine.state.fleet_children_on(fleet_id, node) if self.engine is not None else []

    # ----- delegated -----

    async def receive(self, body: bytes, alerts: int, received_at: datetime | None = None) -> int:
        return await self.admission.receive(body, alerts, received_at)

    async def receive_alerts(self, alerts: list[Alert]) -> int:
        return await self.admission.receive_alerts(alerts)

    def background(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.admission.background(coro)

    def backlog_refusal(self) -> str | None:
        return self.admission.backlog_refusal()

    async def process_pending(self) -> bool:
        return await self.processor.process_pending()

    async def run(self, command: IncidentCommand) -> list[Change]:
        return await self.actions.run(command)

    async def enrich(self, incident_id: str, annotations: Mapping[str, tuple[JSONValue, str]], signals: Sequence[Signal],
                     source: str) -> list[Change]:
        return await self.actions.enrich(incident_id, annotations, signals, source)

    async def audit(self, actor: str, action: str, target: str, via: str, outcome: str = "ok",
                    detail: str = "") -> None:
        await self.actions.audit(actor, action, target, via, outcome, detail)

    async def replay(self, item_id: int) -> tuple[SetAside, int] | None:
        return await self.actions.replay(item_id)
