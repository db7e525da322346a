"""The delivery stages (alertd/notify/stages.py) and the outbox worker that runs them (alertd/notify/outbox.py),
in-process on an injected clock: an in-memory outbox, a notifier that records or fails on demand, and a
rate limiter whose sleeps move the clock instead of waiting."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Hashable

import pytest

from alertd.core.outbox_items import Intent, OutboxItem, Target, decode_payload
from alertd.core.service_metrics import Metrics
from alertd.integrations.base import Delivered, DeliveryError, Notifier
from alertd.integrations.ratelimit import RateLimiter
from alertd.notify.outbox import OutboxWorker
from alertd.notify.stages import Coalesce, Delivery, Gate, RateLimit, finished, pipeline, run

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
SLACK = Target.of("slack", "#gpu-oncall")


class Clock:
    """Wall and monotonic time that only move when told to (or when the limiter sleeps)."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


class Outbox:
    """The outbox part of NotifyStore, in memory, with the store's semantics: due items oldest first, one
    per incident+target; retry moves due_at; finish removes items and saves refs."""

    def __init__(self, items: list[OutboxItem]) -> None:
        self.items = {i.id: i for i in items}
        self.refs: dict[tuple[str, str], str] = {}
        self.asked: list[tuple[str, ...]] = []
        self.given_up: dict[int, str] = {}

    async def notify_ref(self, incident_id: str, target: str) -> str | None:
        return self.refs.get((incident_id, target))

    async def pending_outbox_for(self, incident_id: str, target: str, *, after_id: int,
                                 kinds: tuple[str, ...]) -> list[OutboxItem]:
        self.asked.append(kinds)
        return [i for i in self.items.values() if i.incident_id == incident_id and i.target == target
                and i.id > after_id and str(i.intent) in kinds]

    async def due_outbox(self, now: datetime, limit: int) -> list[OutboxItem]:
        first: dict[tuple[str, str], OutboxItem] = {}
        for i in sorted(self.items.values(), key=lambda i: i.id):
            first.setdefault((i.incident_id, str(i.target)), i)
        return [i for i in first.values() if i.due_at <= now][:limit]

    async def finish_outbox_batch(self, done: list[tuple[int, tuple[str, str, str] | None]]) -> None:
        for item_id, ref in done:
            self.items.pop(item_id, None)
            if ref is not None:
                self.refs[(ref[0], ref[1])] = ref[2]

    async def retry_outbox(self, item_id: int, due_at: datetime, error: str, *, give_up: bool = False) -> None:
        if give_up:
            self.given_up[item_id] = error
            del self.items[item_id]
        else:
            item = self.items[item_id]
            self.items[item_id] = replace(item, due_at=due_at, attempts=item.attempts + 1, last_error=error)


class Scripted(Notifier):
    """Records each delivery; raises the next of ``failures`` first, if any."""

    kind = "slack"
    coalesce = frozenset({Intent.SHOW, Intent.TIMELINE})
    coalesce_groups = (frozenset({Intent.SHOW, Intent.TIMELINE}),)
    needs_ref = frozenset({Intent.TIMELINE})

    def __init__(self, failures: list[Exception] | None = None, limiter: RateLimiter | None = None) -> None:
        self.failures = list(failures or [])
        self.limiter = limiter
        self.sent: list[tuple[list[int], str | None]] = []

    async def deliver(self, items: list[OutboxItem], ref: str | None) -> Delivered:
        if self.failures:
            raise self.failures.pop(0)
        if self.limiter is not None:
            await self.limiter.at_wire(self.rate_key(items, ref))
        self.sent.append(([i.id for i in items], ref))
        return Delivered(ref=ref or f"ts-{items[0].id}")

    def rate_key(self, items: list[OutboxItem], ref: str | None) -> Hashable | None:
        return str(items[0].target)


def item(id: int, intent: Intent = Intent.SHOW, incident: str = "INC-1", target: Target = SLACK,
         **payload: object) -> OutboxItem:
    # (every key any intent needs: decode_payload keeps the ones this intent has)
    doc = {"kinds": [], "events": [], "routing_key": "infra", "severity": "critical", "after": 0, **payload}
    return OutboxItem(incident, target, intent, decode_payload(intent, doc), T0, id=id)


