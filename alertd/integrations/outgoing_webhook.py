"""A generic webhook: signed JSON for ticketing systems and ChatOps bots.

Rules name an endpoint (``webhook: {endpoint: "${ticketing}"}``); its URL and
secret live in the config (``notify.webhook.endpoints``). Target
``webhook:<endpoint>``; intents ``show`` (the incident as it is now; queued
ones are coalesced), ``timeline`` (new timeline events) and ``escalate`` (an
escalation note, lane ``escalation``).

Every request is ``POST`` with a JSON body (``version``, ``intent``,
``incident``, ``events``, ``kinds``, ``note``, ``muted``, ``sequence``) and:

* ``X-Alertd-Timestamp``: Unix seconds;
* ``X-Alertd-Signature``: ``sha256=`` + hex HMAC-SHA256 of
  ``<timestamp>.<body>`` with the endpoint's secret (the receiver checks it
  and refuses old timestamps, against replays);
* ``X-Alertd-Delivery``: ``<incident>/<sequence>``, the same on a retry, so
  the receiver can drop duplicates.

2xx is done; 408, 429 and 5xx (and network errors) are retried, honouring
Retry-After; any other status is a permanent failure.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Callable

import aiohttp
import msgspec
from msgspec import Meta

from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.http_session import LazySession

from alertd.core.outbox_items import Escalate, Intent, OutboxItem, Show, Timeline
from alertd.core.model import OPEN, Incident, iso
from alertd.core.sections import Section
from alertd.integrations.base import (Delivered, DeliveryError, KeyedIntegration, KeyName, KeyReceiver, KeyRef,
                                       Links, Notifier, NotifierSettings, NotifyStore, RequestOptions)
from alertd.integrations.presentation import incident_links

VERSION = "1"
SENT = "sent"  # the ref once anything reached the endpoint: later quiet changes keep it current


class EndpointSection(Section, frozen=True, kw_only=False):
    """One endpoint: where to POST, and the key that signs each request."""

    url: Annotated[str, Meta(pattern="^https?://", description="Where to POST.")]
    secret: Annotated[str, Meta(min_length=16, description="HMAC-SHA256 key for X-Alertd-Signature, e.g. ${TICKETS_SECRET}.")]
    headers: Annotated[dict[str, str], Meta(description=(
        "Extra request headers (e.g. an Authorization the receiver wants)."))] = msgspec.field(default_factory=dict)


class WebhookSection(RequestOptions, frozen=True):
    """Generic webhooks: signed JSON for ticketing and ChatOps (docs/notifications.md)."""

    endpoints: Annotated[dict[KeyName, EndpointSection], Meta(description=(
        "Name -> endpoint. Rules refer to endpoints by name: endpoint: \"${ticketing}\"."))] = \
        msgspec.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    secret: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class WebhookSettings(NotifierSettings):
    endpoints: dict[str, Endpoint] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return bool(self.endpoints)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Alertd-Signature value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def webhook_incident(inc: Incident, links: Links) -> JSONObject:
    """The incident as the webhook shows it: enough for a ticket, without every member of a fleet."""
    p = inc.primary
    shown = incident_links(inc, links)
    doc: JSONObject = {
        "id": inc.id, "key": inc.key, "status": inc.status, "severity": inc.severity, "category": inc.category,
        "title": inc.title, "cluster": inc.cluster, "node": inc.node, "nodes": list[JSONValue](inc.nodes[:50]),
        "nodeCount": len(inc.nodes), "namespace": inc.namespace, "pod": inc.pod,
        "gpus": [dict[str, JSONValue](g) for g in inc.gpus], "xids": list[JSONValue](inc.xids),
        "signals": list[JSONValue](inc.signals), "firing": inc.firing, "memberCount": len(inc.members),
        "openedAt": iso(inc.opened_at), "updatedAt": iso(inc.updated_at), "resolvedAt": iso(inc.resolved_at),
        "acknowledgedBy": inc.acknowledged_by, "action": p.action if p else "", "meaning": p.meaning if p else "",
        "links": {name: url for name, url in (("runbook", shown.runbook), ("alertmanager", shown.alertmanager),
                                              ("alertd", shown.api)) if url},
    }
    owners = inc.findings.owners
    if owners:
        doc["owners"] = [o.to_json() for o in owners]
    return doc


class WebhookNotifier(Notifier):
    kind = "webhook"
    coalesce = frozenset({Intent.SHOW, Intent.TIMELINE})
    needs_ref = frozenset({Intent.TIMELINE})

    def __init__(self, settings: WebhookSettings, store: NotifyStore, clock: Callable[[], datetime]):
        self.settings, self.store, self.clock = settings, store, clock
        self.links = settings.links
        self._http_session = LazySession(self.settings.timeout)

    async def close(self) -> None:
        await self._http_session.close()

    async def deliver(self, items: list[OutboxItem], ref: str | None) -> Delivered:
        head = items[0]
        endpoint = self.settings.endpoints.get(head.target.address)
        if endpoint is None:
            raise DeliveryError(f"no webhook endpoint named {head.target.address!r} in notify.webhook.endpoints",
                                retry=False)
        inc = await self.store.get_incident(head.incident_id)
        if inc is None:
            return Delivered()
        if head.intent == Intent.ESCALATE:
            if ref or inc.status != OPEN:
                return Delivered()  # noted already, or acknowledged/resolved in time
        payloads = [i.payload for i in items]
        body: JSONObject = {
            "version": VERSION,
            "intent": str(head.intent),
            "sequence": items[-1].id,
            "kinds": [k for p in payloads for k in p.kinds],
            "events": [e for p in payloads if isinstance(p, (Show, Timeline)) for e in p.events],
            "note": next((p.note for p in reversed(payloads) if p.note), ""),
            "muted": payloads[-1].muted,
            "incident": webhook_incident(inc, self.links),
        }
        if isinstance(head.payload, Escalate):
            body["escalation"] = {"after": head.payload.after, "routingKey": head.payload.routing_key}
        await self._post(endpoint, body, f"{inc.id}/{items[-1].id}")
        return Delivered(ref=SENT)

    async def _post(self, endpoint: Endpoint, doc: JSONObject, delivery: str) -> None:
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
        ts = str(int(time.time()))
        headers = {**dict(endpoint.headers), "Content-Type": "application/json", "X-Alertd-Timestamp": ts,
                   "X-Alertd-Signature": sign(endpoint.secret, ts, body), "X-Alertd-Delivery": delivery}
        try:
            async with self._http_session.get().post(endpoint.url, data=body, headers=headers) as resp:
                status, text = resp.status, await resp.text()
                retry_after = resp.headers.get("Retry-After")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise DeliveryError(f"webhook {delivery}: {type(exc).__name__}: {exc}", retry=True) from None
        if 200 <= status < 300:
            return
        after = float(retry_after) if retry_after and retry_after.isdigit() else None
        retry = status in (408, 429) or status >= 500
        raise DeliveryError(f"webhook {delivery}: HTTP {status} {text[:200]}", retry=retry, after=after)


class Webhook(KeyedIntegration[WebhookSettings, WebhookSection]):
    name = "webhook"
    intents = frozenset({Intent.SHOW, Intent.TIMELINE, Intent.ESCALATE})
    conversation = True
    receiver = KeyReceiver("endpoint", KeyRef("notify.webhook.endpoints"),
                           "A webhook endpoint from notify.webhook.endpoints, by name.")
    section = WebhookSection

    def settings(self, section: WebhookSection, links: Links) -> WebhookSettings:
        endpoints = {name: Endpoint(e.url, e.secret, tuple(sorted(e.headers.items())))
                     for name, e in section.endpoints.items()}
        return WebhookSettings(endpoints=endpoints, **WebhookSettings.shared(section, links))

    def notifier(self, settings: WebhookSettings, store: NotifyStore, clock: Callable[[], datetime], *,
                 installation: Callable[[], str] = lambda: "") -> Notifier:
        return WebhookNotifier(settings, store, clock)

    def unknown(self, settings: WebhookSettings, addresses: set[str]) -> list[str]:
        return sorted(a for a in addresses if a not in settings.endpoints)


INTEGRATION = Webhook()
