"""Taking webhooks from the inbox log through the engine, and setting poison aside (the Processor's Intake).

Each round counts an attempt at the webhooks it takes before running them (in the store,
so a crash, a kill or a replica that loses its lease mid-step counts too); after a failed
or unfinished round the engine goes one webhook at a time, and a webhook tried
MAX_ATTEMPTS times is set aside unread. Alerts are classified off the event loop within
a budget (alertd/app/budget.py); an alert that raises or overruns is set aside alone. What is
set aside (``inbox.processed = 2``) is listed by GET /api/v1/quarantine, counted by
``alertd_set_aside_total{cause}``, and replayed by an admin after a rule fix (``replay``).
"""
from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Callable, Iterable, Protocol, Sequence

from alertd.app.budget import Budget, Stuck
from alertd.config.settings import Config
from alertd.rules.evidence import gpu_looking
from alertd.engine.pipeline import Engine
from alertd.core.service_metrics import Metrics
from alertd.core.model import Alert, Change, parse_iso
from alertd.receive.payload import BadPayload, delivery_key, encode_webhook, read_stored
from alertd.rules.ruleset import RuleSet
from alertd.store.base import Hook, InboxKey, StoreUnavailable, Taken
from alertd.store.quarantine import note
from alertd.core.vocabulary import SignalKind

log = logging.getLogger(__name__)
# Attempts at one webhook (counted in the store before each, so a crash or a stuck step counts, on any
# replica) before it is set aside: GET /api/v1/quarantine lists it, an admin replays it after a rule fix.
MAX_ATTEMPTS = 3


class IntakeStore(Protocol):
    """What taking webhooks needs of the store: its inbox (alertd/store/inbox.py) and the attempts counted at
    them (alertd/store/quarantine.py)."""

    async def pending_hooks(self, limit: int) -> list[Hook]: ...

    async def count_pending_inbox(self) -> int: ...

    async def known_keys(self, keys: list[str]) -> set[str]: ...

    async def count_attempt(self, ids: list[int], now: datetime) -> tuple[list[int], int]: ...

    async def uncount_attempt(self, ids: list[int]) -> None: ...


class EdgeLookup(Protocol):
    """Something the engine reads that lives outside (Kubernetes, Prometheus' rules API): filled for a step's
    alerts before the step, within its own time bound, so the engine itself does no I/O."""

    async def prepare(self, alerts: Iterable[Alert]) -> None: ...

    async def close(self) -> None: ...


class Steps(Protocol):
    """The engine's steps the intake runs its batches in (alertd/app/processor.py, ``Processor``): the engine
    while this process leads, and one step committed with what it took from the inbox."""

    @property
    def engine(self) -> Engine | None: ...

    async def step(self, fn: Callable[[Engine, datetime], list[Change]],
                   inbox: Taken | None = None) -> list[Change]: ...


