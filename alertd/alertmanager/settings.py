"""The ``alertmanager`` section of the configuration, declared once (alertd/core/sections.py) and read as
decoded by its two users: the silence client (alertd/alertmanager/silences.py) and reconciliation
(reconcile_loop.py)."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from alertd.core.sections import Seconds, Section, Span, duration, written

NonEmpty = Annotated[str, Meta(min_length=1)]


class BasicAuth(Section, frozen=True, kw_only=False):
    """Basic auth for every request to Alertmanager."""

    username: str
    password: str


class AlertmanagerSettings(Section, frozen=True):
    """Where silences are created (the one ``url``: an HA pair shares silences), which Alertmanagers are asked
    what they still hold (``urls``: every one of an HA pair) and how often, and which of their receivers send
    to alertd."""

    url: Annotated[str, Meta(description="Base URL of Alertmanager.", examples=["http://alertmanager:9093"])] = ""
    external_url: Annotated[str, Meta(description=(
        "How people reach Alertmanager's UI, for links in messages. Default: url."))] = ""
    timeout: Annotated[Seconds, Meta(description="Per API call.")] = duration("10s")
    bearer_token: Annotated[str, Meta(description=(
        "Sent as Authorization: Bearer when Alertmanager sits behind an authenticating proxy."))] = ""
    basic: BasicAuth | None = None
    urls: Annotated[tuple[str, ...], Meta(min_length=1, description=(
        "Every Alertmanager of an HA cluster, for reconciliation and truncated groups. Default: [url]."))] = ()
    reconcile_interval: Annotated[Span, Meta(description=(
        "How often the engine leader compares what it holds with what the Alertmanagers hold: it resolves what "
        "none holds any more and takes in what they hold for alertd but never sent."))] = \
        written(Span.from_config, "30s")
    reconcile_min_uptime: Annotated[Span, Meta(description=(
        "An Alertmanager started less than this ago holds only what Prometheus re-sent since: no "
        "reconciliation until then."))] = written(Span.from_config, "3m")
    receivers: Annotated[tuple[NonEmpty, ...], Meta(description=(
        "The names of the receivers in Alertmanager's configuration that send to alertd. Reconciliation takes "
        "in the active alerts routed to them that alertd never received (Alertmanager does not send an alert "
        "that fired and resolved between two flushes of its group). [] takes in none."))] = ("alertd",)
    reconcile_held_after: Annotated[Span, Meta(description=(
        "An alert Alertmanager holds is taken in only once it has fired this long, so that a new group's first "
        "notification (group_wait) comes first."))] = written(Span.from_config, "1m")

    def __post_init__(self) -> None:
        # Paths are appended to every URL: one trailing slash or none is the same server.
        urls = self.urls or ((self.url,) if self.url else ())
        msgspec.structs.force_setattr(self, "url", self.url.rstrip("/"))
        msgspec.structs.force_setattr(self, "external_url", self.external_url.rstrip("/"))
        msgspec.structs.force_setattr(self, "urls", tuple(u.rstrip("/") for u in urls))

    @property
    def enabled(self) -> bool:
        """Silences need the one ``url``."""
        return bool(self.url)

    @property
    def web_url(self) -> str:
        """The base of links to Alertmanager's UI from incidents and messages ("" without one)."""
        return self.external_url or self.url

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.bearer_token}"} if self.bearer_token else {}

    @property
    def credentials(self) -> tuple[str, str] | None:
        """``basic`` as the HTTP session takes it."""
        return (self.basic.username, self.basic.password) if self.basic else None


__all__ = ["AlertmanagerSettings", "BasicAuth"]