# --- the stages one by one -------------------------------------------------

async def test_coalesce_takes_the_queued_items_of_its_group_and_reads_the_ref():
    store = Outbox([item(1), item(2, Intent.TIMELINE), item(3, Intent.PAGE), item(4, incident="INC-2")])
    store.refs[("INC-1", str(SLACK))] = "ts-0"
    d = Delivery(store.items[1], Scripted())
    await Coalesce(store)(d)
    assert d.ref == "ts-0"
    assert [i.id for i in d.items] == [1, 2]
    assert store.asked == [("show", "timeline")]


async def test_coalesce_leaves_an_intent_the_notifier_does_not_coalesce_alone():
    store = Outbox([item(1, Intent.PAGE), item(2, Intent.PAGE)])
    d = Delivery(store.items[1], Scripted())
    await Coalesce(store)(d)
    assert d.later == [] and store.asked == []


@pytest.mark.parametrize("first, later, ref, skipped", [
    (item(1, only_if_posted=True), [item(2, only_if_posted=True)], None, "never delivered before"),
    (item(1, Intent.TIMELINE), [], None, "nothing to follow up"),
    (item(1, only_if_posted=True), [item(2)], None, ""),  # one item that must go: the post is made
    (item(1, Intent.TIMELINE, only_if_posted=True), [], "ts-1", ""),  # posted before: it goes
])
async def test_gate(first, later, ref, skipped):
    d = Delivery(first, Scripted(), ref=ref, later=later)
    await Gate()(d)
    assert d.skipped == skipped
    assert d.done is bool(skipped)


async def test_rate_limit_waits_a_short_slot_on_the_injected_clock():
    clock = Clock()
    limiter = RateLimiter(rate=4.0, clock=clock.monotonic, sleep=clock.sleep)
    notifier = Scripted(limiter=limiter)
    for n in range(3):
        await RateLimit(max_wait=0.5)(Delivery(item(n + 1), notifier))
    assert clock.t == pytest.approx(0.5)  # three sends at 0, 0.25, 0.5


async def test_sends_keep_the_rate_at_the_wire_when_work_after_a_slot_delays_one():
    clock = Clock()
    limiter = RateLimiter(rate=4.0, clock=clock.monotonic, sleep=clock.sleep)
    wire = []
    for work in (0.0, 0.09, 0.0, 0.0):  # the second send's store write takes 90 ms after its slot
        await limiter.acquire("#c")
        clock.t += work
        await limiter.at_wire("#c")
        wire.append(clock.t)
    assert wire == pytest.approx([0.0, 0.34, 0.59, 0.84])  # slots at 0.5 and 0.75 would be 0.16 s after it


async def test_rate_limit_gives_a_long_wait_back_and_keeps_the_reserved_slot():
    clock = Clock()
    limiter = RateLimiter(rate=1.0, clock=clock.monotonic, sleep=clock.sleep)
    notifier, stage = Scripted(limiter=limiter), RateLimit(max_wait=0.5)
    await stage(Delivery(item(1), notifier))
    with pytest.raises(DeliveryError) as busy:
        await stage(Delivery(item(2), notifier))
    assert busy.value.retry and busy.value.after == pytest.approx(1.0)
    with pytest.raises(DeliveryError) as after_it:  # reserved behind item 2's slot
        await stage(Delivery(item(3, incident="INC-2"), notifier))
    assert after_it.value.after == pytest.approx(2.0) and clock.t == 0.0  # nothing slept
    clock.t = 1.0  # item 2 comes back when its delay is over: its slot is still its own
    await stage(Delivery(item(2), notifier))
    assert clock.t == pytest.approx(1.0)


async def test_run_stops_at_the_first_stage_that_ends_the_delivery_and_finished_saves_the_ref():
    store = Outbox([item(1, Intent.TIMELINE), item(2, Intent.TIMELINE)])
    notifier = Scripted()
    skipped = await run(pipeline(store), Delivery(store.items[1], notifier))
    assert skipped.skipped == "nothing to follow up" and notifier.sent == []
    assert finished(skipped) == [(1, None), (2, None)]
    store.refs[("INC-1", str(SLACK))] = "ts-9"
    sent = await run(pipeline(store), Delivery(store.items[1], notifier))
    assert sent.done and notifier.sent == [([1, 2], "ts-9")]
    assert finished(sent) == [(1, ("INC-1", str(SLACK), "ts-9")), (2, None)]


