"""PagerDuty Events API v2: trigger, acknowledge and resolve one alert per incident.

Target ``pagerduty:<key name>``; the key itself comes from the service config
(``notify.pagerduty.routing_keys``), never from rule files. ``dedup_key`` is
the installation id and the incident id (``a1b2c3d4:INC-7``), so a repeated
trigger (a redelivery after a crash or a failover) folds into the same PagerDuty
alert, and two installations never share one. The key sent is kept in the ref.

Intents:

* ``page``, ``resolve``  bring PagerDuty to the incident's CURRENT state (read from the
                store): trigger when open (again when the severity rose),
                acknowledge when acknowledged, resolve when resolved. What was
                last sent is kept as the ref, so repeated items send nothing,
                and the syncs queued behind it (a backlog after an outage) are
                covered by it. A node incident folded into a fleet incident
                before it was paged is never paged alone.
* ``escalate``  due when the escalation time is up: trigger on the escalation
                routing key unless the incident was acknowledged or resolved.

202 is done; 400 is never retried (the event is malformed: logged, counted as
failed); 429, 5xx and network errors are retried with backoff by the outbox.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Callable, ClassVar

import aiohttp
import msgspec
from msgspec import Meta

from alertd.core.json_types import JSONObject, JSONValue, integer, text as json_text
from alertd.core.http_session import LazySession

from alertd.core.outbox_items import Escalate, Intent, OutboxItem, Paging, Target
from alertd.core.response_marks import notifies_again
from alertd.core.durations import format_duration
from alertd.core.installation import scoped
from alertd.core.storm_growth import incident_trend
from alertd.core.vocabulary import EventKind
from alertd.core.model import ACKNOWLEDGED, CLOSED, OPEN, SEVERITY_RANK, Incident, Severity, iso
from alertd.integrations.base import (Delivered, DeliveryError, KeyedIntegration, KeyName, KeyReceiver, KeyRef,
                                       Links, Notifier, NotifierSettings, NotifyStore, RequestOptions,
                                       folded_unposted)
from alertd.integrations.presentation import ACTION_TEXT, incident_action, incident_links

log = logging.getLogger(__name__)
DEFAULT_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
# Ours -> the Events API's (its own words, which happen to be ours)
PD_SEVERITY: dict[str, str] = {Severity.CRITICAL: "critical", Severity.ERROR: "error", Severity.WARNING: "warning",
                               Severity.INFO: "info"}
MAX_SUMMARY = 1024
ROUTING_KEY = KeyRef("notify.pagerduty.routing_keys")  # a receiver's, and a route's escalation's


class PagerDutySection(RequestOptions, frozen=True):
    """PagerDuty Events API v2."""

    events_url: Annotated[str, Meta(description="Where events are sent (a test server's URL in tests).")] = \
        DEFAULT_EVENTS_URL
    routing_keys: Annotated[dict[KeyName, str], Meta(description=(
        "Name -> integration (routing) key, e.g. gpu-infra: ${PD_GPU_INFRA_KEY}. "
        "Rules refer to keys by name: routing_key: \"${gpu-infra}\"."))] = msgspec.field(default_factory=dict)


@dataclass(slots=True)
class PagerDutySettings(NotifierSettings):
    KIND: ClassVar[str] = "pagerduty"
    events_url: str = DEFAULT_EVENTS_URL
    routing_keys: dict[str, str] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return any(v.strip() for v in self.routing_keys.values())

    @classmethod
    def parse(cls, section: PagerDutySection, links: Links) -> "PagerDutySettings":
        """An empty value (``${PD_KEY:-}``) is no key; an empty URL the default one."""
        return cls(
            events_url=section.events_url or DEFAULT_EVENTS_URL,
            routing_keys={k: v for k, v in section.routing_keys.items() if v},
            **cls.shared(section, links),
        )


def _state(ref: str | None) -> JSONObject:
    if not ref:
        return {}
    try:
        value: JSONValue = json.loads(ref)
        return value if isinstance(value, dict) else {}
    except ValueError:
        return {}


class PagerDutyNotifier(Notifier):
    kind = "pagerduty"
    coalesce = frozenset({Intent.PAGE, Intent.RESOLVE})
    coalesce_groups = (frozenset({Intent.PAGE, Intent.RESOLVE}),)

    def __init__(self, settings: PagerDutySettings, store: NotifyStore, clock: Callable[[], datetime], *,
                 installation: Callable[[], str] = lambda: ""):
        self.settings, self.store, self.clock = settings, store, clock
        self.installation = installation  # the installation id (prefixes dedup keys), known once the store is open
        self._http_session = LazySession(self.settings.timeout)
        self.rejected = 0  # 400 answers: malformed events, never retried

    async def close(self) -> None:
        await self._http_session.close()

    def session(self) -> aiohttp.ClientSession:
        return self._http_session.get()

    async def deliver(self, items: list[OutboxItem], ref: str | None) -> Delivered:
        item = items[0]
        payloads = [i.payload for i in items]
        paging: list[Paging] = [p for p in payloads if isinstance(p, Paging)]
        if len(paging) < len(payloads):
            raise DeliveryError(f"PagerDuty takes pages, not {item.intent} items", retry=False)
        name = paging[0].routing_key or item.target.address
        key = self.settings.routing_keys.get(name)
        if not key:
            raise DeliveryError(f"no PagerDuty routing key named {name!r} in notify.pagerduty.routing_keys", retry=False)
        # The outbox coalesced the pages queued before the incident is read: this sends the CURRENT state.
        inc = await self.store.get_incident(item.incident_id)
        if inc is None or folded_unposted(inc, ref):
            return Delivered()
        if ref and inc.parent_id and await self._taken_over(inc, item.target, ref):
            return Delivered()  # its fleet took its PagerDuty alert over and keeps it current
        if not ref:
            ref = await self._adopted(items)
        return await self._sync(item, paging, inc, key, ref)

    async def _adopted(self, items: list[OutboxItem]) -> str | None:
        """A fleet's first page takes over the alert of a node incident already paged (``adopt`` names it,
        router.py): the storm stays ONE PagerDuty alert, updated to the fleet, instead of a second trigger."""
        child = next((i.payload.adopt for i in reversed(items) if i.payload.adopt), "")
        if not child:
            return None
        sent = _state(await self.store.notify_ref(str(child), items[0].target))
        if sent.get("state") != "triggered" or not sent.get("dedup_key"):
            return None  # acknowledged or resolved meanwhile: the fleet pages on its own
        return json.dumps({"state": "adopting", "severity": sent.get("severity", ""), "dedup_key": sent["dedup_key"]})

    async def _taken_over(self, inc: Incident, target: Target, ref: str) -> bool:
        """Whether the node incident's alert now belongs to its fleet (same dedup key): the node resolving or
        being acknowledged alone must not resolve the storm's page."""
        mine = _state(ref).get("dedup_key")
        fleet = _state(await self.store.notify_ref(inc.parent_id, target))
        return bool(mine) and fleet.get("dedup_key") == mine

    async def _sync(self, item: OutboxItem, payloads: list[Paging], inc: Incident, key: str, ref: str | None) -> Delivered:
        latest = payloads[-1]
        sent = _state(ref)
        # The key this incident's PagerDuty alert already has (bare for alerts opened before installation ids).
        dedup = json_text(sent, "dedup_key") or (inc.id if sent else scoped(self.installation(), inc.id))
        severity = latest.severity or inc.severity
        head = payloads[0]
        if isinstance(head, Escalate):
            if sent or inc.status != OPEN or inc.parent_id:
                return Delivered()  # escalated already, acknowledged/resolved in time, or its fleet escalates
            after = format_duration(timedelta(seconds=head.after))
            await self._send(key, "trigger", inc, severity, dedup, note=f"escalated: not acknowledged within {after}")
            return Delivered(ref=_triggered(inc, severity, dedup))
        last = sent.get("state", "")
        if inc.status == CLOSED:
            if last in ("triggered", "acknowledged", "adopting"):
                await self._send(key, "resolve", inc, severity, dedup)
                return Delivered(ref=json.dumps({"state": "resolved", "severity": severity, "dedup_key": dedup}))
            return Delivered()
        if inc.status == ACKNOWLEDGED:
            if last in ("triggered", "adopting"):
                await self._send(key, "acknowledge", inc, severity, dedup)
                return Delivered(ref=json.dumps({"state": "acknowledged", "severity": severity, "dedup_key": dedup}))
            return Delivered()
        # open
        if all(p.only_if_posted for p in payloads) and not last:
            return Delivered()
        if last in ("triggered", "acknowledged") and any(notifies_again(p.kinds) for p in payloads):
            return await self._notify_again(key, inc, item.target, severity, dedup, latest.note)
        rose = SEVERITY_RANK.get(severity, 0) > SEVERITY_RANK.get(json_text(sent, "severity"), 0)
        # "adopting": the same PagerDuty alert, now saying what the fleet is; a storm grown since its page was
        # sent: the same alert, with the summary of now. A trigger on an open alert's dedup_key pages no one.
        if not last or last == "adopting" or (last == "triggered" and (rose or _grew(inc, payloads, sent))):
            await self._send(key, "trigger", inc, severity, dedup, note=latest.note)
            return Delivered(ref=_triggered(inc, severity, dedup))
        return Delivered()

    async def _notify_again(self, key: str, inc: Incident, target: Target, severity: str, dedup: str,
                            note: str) -> Delivered:
        """News on an alert that is open (a failed repair): a trigger on it notifies nobody, so a new alert is
        opened. The incident's own alert is resolved and its key triggered again; an alert a fleet took over
        while the node was in it (same key) stays the fleet's, and the node opens one under a key of its own."""
        if await self._fleet_holds(inc, target, dedup):
            dedup = f"{dedup}/repair-failed"
        else:
            await self._send(key, "resolve", inc, severity, dedup)
        await self._send(key, "trigger", inc, severity, dedup, note=note)
        return Delivered(ref=_triggered(inc, severity, dedup))

    async def _fleet_holds(self, inc: Incident, target: Target, dedup: str) -> bool:
        """Whether a fleet the node incident left (its ``left_fleet`` events) pages under the node's key."""
        for fleet in dict.fromkeys(str(e.data.get("fleet") or "") for e in inc.timeline if e.kind == EventKind.LEFT_FLEET):
            if fleet and _state(await self.store.notify_ref(fleet, target)).get("dedup_key") == dedup:
                return True
        return False

    def event(self, key: str, action: str, inc: Incident, severity: str, note: str = "", dedup: str = "") -> JSONObject:
        body: JSONObject = {"routing_key": key, "event_action": action, "dedup_key": dedup or inc.id}
        if action != "trigger":
            return body
        p = inc.primary
        s = self.settings
        where = ", ".join(inc.nodes[:20]) + (" …" if len(inc.nodes) > 20 else "") if inc.fleet else inc.node
        shown = incident_links(inc, s.links)
        shown_links = [(href, text) for href, text in (
            (shown.runbook, "Runbook"), (shown.prometheus, "Prometheus"), (shown.alertmanager, "Alertmanager"),
            (shown.ui, f"alertd {inc.id}")) if href]
        details: JSONObject = {
            "incident": inc.id,
            "status": inc.status,
            "cluster": inc.cluster,
            "node": where,
            "gpus": [g.get("uuid") or g.get("pci_bus_id") or g.get("index") for g in inc.gpus],
            "xid": list[JSONValue](inc.xids),
            "signals": list[JSONValue](inc.signals),
            "action": ACTION_TEXT.get(incident_action(inc), incident_action(inc)),
            "meaning": p.meaning if p else "",
            "firing": list[JSONValue]([f"{m.alertname} {m.signal.title}".strip() for m in inc.firing_members()][:20]),
            "links": {text: href for href, text in shown_links},
        }
        trend = incident_trend(inc.annotations, len(inc.nodes), inc.storm_last) if inc.fleet else ""
        if inc.fleet:
            details["node_count"] = len(inc.nodes)
        if trend:  # "16 nodes now, 8 at 13:02, 4 at 12:58; +8 in 6 minutes"
            details["trend"] = trend
        if inc.namespace or inc.pod:
            details["pod"] = "/".join(x for x in (inc.namespace, inc.pod) if x)
        if note:
            details["note"] = note
        if inc.verdict is not None:
            details["history"] = inc.verdict.to_json()
        owners = inc.findings.owners
        if owners:
            details["owners"] = [o.to_json() for o in owners]
        gpu = inc.gpus[0] if len(inc.gpus) == 1 else {}
        component = (f"GPU {gpu.get('index')}" if gpu.get("index") else gpu.get("uuid", "")) or (p.kind if p else "")
        body["payload"] = {
            "summary": _clip(f"[{severity.upper()}] {inc.title}" + (f" ({note})" if note else "")
                             + (f" | {inc.verdict.line}" if inc.verdict is not None else ""), MAX_SUMMARY),
            "source": where or inc.cluster or "alertd",
            "severity": PD_SEVERITY.get(severity, "error"),
            "timestamp": iso(inc.opened_at),
            "component": component or "gpu",
            "group": inc.cluster or inc.group,
            "class": (f"xid {inc.xids[0]}" if inc.xids else (p.kind if p else inc.category)),
            "custom_details": details,
        }
        body["links"] = [{"href": href, "text": text} for href, text in shown_links]
        body["client"] = "alertd"
        if shown.ui:
            body["client_url"] = shown.ui
        return body

    async def _send(self, key: str, action: str, inc: Incident, severity: str, dedup: str, note: str = "") -> None:
        body = self.event(key, action, inc, severity, note, dedup)
        try:
            async with self.session().post(self.settings.events_url, json=body) as resp:
                text = await resp.text()
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise DeliveryError(f"PagerDuty {action} for {inc.id}: {type(exc).__name__}: {exc}", retry=True) from None
        if status == 202 or 200 <= status < 300:
            return
        if status == 400:
            self.rejected += 1
            log.error("PagerDuty rejected %s for %s (never retried): %s", action, inc.id, text[:500])
            raise DeliveryError(f"PagerDuty 400 for {action} {inc.id}: {text[:300]}", retry=False)
        after = None
        if retry_after:
            try:
                after = float(retry_after)
            except ValueError:
                after = None
        if status == 429 or status >= 500:
            raise DeliveryError(f"PagerDuty {status} for {action} {inc.id}", retry=True, after=after)
        raise DeliveryError(f"PagerDuty {status} for {action} {inc.id}: {text[:300]}", retry=False)


