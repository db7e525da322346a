"""The ``alertmanager`` section of the configuration, parsed once (alertd/config/settings.py) into what its two
users read: the silence client (alertd/alertmanager/silences.py) and reconciliation (reconcile_loop.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypedDict

from alertd.core.durations import parse_duration


class BasicDoc(TypedDict):
    username: str
    password: str


class AlertmanagerDoc(TypedDict, total=False):
    """The ``alertmanager`` config section as alertmanager.schema.json admits it."""

    url: str
    external_url: str
    timeout: str
    bearer_token: str
    basic: BasicDoc
    urls: list[str]
    reconcile_interval: str
    reconcile_min_uptime: str
    receivers: list[str]
    reconcile_held_after: str


def _basic(doc: AlertmanagerDoc) -> tuple[str, str] | None:
    basic = doc.get("basic")
    return (str(basic["username"]), str(basic["password"])) if basic else None


@dataclass(slots=True)
class AlertmanagerSettings:
    """Where silences are created: the one ``url`` (an HA pair shares silences) and its credentials;
    ``external_url``: where people open Alertmanager's UI, when not at ``url``."""

    url: str = ""
    external_url: str = ""
    timeout: float = 10.0
    bearer_token: str = ""
    basic: tuple[str, str] | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @property
    def web_url(self) -> str:
        """The base of links to Alertmanager's UI from incidents and messages ("" without one)."""
        return self.external_url or self.url

    @classmethod
    def from_doc(cls, doc: AlertmanagerDoc | None) -> "AlertmanagerSettings":
        doc = doc or {}
        return cls(url=str(doc.get("url") or "").rstrip("/"), external_url=str(doc.get("external_url") or "").rstrip("/"),
                   timeout=parse_duration(doc.get("timeout", "10s")).total_seconds(),
                   bearer_token=str(doc.get("bearer_token", "") or ""), basic=_basic(doc))


@dataclass(slots=True)
class ReconcileSettings:
    """Which Alertmanagers are asked what they still hold (every one of an HA pair), and how often; which of
    their receivers send to alertd (the alerts routed to them that never came are taken in), and after how long."""

    urls: list[str] = field(default_factory=list)
    interval: timedelta = timedelta(seconds=30)
    min_uptime: timedelta = timedelta(minutes=3)
    receivers: frozenset[str] = frozenset({"alertd"})
    held_after: timedelta = timedelta(minutes=1)
    timeout: float = 10.0
    headers: dict[str, str] = field(default_factory=dict)
    basic: tuple[str, str] | None = None

    @classmethod
    def from_doc(cls, doc: AlertmanagerDoc | None) -> "ReconcileSettings":
        doc = doc or {}
        urls = list(doc.get("urls") or ([doc["url"]] if doc.get("url") else []))
        return cls(urls=[str(u).rstrip("/") for u in urls],
                   interval=parse_duration(doc.get("reconcile_interval", "30s")),
                   min_uptime=parse_duration(doc.get("reconcile_min_uptime", "3m")),
                   receivers=frozenset(doc.get("receivers", ["alertd"])),
                   held_after=parse_duration(doc.get("reconcile_held_after", "1m")),
                   timeout=parse_duration(doc.get("timeout", "10s")).total_seconds(),
                   headers={"Authorization": f"Bearer {doc['bearer_token']}"} if doc.get("bearer_token") else {},
                   basic=_basic(doc))


__all__ = ["AlertmanagerSettings", "ReconcileSettings"]
