"""Reconciliation with Alertmanager, the I/O: asks every configured Alertmanager, feeds the decisions
(alertd/alertmanager/reconcile.py) back through the inbox: resolutions of what no Alertmanager holds, and the
alerts they hold for alertd that it never received. Runs on the engine leader: at its start and every
``alertmanager.reconcile_interval``; a webhook with ``truncatedAlerts`` asks for its group's full set.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Callable, Mapping, Protocol

import aiohttp
import orjson

from alertd.alertmanager import reconcile
from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.core.http_session import LazySession
from alertd.core.json_types import JSONObject, JSONValue, arr
from alertd.core.model import HELD_BY, Alert, Incident
from alertd.receive.payload import BadPayload, parse_notification

log = logging.getLogger(__name__)
OFFERED_MAX = 65536


class HeldState(Protocol):
    """The engine's state: the incidents it holds, by id."""

    @property
    def incidents(self) -> Mapping[str, Incident]: ...


class HeldEngine(Protocol):
    @property
    def state(self) -> HeldState: ...

    @property
    def heartbeats(self) -> tuple[str, ...]:
        """Alert names that only beat (Watchdog): received to show the webhooks flow, never taken from the API."""


class ReconcileConfig(Protocol):
    """The configuration's parsed ``alertmanager`` section, as reconciliation reads it (alertd/config/settings.py)."""

    @property
    def alertmanager(self) -> AlertmanagerSettings: ...


class ReconcileHost(Protocol):
    """The service as reconciliation sees it (alertd/app/service.py): what the engine holds, its clock, and the
    inbox that resolutions and fetched groups go into."""

    @property
    def cfg(self) -> ReconcileConfig: ...

    @property
    def engine(self) -> HeldEngine | None:
        """None on a process that does not run the engine."""

    @property
    def clock(self) -> Callable[[], datetime]: ...

    async def receive(self, body: bytes, alerts: int, received_at: datetime | None = None) -> int: ...

    async def receive_alerts(self, alerts: list[Alert]) -> int: ...


class Reconciler:
    def __init__(self, svc: ReconcileHost, settings: AlertmanagerSettings):
        self.svc, self.settings = svc, settings
        self._session = LazySession(settings.timeout, headers=settings.headers, basic=settings.credentials)
        self.rounds = 0
        self.resolved = 0
        self.fetched = 0
        self.taken = 0
        self._offered: dict[str, None] = {}  # insertion-ordered: the oldest goes first past OFFERED_MAX

    def session(self) -> aiohttp.ClientSession:
        return self._session.get()

    async def close(self) -> None:
        await self._session.close()

    async def run(self) -> None:
        while True:
            try:
                await self.reconcile_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconciliation round failed")
            await asyncio.sleep(self.settings.reconcile_interval.total_seconds())

    async def _get(self, url: str, path: str, params: list[tuple[str, str]] | None = None) -> JSONValue:
        async with self.session().get(url + path, params=params) as resp:
            if resp.status != 200:
                raise RuntimeError(f"GET {url}{path}: HTTP {resp.status}")
            doc: JSONValue = await resp.json(content_type=None)
            return doc

    async def _ask(self, url: str) -> reconcile.Answer | None:
        try:
            return reconcile.answer_from(await self._get(url, "/api/v2/alerts"), await self._get(url, "/api/v2/status"),
                                         frozenset(self.settings.receivers))
        except Exception as exc:  # one silent Alertmanager: decide nothing this round
            log.warning("reconciliation: cannot ask Alertmanager %s: %s", url, exc)
            return None

    async def reconcile_once(self) -> int:
        """One round; returns how many held alerts were resolved."""
        engine = self.svc.engine
        if engine is None or not self.settings.urls:
            return 0
        answers = await asyncio.gather(*(self._ask(u) for u in self.settings.urls))
        now = self.svc.clock()
        incidents = list(engine.state.incidents.values())
        gone = reconcile.stale(reconcile.held_firing(incidents), list(answers), now, self.settings.reconcile_min_uptime)
        self.rounds += 1
        if gone:
            await self.svc.receive_alerts(reconcile.resolutions(gone, now))
            self.resolved += len(gone)
            ids = sorted({h.incident_id for h in gone})
            shown = ", ".join(ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
            log.warning("%s resolved: Alertmanager no longer holds its alerts (%d alerts; asked %s)", shown,
                        len(gone), ", ".join(self.settings.urls))
        held = reconcile.to_take(list(answers), incidents, now, self.settings.reconcile_held_after, engine.heartbeats)
        await self._take([a for a in held if self._offer(a)], now)
        return len(gone)

    def _offer(self, alert: JSONObject) -> bool:
        """Each occurrence (fingerprint, startsAt) is offered once (per process): one alertd took by webhook
        and whose incident has since closed is not sent through the inbox again every round."""
        key = f"{alert.get('fingerprint')}|{alert.get('startsAt')}"
        if key in self._offered:
            return False
        if len(self._offered) >= OFFERED_MAX:
            self._offered.pop(next(iter(self._offered)))
        self._offered[key] = None
        return True

    async def _take(self, alerts: list[JSONObject], now: datetime) -> None:
        """Alerts Alertmanager holds for alertd and never sent it enter the inbox as one webhook of
        model.HELD_BY (those alertd took before are dropped there as redeliveries)."""
        if not alerts:
            return
        doc = reconcile.as_webhook(alerts, HELD_BY)
        try:
            note = parse_notification(doc, now)
        except BadPayload as exc:
            log.warning("reconciliation: alerts held by Alertmanager do not read as a webhook: %s", exc)
            return
        await self.svc.receive(orjson.dumps(doc), len(note.alerts), now)
        self.taken += len(note.alerts)
        log.warning("reconciliation took %d alerts Alertmanager holds for alertd and alertd holds no member of "
                    "(those it took before are dropped as redeliveries): %s", len(note.alerts),
                    ", ".join(sorted({a.name for a in note.alerts})))

    async def fetch_group(self, group_labels: dict[str, str], receiver: str) -> int:
        """A truncated webhook: read the group's full set from the first Alertmanager that answers and store it."""
        params = reconcile.group_filter(group_labels) + [("silenced", "false"), ("inhibited", "false")]
        if receiver:
            params.append(("receiver", receiver))
        for url in self.settings.urls:
            try:
                alerts = arr(await self._get(url, "/api/v2/alerts", params), "GET /api/v2/alerts")
                doc = reconcile.as_webhook(alerts, receiver, url)
                note = parse_notification(doc, self.svc.clock())
            except Exception as exc:  # BadPayload, HTTP or network errors: try the next one
                log.warning("truncated group %s: cannot read its alerts from %s: %s", group_labels, url, exc)
                continue
            await self.svc.receive(orjson.dumps(doc), len(note.alerts))
            self.fetched += len(note.alerts)
            log.info("truncated group %s: %d alerts read from %s and stored (those already taken are dropped)",
                     group_labels, len(note.alerts), url)
            return len(note.alerts)
        return 0


def build_reconciler(svc: ReconcileHost) -> Reconciler | None:
    settings = svc.cfg.alertmanager
    return Reconciler(svc, settings) if settings.urls else None
