"""The running service: store, engine, processor loop and outbox worker wired together.

Receive path: validate -> append the webhook to the inbox log -> 2xx (nothing else on the request path).
Processor:    log -> drop redelivered alerts -> engine -> route -> one commit (keys taken, incidents,
              events, outbox).
Outbox:       due work -> notifiers, with durable retries.

Roles: ``engine`` always runs the engine (one process, the default); ``replica``
receives and runs the engine only while it holds the engine lease (several
replicas on PostgreSQL); ``receiver`` only receives (``serve --receivers N``).
The engine reads every webhook back from the log, whichever process received it;
actions taken where no engine runs are forwarded.
"""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence

from alertd.app.budget import Budget
from alertd.config.settings import Config
from alertd.engine.pipeline import Engine
from alertd.ha import commands
from alertd.ha.elector import Elector, replica_name
from alertd.app.store_health import StoreHealth
from alertd.app.intake import Intake
from alertd.core.service_metrics import Metrics
from alertd.core.model import ACKNOWLEDGED, OPEN, Alert, Change, Incident, Signal
from alertd.integrations.console import ConsoleNotifier
from alertd.integrations.base import Notifier
from alertd.notify.outbox import OutboxWorker
from alertd.notify.router import ConsoleRouter
from alertd.receive.payload import encode_webhook
from alertd.app.recording_rules import fetcher_for, with_site_recordings
from alertd.app.remediate import Remediations
from alertd.rules.ruleset import RuleSet, load_rules
from alertd.store.base import AuditEntry, Step, Store, StoreUnavailable, Taken

if TYPE_CHECKING:
    from alertd.enrich.node_index import NodeIndex

log = logging.getLogger(__name__)
KEEP_EVENTS_IN_MEMORY = 20
STEP_LINGER = 0.005  # seconds the processor waits after a wake-up to gather a larger step
BACKLOG_EVERY = 1.0  # seconds between counts of the inbox backlog (receiver.max_backlog)
BACKLOG_WARN_EVERY = 10.0  # seconds between warnings about webhooks refused for the backlog


