"""Opsgenie Alert API v2: create, acknowledge and close one alert per incident.

Rules name an API key (``opsgenie: {api_key: "${gpu-team}"}``); the key (of
an Opsgenie API integration) lives in the config (``notify.opsgenie.api_keys``).
Target ``opsgenie:<key name>``; intents ``page`` and ``resolve`` bring the
alert to the incident's CURRENT state, like PagerDuty: create when open (again,
with the new priority, when the severity rose), acknowledge when acknowledged,
close when resolved. The alias is the incident id, so a repeated create (a
redelivery after a crash) is deduplicated by Opsgenie. What was last sent is
the ref, so repeated items send nothing.

Requests: ``POST {api_url}/v2/alerts`` and ``POST {api_url}/v2/alerts/{alias}/
acknowledge|close?identifierType=alias`` with ``Authorization: GenieKey <key>``.
Opsgenie answers 202 (processed asynchronously); 400/401/403/404/422 are
permanent; 429 and 5xx are retried with backoff.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Callable
from urllib.parse import quote

import aiohttp
import msgspec
from msgspec import Meta

from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.http_session import LazySession

from alertd.core.outbox_items import Intent, OutboxItem
from alertd.core.model import ACKNOWLEDGED, CLOSED, SEVERITY_RANK, Incident, Severity
from alertd.core.response_marks import notifies_again
from alertd.integrations.base import (Delivered, DeliveryError, KeyedIntegration, KeyName, KeyReceiver, KeyRef,
                                       Links, Notifier, NotifierSettings, NotifyStore, RequestOptions)
from alertd.integrations.presentation import ACTION_TEXT, incident_action, incident_links

DEFAULT_API_URL = "https://api.opsgenie.com"
PRIORITY: dict[str, str] = {Severity.CRITICAL: "P1", Severity.ERROR: "P2", Severity.WARNING: "P3", Severity.INFO: "P5"}
SOURCE = "alertd"
# Documented limits of the create request.
MAX_MESSAGE, MAX_DESCRIPTION, MAX_TAG, MAX_TAGS, MAX_DETAILS = 130, 15000, 50, 20, 8000


class OpsgenieSection(RequestOptions, frozen=True):
    """Opsgenie Alert API v2."""

    api_url: Annotated[str, Meta(pattern="^https?://", description="EU: https://api.eu.opsgenie.com.")] = \
        DEFAULT_API_URL
    api_keys: Annotated[dict[KeyName, str], Meta(description=(
        "Name -> API integration key, e.g. gpu-team: ${OPSGENIE_GPU_KEY}."))] = msgspec.field(default_factory=dict)


@dataclass(slots=True)
class OpsgenieSettings(NotifierSettings):
    api_url: str = DEFAULT_API_URL
    api_keys: dict[str, str] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return any(v.strip() for v in self.api_keys.values())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def create_body(inc: Incident, settings: OpsgenieSettings, note: str = "") -> JSONObject:
    p = inc.primary
    where = inc.node or ", ".join(inc.nodes[:10]) or inc.cluster
    details = {"incident": inc.id, "cluster": inc.cluster, "node": where, "severity": inc.severity,
               "xids": ",".join(map(str, inc.xids)), "signals": ",".join(inc.signals),
               "action": ACTION_TEXT.get(incident_action(inc), incident_action(inc))}
    links = incident_links(inc, settings.links)
    if links.api:
        details["alertd"] = links.api
    if links.runbook:
        details["runbook"] = links.runbook
    details = {k: v for k, v in details.items() if v}
    while len(json.dumps(details)) > MAX_DETAILS:  # keep within the documented size, dropping the longest value
        details.pop(max(details, key=lambda k: len(details[k])))
    tags = [t for t in (inc.cluster, inc.category, *(f"xid-{x}" for x in inc.xids)) if t]
    description = "\n".join(x for x in (p.meaning if p else "", note, details.get("action", "")) if x)
    return {
        "message": _clip(f"[{inc.severity.upper()}] {inc.title}", MAX_MESSAGE),
        "alias": inc.id,
        "description": _clip(description, MAX_DESCRIPTION),
        "tags": list[JSONValue]([_clip(t, MAX_TAG) for t in dict.fromkeys(tags)][:MAX_TAGS]),
        "details": dict[str, JSONValue](details),
        "entity": _clip(where, 512),
        "source": SOURCE,
        "priority": PRIORITY.get(inc.severity, "P3"),
    }


class OpsgenieNotifier(Notifier):
    kind = "opsgenie"

    def __init__(self, settings: OpsgenieSettings, store: NotifyStore, clock: Callable[[], datetime]):
        self.settings, self.store, self.clock = settings, store, clock
        self._http_session = LazySession(self.settings.timeout)

    async def close(self) -> None:
        await self._http_session.close()

    async def deliver(self, items: list[OutboxItem], ref: str | None) -> Delivered:
        item = items[0]
        key = self.settings.api_keys.get(item.target.address)
        if not key:
            raise DeliveryError(f"no Opsgenie API key named {item.target.address!r} in notify.opsgenie.api_keys",
                                retry=False)
        inc = await self.store.get_incident(item.incident_id)
        if inc is None:
            return Delivered()
        sent = json.loads(ref) if ref else {}
        last = sent.get("state", "")
        if inc.status == CLOSED:
            if last in ("created", "acknowledged"):
                await self._send(key, f"/v2/alerts/{quote(inc.id, safe='')}/close?identifierType=alias",
                                 {"source": SOURCE, "note": "resolved in alertd"})
                return Delivered(ref=json.dumps({"state": "closed", "severity": sent.get("severity", "")}))
            return Delivered()
        if inc.status == ACKNOWLEDGED:
            if last == "created":
                await self._send(key, f"/v2/alerts/{quote(inc.id, safe='')}/acknowledge?identifierType=alias",
                                 {"source": SOURCE, "user": _clip(inc.acknowledged_by or SOURCE, 100)})
                return Delivered(ref=json.dumps({"state": "acknowledged", "severity": sent.get("severity", "")}))
            return Delivered()
        if last in ("created", "acknowledged") and any(notifies_again(i.payload.kinds) for i in items):
            # A create with an open alert's alias notifies nobody: close it, and the alias opens a new one that does
            await self._send(key, f"/v2/alerts/{quote(inc.id, safe='')}/close?identifierType=alias",
                             {"source": SOURCE, "note": "reopened in alertd: the repair failed"})
            last = ""
        if last and not (last == "created" and SEVERITY_RANK.get(inc.severity, 0) >
                         SEVERITY_RANK.get(sent.get("severity", ""), 0)):
            return Delivered()
        await self._send(key, "/v2/alerts", create_body(inc, self.settings, item.payload.note))
        return Delivered(ref=json.dumps({"state": "created", "severity": inc.severity}))

    async def _send(self, key: str, path: str, body: JSONObject) -> None:
        url = self.settings.api_url.rstrip("/") + path
        try:
            async with self._http_session.get().post(url, json=body, headers={"Authorization": f"GenieKey {key}"}) as resp:
                status, text = resp.status, await resp.text()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise DeliveryError(f"Opsgenie {path}: {type(exc).__name__}: {exc}", retry=True) from None
        if 200 <= status < 300:
            return
        retry = status == 429 or status >= 500
        raise DeliveryError(f"Opsgenie {path}: HTTP {status} {text[:300]}", retry=retry)


class Opsgenie(KeyedIntegration[OpsgenieSettings, OpsgenieSection]):
    name = "opsgenie"
    intents = frozenset({Intent.PAGE, Intent.RESOLVE})
    receiver = KeyReceiver("api_key", KeyRef("notify.opsgenie.api_keys"),
                           "An Opsgenie API integration key from notify.opsgenie.api_keys, by name.")
    section = OpsgenieSection

    def settings(self, section: OpsgenieSection, links: Links) -> OpsgenieSettings:
        return OpsgenieSettings(api_url=section.api_url, api_keys={k: v for k, v in section.api_keys.items() if v},
                                **OpsgenieSettings.shared(section, links))

    def notifier(self, settings: OpsgenieSettings, store: NotifyStore, clock: Callable[[], datetime], *,
                 installation: Callable[[], str] = lambda: "") -> Notifier:
        return OpsgenieNotifier(settings, store, clock)

    def unknown(self, settings: OpsgenieSettings, addresses: set[str]) -> list[str]:
        return sorted(a for a in addresses if a not in settings.api_keys)


INTEGRATION = Opsgenie()