# --- the outbox worker -----------------------------------------------------

def worker(store: Outbox, notifier: Notifier, clock: Clock, **kw: int) -> OutboxWorker:
    return OutboxWorker(store, {"slack": notifier}, Metrics(), clock.now, **kw)


async def test_worker_delivers_a_round_and_marks_it_done_with_the_ref():
    store, clock = Outbox([item(1), item(2, incident="INC-2"), item(3)]), Clock()
    notifier = Scripted()
    await worker(store, notifier, clock).drain()
    assert sorted(notifier.sent) == [([1, 3], None), ([2], None)]
    assert store.items == {} and store.refs == {("INC-1", str(SLACK)): "ts-1", ("INC-2", str(SLACK)): "ts-2"}


async def test_worker_retries_with_backoff_on_its_clock_then_gives_up():
    store, clock = Outbox([item(1)]), Clock()
    notifier = Scripted([DeliveryError("503", retry=True)] * 3)
    w = worker(store, notifier, clock, max_attempts=3, max_backoff=60)
    await w.drain()
    first = store.items[1]
    assert first.attempts == 1 and T0 + timedelta(seconds=1) <= first.due_at <= T0 + timedelta(seconds=2)
    await w.drain()
    assert store.items[1].attempts == 1, "not due yet: nothing was tried"
    clock.t = 2.0
    await w.drain()
    assert store.items[1].attempts == 2
    clock.t = 10.0
    await w.drain()
    assert store.given_up == {1: "503"} and notifier.sent == []


async def test_worker_honours_the_delay_a_failure_asks_for_and_gives_up_on_a_permanent_one():
    store, clock = Outbox([item(1), item(2, incident="INC-2")]), Clock()
    notifier = Scripted([DeliveryError("429", retry=True, after=30.0), DeliveryError("bad channel", retry=False)])
    await worker(store, notifier, clock).drain()
    assert list(store.items) == [1] and store.items[1].due_at == T0 + timedelta(seconds=30)
    assert store.given_up == {2: "bad channel"}


async def test_worker_survives_a_notifier_bug_and_an_unknown_target():
    store, clock = Outbox([item(1), item(2, target=Target.of("nowhere"))]), Clock()
    await worker(store, Scripted([KeyError("blocks")]), clock).drain()
    assert store.items[1].last_error == "KeyError: 'blocks'" and store.items[1].attempts == 1
    assert store.given_up == {2: "no notifier for target 'nowhere'"}


async def test_worker_sends_a_busy_channel_later_without_sleeping():
    store, clock = Outbox([item(1), item(2, incident="INC-2"), item(3, incident="INC-3")]), Clock()
    notifier = Scripted(limiter=RateLimiter(rate=1.0, clock=clock.monotonic, sleep=clock.sleep))
    w = worker(store, notifier, clock)
    await w.drain()
    assert [ids for ids, _ in notifier.sent] == [[1]] and clock.t == 0.0
    assert {i: store.items[i].due_at - T0 for i in (2, 3)} == {2: timedelta(seconds=1), 3: timedelta(seconds=2)}
    clock.t = 2.0  # both due: 2 goes, 3 keeps a second from what was really sent
    await w.drain()
    assert [ids for ids, _ in notifier.sent] == [[1], [2]] and store.items[3].due_at - T0 == timedelta(seconds=3)
    clock.t = 3.0
    await w.drain()
    assert [ids for ids, _ in notifier.sent] == [[1], [2], [3]] and store.items == {}


async def test_worker_gives_up_an_unreadable_item_alone_and_delivers_the_others():
    bad = OutboxItem.stored("INC-1", str(SLACK), "timeline", {"kinds": []}, T0, id=2, attempts=0, last_error="")
    store, clock = Outbox([item(1, incident="INC-2"), bad, item(3)]), Clock()
    notifier = Scripted()
    await worker(store, notifier, clock).drain()
    assert store.given_up == {2: "timeline payload: no 'events'"}
    assert sorted(ids for ids, _ in notifier.sent) == [[1], [3]]  # 3 was queued behind it, not coalesced with it