class EdgeLookup(Protocol):
    """Something the engine reads that lives outside (Kubernetes, Prometheus' rules API): filled for a step's
    alerts before the step, within its own time bound, so the engine itself does no I/O."""

    async def prepare(self, alerts: Iterable[Alert]) -> None: ...

    async def close(self) -> None: ...


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Service(Intake):
    def __init__(self, cfg: Config, store: Store, rules: RuleSet, *, clock: Callable[[], datetime] = utcnow,
                 notifiers: dict[str, Notifier] | None = None, router: Any = None, enricher: Any = None,
                 role: str = "engine", shared_inbox: bool | None = None, nodes: NodeIndex | None = None):
        self.cfg, self.store, self.rules, self.clock = cfg, store, rules, clock
        self.role = role
        self.shared_inbox = role != "engine" if shared_inbox is None else shared_inbox
        self.elector: Elector | None = None
        self._leader_tasks: list[asyncio.Task] = []
        self.reconciler: Any = None  # set by the service builder when Alertmanager URLs are configured
        self.nodes = nodes  # exporter pod / address -> node, from Kubernetes (enrich/node_index.py)
        self.metrics = Metrics()
        self.engine: Engine | None = None
        self.budget = Budget()  # classification off the event loop, within a budget per alert
        self.worst_classify = 0.0  # the most CPU seconds one alert's classification took (alertd_classify_seconds_max)
        self.notifiers = notifiers if notifiers is not None else {"console": ConsoleNotifier()}
        self.router = router or ConsoleRouter(enabled=cfg.console is not False)
        self.outbox = self._outbox_worker(store, clock)
        # Enrichment runs after commit and off the request path; it reports back through enrich().
        self.enricher = enricher
        # Cordon / drain proposals, approvals and the executor (alertd/app/remediate.py, docs/remediation.md).
        self.remediation = Remediations.from_config(self)
        self.watchdog_names = set(rules.correlation.watchdog.alertnames)
        self.rules_fetcher = fetcher_for(self)  # recording rules from the alerts' Prometheus (rules API)
        # What an engine step's alerts need from outside, asked before the step, each bounded in time.
        self._lookups: list[EdgeLookup] = [x for x in (self.nodes, self.rules_fetcher) if x is not None]
        self._engine_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._stopping = False
        self.ready = False
        self.health = StoreHealth()  # for /readyz
        self._pending_counted_at = 0.0
        self.backlog = 0  # webhooks not yet taken, as last counted (_backlog_loop)
        self._backlog_warned_at = -BACKLOG_WARN_EVERY
        self.metrics.reload_ok.set(1)
        self.metrics.reload_time.set(time.time())
        if callable(getattr(store, "disk_bytes", None)):  # SQLite: a few stat() calls, so measured at each scrape
            self.metrics.measure_store_bytes(store.disk_bytes)

    def _outbox_worker(self, store: Store, clock: Callable[[], datetime]) -> OutboxWorker:
        return OutboxWorker(store, self.notifiers, self.metrics, clock, max_attempts=self.cfg.retry_max_attempts,
                            max_backoff=self.cfg.retry_max_backoff.total_seconds())

    # ----- lifecycle -----

    async def start(self) -> None:
        await self.store.open()
        await self._installation_id()
        if not (self.role == "engine" and self.shared_inbox):  # a --receivers group's engine takes no webhook
            self._tasks.append(asyncio.get_running_loop().create_task(self._backlog_loop(), name="alertd-backlog"))
        if self.role == "engine":
            await self._lead(0)
        elif self.role == "replica":
            ha = self.cfg.ha
            self.elector = Elector(self.store, holder=replica_name(), address=ha.advertise or self.cfg.listen,
                                   ttl=ha.lease_ttl, renew_every=ha.renew_interval,
                                   on_elected=self._lead, on_deposed=self._follow)
            await self.elector.round()  # lead at once when the lease is free
            self._tasks.append(asyncio.get_running_loop().create_task(self.elector.run(), name="alertd-elector"))
        self.ready = True
        log.info("alertd started as %s", self.role_name)

    async def _installation_id(self) -> None:
        """Configured, or generated at the first start and stored, so every replica and restart agrees."""
        import secrets

        stored = await self.store.meta_setdefault("installation_id", self.cfg.installation_id or secrets.token_hex(4))
        if self.cfg.installation_id and stored != self.cfg.installation_id:
            log.warning("installation_id %r from the config overrides %r stored at the first start",
                        self.cfg.installation_id, stored)
            stored = self.cfg.installation_id
        self.cfg.installation_id = stored

    @property
    def leading(self) -> bool:
        return self.engine is not None

    def open_incident(self, incident_id: str) -> Incident | None:
        """The incident as the engine holds it now; None once it is gone or when this process is not the engine
        (enrichment reads it here, alertd/enrich/host.py)."""
        return self.engine.state.incidents.get(incident_id) if self.engine is not None else None

    @property
    def role_name(self) -> str:
        """What /readyz reports: leader, follower or receiver."""
        if self.role == "receiver":
            return "receiver"
        return "leader" if self.leading else "follower"

    async def _lead(self, token: int) -> None:
        """Become the engine: fence every engine write, restore the state, start the engine's loops."""
        if token:
            self.store.set_fence(self.elector.holder if self.elector else None, token)  # type: ignore[attr-defined]
        state = await self.store.load_state()
        self.engine = Engine(self.rules, self.cfg.normalize, state, nodes=self.nodes)
        self.remediation.holder = self.elector.holder if self.elector else "engine"
        self.router.restore(await self.store.load_router_memory())
        if self.outbox._stopping:
            self.outbox = self._outbox_worker(self.store, self.clock)
        self._update_gauges()
        loop = asyncio.get_running_loop()
        self._leader_tasks = [
            loop.create_task(self._process_loop(), name="alertd-processor"),
            loop.create_task(self._tick_loop(), name="alertd-ticker"),
            loop.create_task(self.outbox.run(), name="alertd-outbox"),
            loop.create_task(self._housekeeping_loop(), name="alertd-housekeeping"),
            loop.create_task(self.remediation.run(), name="alertd-remediation"),
        ]
        if self.reconciler is not None:
            self._leader_tasks.append(loop.create_task(self.reconciler.run(), name="alertd-reconciler"))
        if self.enricher is not None and hasattr(self.enricher, "resume"):
            self.enricher.resume(state.incidents.values())
        self.metrics.leader.set(1)
        log.info("engine running: %d open incidents restored", len(state.incidents))

    async def _follow(self, why: str) -> None:
        """Stop the engine's loops at once (a deposed leader must stop sending); the store keeps the rest."""
        self.outbox.stop()
        for task in self._leader_tasks:
            task.cancel()
        await asyncio.gather(*self._leader_tasks, return_exceptions=True)
        self._leader_tasks = []
        self.engine = None
        self.health.step_ok()  # the failing engine is gone: a follower is ready (its /readyz must say so)
        self.metrics.leader.set(0)
        self.store.set_fence(None)  # type: ignore[attr-defined]
        log.warning("engine stopped on this replica: %s", why)

    async def stop(self) -> None:
        """Finish what was acknowledged (inbox -> engine), deliver what is due, then close the store."""
        self._stopping = True
        self.ready = False
        self.outbox.stop()
        self._wake.set()
        for task in self._tasks + self._leader_tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._leader_tasks, return_exceptions=True)
        if self.enricher is not None and hasattr(self.enricher, "close"):
            await self.enricher.close()
        if self.reconciler is not None:
            await self.reconciler.close()
        await self.remediation.close()
        if self.leading:
            try:
                deadline = time.monotonic() + 10
                while await self.process_pending() and time.monotonic() < deadline:
                    pass
                await asyncio.wait_for(self.outbox.drain(), 5)
            except Exception:  # shutting down: what is left stays in the store for the next start
                log.exception("could not finish pending work before shutdown")
        self.budget.close()
        if self.elector is not None:
            await self.elector.stop()
        for notifier in self.notifiers.values():
            await notifier.close()
        for lookup in self._lookups:
            await lookup.close()
        await self.store.close()
        log.info("alertd stopped: pending work finished or left in the store for the next start")

    # ----- receive -----

    async def receive(self, body: bytes, alerts: int, received_at: datetime | None = None) -> int:
        """Append a webhook (already validated, holding ``alerts`` alerts) to the inbox log, durably; its log id.
        Redelivered alerts are dropped when the engine takes it (alertd_alerts_duplicate_total)."""
        try:
            hook = await self.store.append_hook(body, received_at or self.clock(), alerts)
        except StoreUnavailable:
            self.metrics.store_errors.labels("append").inc()
            self.health.append_failed()
            raise
        self.health.append_ok()
        self.metrics.alerts.inc(alerts)
        self._wake.set()
        return hook

    async def receive_alerts(self, alerts: list[Alert]) -> int:
        """Alerts alertd makes itself (reconciliation) enter like any webhook, from the first one's receiver
        (which marks them: model.RECONCILED_BY)."""
        first = alerts[0] if alerts else None
        body = encode_webhook([a.to_wire() for a in alerts], first.receiver if first else "",
                              first.external_url if first else "")
        return await self.receive(body, len(alerts))

    def background(self, coro: Any) -> None:
        """Run work off the request path (e.g. reading a truncated group), kept referenced until done."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _backlog_loop(self) -> None:
        """Count the webhooks not yet taken about once a second, off the request path: the handler compares the
        last count with receiver.max_backlog. A failed count keeps the last good one (a store that is down
        fails the append anyway)."""
        while not self._stopping:
            try:
                self.backlog = await self.store.count_backlog_hooks()
                self.metrics.inbox_backlog.set(self.backlog)
            except Exception as exc:
                log.debug("could not count the inbox backlog, keeping %d: %s", self.backlog, exc)
            await asyncio.sleep(BACKLOG_EVERY)

    def backlog_refusal(self) -> str | None:
        """Why a webhook is refused now, or None: the inbox backlog (last count) is at receiver.max_backlog.
        Refused before it is read or stored, so a sustained overload cannot fill the disk; Alertmanager retries."""
        limit = self.cfg.max_backlog
        if not limit or self.backlog < limit:
            return None
        if time.monotonic() - self._backlog_warned_at >= BACKLOG_WARN_EVERY:
            self._backlog_warned_at = time.monotonic()
            log.warning("inbox backlog of %d webhooks is at receiver.max_backlog %d: webhooks are answered 503 "
                        "until the engine catches up (Alertmanager retries them)", self.backlog, limit)
        return f"the inbox holds {self.backlog:,} webhooks not yet processed (receiver.max_backlog {limit}); retry later"

    # ----- processing -----

    async def _process_loop(self) -> None:
        # With a shared inbox, other processes' rows are only seen by reading the store: poll it.
        idle_wait = self.cfg.ha.poll_interval if self.shared_inbox else 1.0
        while not self._stopping:
            self._wake.clear()  # before the read: a webhook stored while it runs wakes the wait below at once
            try:
                more = await self.process_pending()
                if self.shared_inbox and await commands.run_pending(self.store, self):
                    more = True
            except StoreUnavailable as exc:
                self._step_failed("process", exc)
                more = False
                await asyncio.sleep(1)
            except Exception as exc:
                self._step_failed("process", exc)
                log.exception("engine step failed")
                more = False
                await asyncio.sleep(1)
            if not more:
                try:
                    await asyncio.wait_for(self._wake.wait(), idle_wait)
                except asyncio.TimeoutError:
                    continue
                # Let a few more webhooks arrive: under load one step per webhook would spend more
                # on per-step commits than on the alerts themselves.
                await asyncio.sleep(STEP_LINGER)

    async def _step(self, fn: Callable[[Engine, datetime], list[Change]], inbox: Taken | None = None) -> list[Change]:
        """One engine mutation and its atomic commit; on a failed commit, reload state from the store."""
        assert self.engine is not None
        async with self._engine_lock:
            now = self.clock()
            changes = fn(self.engine, now)
            if not changes and not inbox:
                return []
            state = self.engine.state
            items, memory = self.router.route_step(changes, now)
            step = Step(inbox=inbox or Taken(), changes=changes, outbox=items,
                        next_seq=state.next_seq, heartbeat_at=state.heartbeat_at, memory=memory)
            try:
                await self.store.commit_step(step)
            except Exception:
                await self._roll_back()
                raise
            for c in changes:
                del c.incident.timeline[:-KEEP_EVENTS_IN_MEMORY]
                if c.kinds and c.kinds[0] == "opened":
                    self.metrics.incidents_opened.inc()
                if "resolved" in c.kinds:
                    self.metrics.incidents_resolved.inc()
            self.health.step_ok()
        self._update_gauges()
        if step.outbox:
            self.outbox.wake()
        if self.enricher is not None and changes:
            self.enricher.submit(changes)
        self.remediation.submit(changes)
        return changes

    async def _roll_back(self) -> None:
        """After a failed commit, engine and router both carry on from what the store holds, so
        replaying the step routes it again in full (escalations included)."""
        assert self.engine is not None
        try:
            state = await self.store.load_state()
            memory = await self.store.load_router_memory()
        except Exception:
            log.exception("could not reload engine state after a failed commit; keeping memory state")
            return
        self.engine.correlator.state = state
        self.router.restore(memory)

    def _step_failed(self, operation: str, exc: Exception) -> None:
        self.metrics.store_errors.labels(operation).inc()
        self.health.step_failed(f"{type(exc).__name__}: {exc}")
        log.warning("%s failed: %s", operation, self.health.step_error)

    async def _tick_loop(self) -> None:
        interval = self.cfg.tick_interval.total_seconds()
        while not self._stopping:
            await asyncio.sleep(interval)
            try:
                await self._step(lambda engine, now: engine.tick(now))
            except Exception as exc:
                self._step_failed("tick", exc)

    async def _housekeeping_loop(self) -> None:
        """Every minute the outbox backlog gauge; every five minutes, prune what retention lets go."""
        rounds = 0
        while not self._stopping:
            try:
                if rounds % 5 == 0:
                    now = self.clock()
                    keep = self.cfg.incident_retention
                    pruned = await self.store.prune(now - self.cfg.retention,
                                                    resolved_before=now - keep if keep else None)
                    if pruned:
                        log.info("pruned %d old rows (inbox, outbox, resolved incidents)", pruned)
                self.metrics.outbox_pending.set((await self.store.stats()).get("outbox_pending", 0))
                if not hasattr(self.store, "disk_bytes") and (size := await self.store.size_bytes()) is not None:
                    self.metrics.store_bytes.set(size)
            except Exception as exc:
                self._step_failed("housekeeping", exc)
            rounds += 1
            await asyncio.sleep(60)

    def _update_gauges(self) -> None:
        if self.engine is None:
            return
        counts = {OPEN: 0, ACKNOWLEDGED: 0}
        for inc in self.engine.state.incidents.values():
            counts[inc.status] = counts.get(inc.status, 0) + 1
        for state, n in counts.items():
            self.metrics.incidents.labels(state).set(n)

    # ----- actions (API, Slack buttons) -----

    async def acknowledge(self, incident_id: str, actor: str) -> list[Change]:
        if not self.leading:
            return await commands.forward(self.store, "acknowledge", incident_id, {"actor": actor})
        return await self._step(lambda e, now: e.correlator.acknowledge(incident_id, actor, now))

    async def resolve(self, incident_id: str, actor: str) -> list[Change]:
        if not self.leading:
            return await commands.forward(self.store, "resolve", incident_id, {"actor": actor})
        return await self._step(lambda e, now: e.correlator.resolve(incident_id, actor, now))

    async def audit(self, actor: str, action: str, target: str, via: str, outcome: str = "ok", detail: str = "") -> None:
        """Record who did what in the store's audit trail (``alertd audit``); a failed write is logged, not raised."""
        entry = AuditEntry(self.clock(), actor, action, target, via, outcome, detail)
        log.info("audit: %s %s %s via %s: %s", actor, action, target, via, outcome)
        try:
            await self.store.record_audit(entry)
        except Exception as exc:
            self.metrics.store_errors.labels("audit").inc()
            log.error("could not record audit entry (%s %s %s): %s", actor, action, target, exc)

    async def annotate(self, incident_id: str, key: str, value: Any, kind: str, text: str = "", actor: str = "") -> list[Change]:
        if not self.leading:
            return await commands.forward(self.store, "annotate", incident_id,
                                          {"key": key, "value": value, "kind": kind, "text": text, "actor": actor})
        return await self._step(lambda e, now: e.correlator.annotate(incident_id, key, value, now, kind, text, actor))

    async def enrich(self, incident_id: str, annotations: Mapping[str, tuple[Any, str]], signals: Sequence[Signal],
                     source: str) -> list[Change]:
        """What enrichment found, in one engine step (Correlator.enrich)."""
        if not self.leading:
            return []  # enrichment runs on the leader only; a deposed leader's late results are dropped
        return await self._step(lambda e, now: e.correlator.enrich(incident_id, now, source, annotations, signals))

    # ----- rules -----

    def reload_rules(self) -> tuple[bool, str]:
        """Swap in a new rule set; an invalid one is refused and the running one stays."""
        try:
            rules = with_site_recordings(load_rules(self.cfg.rule_paths), self.cfg, previous=self.rules.recorded)
        except Exception as exc:  # InvalidDocument names file:line; anything else is reported too
            self.metrics.reload_ok.set(0)
            log.error("rule reload failed, keeping the running rules:\n%s", exc)
            return False, str(exc)
        self.rules = rules
        self.watchdog_names = set(rules.correlation.watchdog.alertnames)
        if self.engine is not None:
            self.engine.set_rules(rules)
        if hasattr(self.router, "set_rules"):
            self.router.set_rules(rules)
        self.metrics.reload_ok.set(1)
        self.metrics.reload_time.set(time.time())
        log.info("rules reloaded from %s", ", ".join(rules.sources))
        return True, ""