class Intake:
    """Feeds the inbox log to the engine's ``steps``; everything else it needs is given here."""

    def __init__(self, cfg: Config, store: IntakeStore, rules: RuleSet, steps: Steps, *,
                 clock: Callable[[], datetime], metrics: Metrics, budget: Budget, lookups: Sequence[EdgeLookup]):
        self.cfg, self.store, self.steps, self.clock, self.metrics = cfg, store, steps, clock, metrics
        self.budget = budget  # classification off the event loop, within a budget per alert
        self.lookups = lookups  # asked before each step
        self.worst_classify = 0.0  # the most CPU seconds one alert's classification took (alertd_classify_seconds_max)
        self._pending_counted_at = 0.0
        self._stopping = False
        self.set_rules(rules)

    def set_rules(self, rules: RuleSet) -> None:
        self.rules = rules
        self.watchdog_names = set(rules.correlation.watchdog.alertnames)

    def stop(self) -> None:
        """From now on a step asks nothing outside (shutdown drains what is left)."""
        self._stopping = True

    def _dedup(self, alert: Alert) -> str:
        key = delivery_key(alert)
        if alert.name in self.watchdog_names:  # heartbeats repeat with the same state: each one counts
            key += f"|{(alert.received_at or self.clock()).timestamp():.6f}"
        return key

    async def process_pending(self) -> bool:
        """Take the next webhooks from the log through the engine; True when some were taken."""
        hooks = await self.store.pending_hooks(self.cfg.processing.batch_size)
        if not hooks:
            self.metrics.inbox_pending.set(0)
            return False
        chosen, tried = await self.store.count_attempt([h.id for h in hooks], self.clock())
        hooks = [h for h in hooks if h.id in chosen]  # after a failure: one webhook at a time
        if tried >= MAX_ATTEMPTS:
            await self._set_aside_hook(hooks[0], "attempts", f"{tried} attempts at this webhook did not finish "
                                       "(the engine failed on it, overran, or was stopped while on it)")
            return True
        try:
            await self._take(hooks)
        except StoreUnavailable:
            await self._uncount(chosen)  # the store refused the step: not the webhooks' fault
            raise
        except Stuck as exc:
            if len(hooks) == 1:
                await self._set_aside_hook(hooks[0], "stuck", str(exc))
            else:
                log.error("%s; its webhooks are retried one at a time", exc)
        if time.monotonic() - self._pending_counted_at > 1.0:  # a count, not on every step
            self._pending_counted_at = time.monotonic()
            self.metrics.inbox_pending.set(await self.store.count_pending_inbox())
        return True

    async def _take(self, hooks: list[Hook]) -> None:
        """The webhooks' alerts, less those taken before, through the engine in one step."""
        alerts, set_aside = self._read_hooks(hooks)
        keys = [self._dedup(a) for a in alerts]
        known = await self.store.known_keys(keys)
        fresh: dict[str, Alert] = {}
        for key, alert in zip(keys, alerts):
            if key not in known:
                fresh.setdefault(key, alert)  # a key twice in one batch (an HA peer's copy): the first counts
        self.metrics.duplicates.inc(len(alerts) - len(fresh))
        for lookup in self.lookups if not self._stopping else ():  # nodes from Kubernetes, recording rules
            await lookup.prepare(fresh.values())
        await self._ingest(list(fresh.items()), Taken([h.id for h in hooks], set_aside))

    async def _uncount(self, ids: list[int]) -> None:
        try:
            await self.store.uncount_attempt(ids)
        except Exception as exc:  # the store is failing anyway; the count may stay one too high
            log.debug("could not take back the attempt at webhooks %s: %s", ids, exc)

    def _aside(self, cause: str) -> None:
        self.metrics.store_errors.labels("quarantine").inc()
        self.metrics.set_aside.labels(cause).inc()

    async def _set_aside_hook(self, hook: Hook, cause: str, reason: str) -> None:
        """Take a webhook without running it: its body and the reason go to the quarantine (GET
        /api/v1/quarantine), from where an admin can replay it."""
        self._aside(cause)
        received = parse_iso(hook.received_at) or self.clock()
        key = InboxKey(f"webhook:{hook.id}:{received.timestamp():.6f}", received, 2,
                       note(reason, hook.body.decode(errors="replace")))
        await self.steps.step(lambda engine, now: [], inbox=Taken([hook.id], [key]))

    def _read_hooks(self, hooks: list[Hook]) -> tuple[list[Alert], list[InboxKey]]:
        """The webhooks' alerts; one that no longer reads (stored by another version, damaged) is set aside."""
        alerts: list[Alert] = []
        set_aside: list[InboxKey] = []
        for hook in hooks:
            received = parse_iso(hook.received_at) or self.clock()
            try:
                alerts.extend(read_stored(hook.body, received).alerts)
            except BadPayload as exc:
                self._aside("unreadable")
                set_aside.append(InboxKey(f"webhook:{hook.id}:{received.timestamp():.6f}", received, 2,
                                          note(f"stored webhook no longer reads: {exc}", hook.body.decode(errors="replace"))))
        return alerts, set_aside

    async def _ingest(self, batch: list[tuple[str, Alert]], taken: Taken) -> None:
        """One engine step for the batch, committing its keys and ``taken`` with it. An alert the engine cannot
        take must not block the ones behind it: on failure each goes alone, a failing one is set aside.
        Classification runs first, off the event loop and within its budget (alertd/app/budget.py)."""
        engine = self.steps.engine
        assert engine is not None
        classified = await self.budget.classify(engine, batch)
        if classified.worst > self.worst_classify:
            self.worst_classify = classified.worst
            self.metrics.classify_max.set(classified.worst)
        batch = classified.ok
        aside = [self._aside_alert(key, alert, cause, reason) for key, alert, cause, reason in classified.aside]
        taken = Taken(taken.hooks, taken.keys + aside)
        alerts = [a for _, a in batch]
        keys = [InboxKey(key, a.received_at or self.clock()) for key, a in batch]
        try:
            await self.steps.step(lambda engine, now: engine.ingest(alerts, now),
                                   inbox=Taken(taken.hooks, keys + taken.keys))
        except StoreUnavailable:
            raise  # nothing committed: the webhooks are still in the log
        except Exception as exc:
            if len(batch) > 1:
                for one in batch:
                    await self._ingest([one], Taken())
                await self.steps.step(lambda engine, now: [], inbox=taken)
                return
            if not batch:
                raise
            log.exception("engine failed on alert %s; setting it aside", batch[0][0])
            key, alert = batch[0]
            await self.steps.step(lambda engine, now: [], inbox=Taken(taken.hooks, taken.keys + [
                self._aside_alert(key, alert, "failed", f"{type(exc).__name__}: {exc}")]))
            return
        done = self.clock()
        for received in {a.received_at for a in alerts if a.received_at}:  # a webhook's alerts share it
            self.metrics.processing_latency.observe(max(0.0, (done - received).total_seconds()))
        for a in alerts:
            if a.signal.kind == SignalKind.OTHER and a.firing and gpu_looking(a, self.rules.evidence):
                self.metrics.unclassified_gpu.labels(a.name).inc()

    def _aside_alert(self, key: str, alert: Alert, cause: str, reason: str) -> InboxKey:
        """An alert set aside: its key, with the reason and the alert as a webhook of its own to replay."""
        self._aside(cause)
        log.error("alert %s set aside (%s): %s", key, cause, reason)
        return InboxKey(key, alert.received_at or self.clock(), 2,
                        note(reason, encode_webhook([alert.to_wire()], alert.receiver, alert.external_url).decode()))
