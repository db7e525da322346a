"""The one small interface every notifier implements."""
from __future__ import annotations

import abc
from dataclasses import dataclass

from alertd.store.base import OutboxItem


class DeliveryError(Exception):
    """Delivery failed; ``retry`` says whether trying again can help, ``after`` how long to wait."""

    def __init__(self, message: str, *, retry: bool = True, after: float | None = None):
        super().__init__(message)
        self.retry = retry
        self.after = after


@dataclass(slots=True)
class Delivered:
    ref: str | None = None  # an external id to remember (Slack ts, PagerDuty dedup key)


class Notifier(abc.ABC):
    kind: str = ""

    @abc.abstractmethod
    async def deliver(self, item: OutboxItem, ref: str | None) -> Delivered:
        """Deliver one outbox item. ``ref`` is what an earlier delivery for this incident+target saved."""

    async def close(self) -> None:
        return None
