"""The stages every delivery goes through, whatever the integration (like Alertmanager's MultiStage).

    coalesce -> gate -> rate limit -> deliver -> record

A ``Delivery`` is the oldest pending item of one incident+target (the outbox
hands out no other) plus what the stages learn about it. Each stage either
passes it on or ends it: ``done`` (nothing to send, or sent) or by raising
``DeliveryError`` (retried or given up by the worker). Integrations only
implement the deliver stage (``Notifier.deliver``) and declare what the other
stages do for them (``coalesce``, ``needs_ref``, ``rate_key``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from alertd.core.outbox_items import OutboxItem
from alertd.integrations.base import Delivered, DeliveryError, Notifier, NotifyStore

MAX_RATE_WAIT = 0.5  # seconds; a longer wait for a busy key gives the item back to the outbox


@dataclass(slots=True)
class Delivery:
    item: OutboxItem
    notifier: Notifier
    ref: str | None = None  # what an earlier delivery for this incident+target saved
    later: list[OutboxItem] = field(default_factory=list)  # queued items this delivery covers
    done: bool = False  # no further stage runs
    result: Delivered | None = None
    skipped: str = ""  # why nothing was sent

    @property
    def items(self) -> list[OutboxItem]:
        return [self.item, *self.later]


class Stage(Protocol):
    async def __call__(self, d: Delivery) -> None: ...


class Coalesce:
    """Queued items of the same incident, target and intent go with this one (the integration renders
    the incident as it is now, so one delivery covers them). Reads what is queued BEFORE the notifier
    reads the incident, so everything queued so far is in what it sends."""

    def __init__(self, store: NotifyStore):
        self.store = store

    async def __call__(self, d: Delivery) -> None:
        d.ref = await self.store.notify_ref(d.item.incident_id, d.item.target)
        intent = d.item.intent
        if intent in d.notifier.coalesce:
            group = next((g for g in d.notifier.coalesce_groups if intent in g), frozenset({intent}))
            later = await self.store.pending_outbox_for(d.item.incident_id, d.item.target, after_id=d.item.id,
                                                        kinds=tuple(sorted(map(str, group))))
            d.later = [i for i in later if not i.unreadable]  # each is given up alone when its turn comes


class Gate:
    """Only if posted: items that only keep an earlier delivery current, when there was none, and intents
    that need one (a thread reply needs its message), end here without sending anything."""

    async def __call__(self, d: Delivery) -> None:
        if d.ref is not None:
            return
        if all(i.payload.only_if_posted for i in d.items):
            d.done, d.skipped, d.result = True, "never delivered before", Delivered()
        elif d.item.intent in d.notifier.needs_ref:
            d.done, d.skipped, d.result = True, "nothing to follow up", Delivered()


class RateLimit:
    """Spaces sends per key (``Notifier.rate_key``). A key that is busy for long gives the item back to
    the outbox with that delay, keeping its reserved slot, so it does not hold up other keys."""

    def __init__(self, max_wait: float = MAX_RATE_WAIT):
        self.max_wait = max_wait

    async def __call__(self, d: Delivery) -> None:
        limiter = d.notifier.limiter
        if limiter is None or (key := d.notifier.rate_key(d.items, d.ref)) is None:
            return
        slot = limiter.slot(key, d.item.id)
        wait = slot - limiter.clock()
        if wait > self.max_wait:
            limiter.hold(d.item.id, key, slot)
            raise DeliveryError(f"{d.item.target} busy: sending in {wait:.1f}s", retry=True, after=wait)
        await limiter.wait_until(key, slot)


class Deliver:
    """The integration's own work."""

    async def __call__(self, d: Delivery) -> None:
        d.result = await d.notifier.deliver(d.items, d.ref)


class Record:
    """What the round commits for this delivery: the item and the items it covered done, the new ref."""

    async def __call__(self, d: Delivery) -> None:
        d.done = True


def pipeline(store: NotifyStore, *, max_wait: float = MAX_RATE_WAIT) -> list[Stage]:
    return [Coalesce(store), Gate(), RateLimit(max_wait), Deliver(), Record()]


async def run(stages: list[Stage], d: Delivery) -> Delivery:
    for stage in stages:
        if d.done:
            break
        await stage(d)
    return d


def finished(d: Delivery) -> list[tuple[int, tuple[str, str, str] | None]]:
    """The rows a finished delivery marks done (first with the ref to save), for the round's commit."""
    ref = d.result.ref if d.result is not None else None
    first = (d.item.id, (d.item.incident_id, str(d.item.target), ref) if ref else None)
    return [first, *((i.id, None) for i in d.later)]
