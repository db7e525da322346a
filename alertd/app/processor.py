"""The engine's side of the service: one engine step at a time, each committed with what it made.

Processor loop: log -> drop redelivered alerts -> engine -> route -> one commit (keys taken, incidents,
events, outbox). The ticker runs the engine's timers (hold-downs, escalations) through the same steps.
The processor holds the engine only while this process leads (alertd/app/leadership.py sets and clears it);
a failed commit reloads engine state and router memory from the store, so a replayed step routes again.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Awaitable, Callable, Iterable, Protocol, Sequence

from alertd.app.budget import Budget
from alertd.app.intake import EdgeLookup, Intake, IntakeStore
from alertd.app.store_health import StoreHealth
from alertd.app.verdicts import HistorySource, Verdicts
from alertd.config.settings import Config
from alertd.core.model import ACKNOWLEDGED, OPEN, Change, Incident
from alertd.core.service_metrics import Metrics
from alertd.core.vocabulary import EventKind
from alertd.engine.memory import hold
from alertd.engine.pipeline import Engine
from alertd.notify.outbox import OutboxWorker
from alertd.notify.router import ConsoleRouter, Router
from alertd.rules.ruleset import RuleSet
from alertd.store.base import EngineState, RouterMemory, Step, StoreUnavailable, Taken

log = logging.getLogger(__name__)
STEP_LINGER = 0.005  # seconds the processor waits after a wake-up to gather a larger step
STOP_GRACE = 10.0  # seconds a delivery round in flight may take to finish on stop: the notifiers' default timeout


class Submits(Protocol):
    """What follows each committed step (enrichment, remediation proposals): its changes, off the request path."""

    def submit(self, changes: Iterable[Change]) -> None: ...


class StepStore(IntakeStore, Protocol):
    """What the processor needs of the store: the intake's part, and the engine's steps and the state they
    leave (alertd/store/steps.py)."""

    async def commit_step(self, step: Step) -> None: ...

    async def load_state(self) -> EngineState: ...

    async def load_router_memory(self) -> RouterMemory: ...


class OutboxRunner:
    """The outbox worker of the current leadership: a deposed leader's worker is stopped for good, so
    becoming the leader again starts a fresh one."""

    def __init__(self, make: Callable[[], OutboxWorker]):
        self._make = make
        self.worker = make()
        self._task: asyncio.Task[None] | None = None
        self.name = "outbox"
        self.grace = 0.0  # seconds a round in flight may take to finish on stop; 0 when deposed

    def shutting_down(self) -> None:
        """The service stops (it was not deposed): a round cut short would be sent again at the next start,
        a second page or post, so the round in flight gets STOP_GRACE to finish and be marked done."""
        self.grace = STOP_GRACE

    async def start(self) -> None:
        if self.worker.stopped:
            self.worker = self._make()
        self._task = asyncio.get_running_loop().create_task(self.worker.run(), name="alertd-outbox")

    async def stop(self) -> None:
        self.worker.stop()
        task, self._task = self._task, None
        if task is None:
            return
        if self.grace:
            await asyncio.wait({task}, timeout=self.grace)
            if not task.done():
                log.warning("outbox: a delivery round outlived the %.0fs grace; it is cancelled and will be "
                            "delivered again at the next start", self.grace)
        task.cancel()  # nothing to cancel when the round finished
        await asyncio.gather(task, return_exceptions=True)


class Processor:
    """Engine steps and their commits; the intake (alertd/app/intake.py) feeds it the inbox log."""

    def __init__(self, cfg: Config, store: StepStore, rules: RuleSet, *, clock: Callable[[], datetime],
                 metrics: Metrics, health: StoreHealth, router: ConsoleRouter | Router, outbox: OutboxRunner,
                 lookups: list[EdgeLookup], after_commit: Sequence[Submits] = (), shared_inbox: bool = False,
                 forwarded: Callable[[], Awaitable[int]] | None = None, history: HistorySource | None = None):
        self.cfg, self.store, self.rules, self.clock = cfg, store, rules, clock
        self.metrics, self.health, self.router, self.outbox = metrics, health, router, outbox
        self.after_commit = tuple(after_commit)
        # With a shared inbox other processes' webhooks, and their forwarded actions (ha/commands.py), are seen
        # only by reading the store: ``forwarded`` runs the pending actions, after each round.
        self.shared_inbox, self._forwarded = shared_inbox, forwarded
        self.engine: Engine | None = None
        # the history judge, between correlation and routing (alertd/app/verdicts.py)
        self.verdicts = Verdicts(history, lambda: self.rules.history) if history is not None else None
        self.budget = Budget()  # classification off the event loop, within a budget per alert
        self.intake = Intake(cfg, store, rules, self, clock=clock, metrics=metrics, budget=self.budget, lookups=lookups)
        self._engine_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stopping = False

    def take_engine(self, engine: Engine) -> None:
        """This process leads now: steps run on ``engine`` (restored from the store by leadership.py)."""
        self.engine = engine

    def drop_engine(self) -> None:
        """This process no longer leads: actions are forwarded, enrichment results dropped."""
        self.engine = None

    def wake(self) -> None:
        self._wake.set()

    def set_rules(self, rules: RuleSet) -> None:
        self.rules = rules
        self.intake.set_rules(rules)
        if self.engine is not None:
            self.engine.set_rules(rules)

    def stopping(self) -> None:
        """From now on the loops end and a step asks nothing outside (shutdown drains what is left)."""
        self._stopping = True
        self.intake.stop()
        self._wake.set()
        self.outbox.shutting_down()

    async def process_pending(self) -> bool:
        """Take the next webhooks from the log through the engine; True when some were taken."""
        return await self.intake.process_pending()

    async def run(self) -> None:
        # With a shared inbox, other processes' rows are only seen by reading the store: poll it.
        idle_wait = self.cfg.ha.poll_interval if self.shared_inbox else 1.0
        while not self._stopping:
            self._wake.clear()  # before the read: a webhook stored while it runs wakes the wait below at once
            try:
                more = await self.process_pending()
                if self._forwarded is not None and await self._forwarded():
                    more = True
            except StoreUnavailable as exc:
                self.step_failed("process", exc)
                more = False
                await asyncio.sleep(1)
            except Exception as exc:
                self.step_failed("process", exc)
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

    async def tick(self) -> None:
        """The engine's timers, every ``tick_interval``."""
        interval = self.cfg.processing.tick_interval
        while not self._stopping:
            await asyncio.sleep(interval)
            try:
                await self.step(lambda engine, now: engine.tick(now))
            except Exception as exc:
                self.step_failed("tick", exc)

    async def step(self, fn: Callable[[Engine, datetime], list[Change]], inbox: Taken | None = None) -> list[Change]:
        """One engine mutation and its atomic commit; on a failed commit, reload state from the store."""
        assert self.engine is not None
        async with self._engine_lock:
            now = self.clock()
            changes = fn(self.engine, now)
            if not changes and not inbox:
                return []
            if self.verdicts is not None and changes:
                await self.verdicts.judge_step(changes, now)
            state = self.engine.state
            items, memory = self.router.route_step(changes, now)
            step = Step(inbox=inbox or Taken(), changes=changes, outbox=items,
                        next_seq=state.next_seq, heartbeat_at=state.heartbeat_at, memory=memory)
            try:
                await self.store.commit_step(step)
            except Exception:
                await self._roll_back()
                raise
            self._hold(state, [c.incident for c in changes])
            for c in changes:
                if c.kinds and c.kinds[0] == EventKind.OPENED:
                    self.metrics.incidents_opened.inc()
                if EventKind.RESOLVED in c.kinds:
                    self.metrics.incidents_resolved.inc()
            self.health.step_ok()
        self.update_gauges()
        if step.outbox:
            self.outbox.worker.wake()
        if changes:
            for follower in self.after_commit:
                follower.submit(changes)
        return changes

    def _hold(self, state: EngineState, incidents: list[Incident]) -> None:
        """What the step's incidents keep in memory: in detail, or summarised past the budget."""
        budget = self.cfg.processing.detailed_incidents
        fresh = hold(state, incidents, budget)
        if fresh:
            self.metrics.incidents_summarised_total.inc(fresh)
            if len(state.summarised) == fresh:  # the first of a run past the budget
                log.warning("more than %d open incidents (processing.detailed_incidents): the node incidents of "
                            "storms are held summarised in memory, their timelines in the store only", budget)

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

    def step_failed(self, operation: str, exc: Exception) -> None:
        self.metrics.store_errors.labels(operation).inc()
        self.health.step_failed(f"{type(exc).__name__}: {exc}")
        log.warning("%s failed: %s", operation, self.health.step_error)

    def update_gauges(self) -> None:
        if self.engine is None:
            return
        counts = {OPEN: 0, ACKNOWLEDGED: 0}
        for inc in self.engine.state.incidents.values():
            counts[inc.status] = counts.get(inc.status, 0) + 1
        for state, n in counts.items():
            self.metrics.incidents.labels(state).set(n)
        self.metrics.incidents_summarised.set(len(self.engine.state.summarised))