class PagerDuty(KeyedIntegration[PagerDutySettings, PagerDutySection]):
    name = "pagerduty"
    intents = frozenset({Intent.PAGE, Intent.RESOLVE, Intent.ESCALATE})
    receiver = KeyReceiver("routing_key", ROUTING_KEY)
    section = PagerDutySection

    def settings(self, section: PagerDutySection, links: Links) -> PagerDutySettings:
        return PagerDutySettings.parse(section, links)

    def notifier(self, settings: PagerDutySettings, store: NotifyStore, clock: Callable[[], datetime], *,
                 installation: Callable[[], str] = lambda: "") -> Notifier:
        return PagerDutyNotifier(settings, store, clock, installation=installation)

    def unknown(self, settings: PagerDutySettings, addresses: set[str]) -> list[str]:
        return sorted(a for a in addresses if a not in settings.routing_keys)


INTEGRATION = PagerDuty()


def _triggered(inc: Incident, severity: str, dedup: str) -> str:
    """The ref of a trigger sent: a fleet's also keeps the node count its summary said."""
    sent: JSONObject = {"state": "triggered", "severity": severity, "dedup_key": dedup}
    if inc.fleet:
        sent["nodes"] = len(inc.nodes)
    return json.dumps(sent)


def _grew(inc: Incident, payloads: list[Paging], sent: JSONObject) -> bool:
    """The engine said the storm grew (``storm_grew``, at most once per ``correlation.storm.page_updates``)
    and it has more nodes than the summary sent: a redelivery, or a count already sent, sends nothing."""
    return inc.fleet and any(EventKind.STORM_GREW in p.kinds for p in payloads) and len(inc.nodes) > integer(sent, "nodes")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
