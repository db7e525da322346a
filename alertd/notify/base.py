"""The one small interface every notifier implements, and the settings every notifier shares."""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

from alertd.durations import parse_duration
from alertd.model import Incident
from alertd.store.base import OutboxItem


class DeliveryError(Exception):
    """Delivery failed; ``retry`` says whether trying again can help, ``after`` how long to wait."""

    def __init__(self, message: str, *, retry: bool = True, after: float | None = None):
        super().__init__(message)
        self.retry = retry
        self.after = after


def folded_unposted(inc: Incident, ref: str | None) -> bool:
    """A node incident folded into a fleet incident before anything was sent for it: its first post or
    page is dropped, never delivered (the fleet incident speaks for it, even after an outage)."""
    return bool(inc.parent_id) and not ref


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


@dataclass(slots=True)
class NotifierSettings:
    """What every notifier's settings share: the request timeout and where message links point."""

    timeout: float = 10.0
    runbook_base_url: str = ""
    alertmanager_url: str = ""
    alertd_url: str = ""

    @staticmethod
    def read(cfg: Any, kind: str) -> tuple[dict, dict[str, Any]]:
        """The ``notify.<kind>`` config section, and the shared fields as keyword arguments."""
        raw = getattr(cfg, "raw", None) or {}
        doc = (raw.get("notify") or {}).get(kind) or {}
        am = raw.get("alertmanager") or {}
        return doc, {
            "timeout": parse_duration(doc.get("timeout", "10s")).total_seconds(),
            "runbook_base_url": getattr(cfg, "runbook_base_url", "") or "",
            "alertmanager_url": am.get("external_url") or am.get("url") or "",
            "alertd_url": getattr(cfg, "external_url", "") or "",
        }
