"""A signed JSON webhook as an RMA ticket system: ServiceNow (through a scripted REST endpoint) or anything.

``POST`` the evidence as JSON (``version``, ``kind: "rma"``, ``ticket``: the ticket's own label, ``evidence``)
signed like the outgoing webhook (alertd/integrations/outgoing_webhook.py): ``X-Alertd-Timestamp``,
``X-Alertd-Signature`` (``sha256=`` + HMAC-SHA256 of ``<timestamp>.<body>``) and ``X-Alertd-Delivery``
(``rma/<label>``, the same on every retry, so the receiver can drop a duplicate). 2xx is done; the answer
may name the ticket (``{"key": ..., "url": ...}``, or ServiceNow's ``{"result": {"number": ...}}``), which
is then shown on the incident. 408, 429, 5xx and network errors are retried; any other status is not.
"""
from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from typing import TypedDict

import aiohttp

from alertd.core.http_session import LazySession
from alertd.core.model import iso
from alertd.core.tickets import EvidenceJson, RmaEvidence, TicketLink
from alertd.integrations.outgoing_webhook import sign
from alertd.integrations.tickets import RmaWebhookSettings, TicketError, worth_retrying

VERSION = "1"


class RmaBody(TypedDict):
    version: str
    kind: str
    ticket: str
    evidence: EvidenceJson


def delivery_id(ev: RmaEvidence) -> str:
    return f"rma/{ev.label}"


def _named(body: object) -> tuple[str, str]:
    """(key, url) the receiver gave the ticket, if its answer names one."""
    if not isinstance(body, dict):
        return "", ""
    result = body.get("result")
    inner = result if isinstance(result, dict) else body
    key = inner.get("key") or inner.get("number") or ""
    url = inner.get("url") or ""
    return (str(key), str(url)) if isinstance(key, (str, int)) and isinstance(url, str) else ("", "")


class WebhookTickets:
    """A TicketSystem (alertd/integrations/tickets.py) over a signed JSON webhook."""

    system = "webhook"

    def __init__(self, settings: RmaWebhookSettings, timeout: float, target: str = "webhook"):
        self.settings, self._target = settings, target
        self._session = LazySession(timeout)

    @property
    def target(self) -> str:
        return self._target

    async def find(self, evidence: RmaEvidence) -> TicketLink | None:
        return None  # a webhook cannot be asked; a resend carries the same X-Alertd-Delivery

    async def open(self, evidence: RmaEvidence, now: datetime) -> TicketLink:
        doc: RmaBody = {"version": VERSION, "kind": "rma", "ticket": evidence.label, "evidence": evidence.to_json()}
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
        ts, delivery = str(int(time.time())), delivery_id(evidence)
        headers = {**dict(self.settings.headers), "Content-Type": "application/json", "X-Alertd-Timestamp": ts,
                   "X-Alertd-Signature": sign(self.settings.signing_secret, ts, body), "X-Alertd-Delivery": delivery}
        try:
            async with self._session.get().post(self.settings.url, data=body, headers=headers) as resp:
                status, text = resp.status, await resp.text()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise TicketError(f"webhook {delivery}: {type(exc).__name__}: {exc}", retry=True) from None
        if not 200 <= status < 300:
            raise TicketError(f"webhook {delivery}: HTTP {status} {text[:200]}", retry=worth_retrying(status))
        try:
            key, url = _named(json.loads(text)) if text.strip() else ("", "")
        except ValueError:
            key, url = "", ""
        return TicketLink(self._target, self.system, key or evidence.label, url, evidence.gpu_uuid, iso(now))

    async def close(self) -> None:
        await self._session.close()


__all__ = ["WebhookTickets", "delivery_id"]
