"""The RMA handoff: an approved ``rma`` remediation opens one ticket per GPU of the incident in each target.

The evidence (alertd.core.tickets.RmaEvidence) is read when the step runs: the GPU's UUID, serial and PCI
address from the incident's GPUs (their exporter labels) or the store's GPU history, the GPU's Xid history
with times (the store's ``gpu_history``), and the kernel-log lines of the incident's log evidence.

Exactly one ticket per incident, GPU and target, whichever replica runs the step and however often: the
store's row is claimed in a transaction before the request (alertd/store/tickets.py) and the ticket recorded
on it after. A crash between the ticket system's answer and the record leaves a claim without a ticket; the
next claim by the same holder (a restart) or by another once it is stale is a *takeover*, which first asks
the system for a ticket carrying this evidence's label (Jira's JQL search) and records that one. What is left:
Jira's search is eventually consistent, so an issue created within a second or so of the crash may not be
found yet (two issues, both labelled: the duplicate is easy to see and close); a webhook cannot be asked, so
a takeover sends it again with the same ``X-Alertd-Delivery`` for the receiver to drop.
"""
from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta
from typing import Awaitable, Callable, Protocol, Sequence

from alertd.core.json_types import JSONObject, as_array, text
from alertd.core.model import Incident, iso
from alertd.core.tickets import RmaEvidence, TicketLink, XidSeen
from alertd.core.vocabulary import RemediationStep
from alertd.integrations.jira import JiraTickets
from alertd.integrations.rma_webhook import WebhookTickets
from alertd.integrations.tickets import RmaSettings, TicketError, TicketSystem
from alertd.store.tickets import Claim

log = logging.getLogger(__name__)
STALE = timedelta(minutes=5)  # a claim nobody recorded a ticket on within this may be taken over


class TicketStore(Protocol):
    """The store as the handoff uses it: the ticket rows (alertd/store/tickets.py) and the GPU history."""

    async def claim_ticket(self, incident_id: str, gpu: str, target: str, system: str, holder: str, now: datetime,
                           stale_before: datetime) -> Claim: ...

    async def record_ticket(self, incident_id: str, ticket: TicketLink, holder: str) -> bool: ...

    async def release_ticket(self, incident_id: str, gpu: str, target: str, holder: str) -> None: ...

    async def gpu_history(self, uuid: str) -> list[JSONObject]: ...


def xid_history(rows: Sequence[JSONObject]) -> tuple[XidSeen, ...]:
    """The GPU's Xids with times, oldest first, from its gpu_history rows (one per incident)."""
    seen = [XidSeen(text(r, "first") or text(r, "openedAt"), x, text(r, "incident"), text(r, "node"))
            for r in rows for x in as_array(r.get("xids")) if isinstance(x, int)]
    return tuple(sorted(seen, key=lambda x: (x.at, x.incident, x.xid)))


def build_evidence(inc: Incident, gpu: dict[str, str], history: Sequence[JSONObject], *, why: str,
                   alertd_url: str = "") -> RmaEvidence:
    """One GPU's evidence (pure): its labels first, the history's serial and PCI address where they lack them."""
    def from_history(key: str) -> str:
        return next((text(r, key) for r in reversed(history) if text(r, key)), "")
    uuid = gpu.get("uuid", "")
    lines = inc.findings.log_lines()
    return RmaEvidence(
        incident=inc.id, title=inc.title, cluster=inc.cluster, node=inc.node, gpu_uuid=uuid,
        serial=gpu.get("serial") or from_history("serial"), pci_bus_id=gpu.get("pci_bus_id") or from_history("pci_bus_id"),
        model=gpu.get("model", ""), xid_history=xid_history(history),
        kernel_log=tuple(lines), why=why,
        link=f"{alertd_url.rstrip('/')}/ui/incidents/{inc.id}" if alertd_url else "")


def build_systems(settings: RmaSettings) -> list[TicketSystem]:
    systems: list[TicketSystem] = []
    if settings.jira is not None:
        systems.append(JiraTickets(settings.jira, settings.timeout))
    if settings.webhook is not None:
        systems.append(WebhookTickets(settings.webhook, settings.timeout))
    return systems


class RmaHandoff:
    """Opens an incident's RMA tickets, once each (see the module's docstring)."""

    def __init__(self, store: TicketStore, systems: Sequence[TicketSystem], *, holder: str,
                 clock: Callable[[], datetime], link: Callable[[str, TicketLink], Awaitable[object]],
                 alertd_url: str = ""):
        self.store, self.systems, self.holder, self.clock = store, list(systems), holder, clock
        self.link, self.alertd_url = link, alertd_url

    @property
    def targets(self) -> list[str]:
        return [s.target for s in self.systems]

    async def evidence(self, inc: Incident, why: str) -> list[RmaEvidence]:
        """One per GPU the incident names (a node-level incident: one without a GPU)."""
        gpus = [g for g in inc.gpus if g.get("uuid")] or [{}]
        return [build_evidence(inc, g, await self.store.gpu_history(g["uuid"]) if g.get("uuid") else [], why=why,
                               alertd_url=self.alertd_url) for g in gpus]

    async def open(self, inc: Incident, why: str, *, dry_run: bool) -> list[JSONObject]:
        """Every ticket of the incident: one result per GPU and target (``ok``, what was done, the link)."""
        results: list[JSONObject] = []
        for ev in await self.evidence(inc, why):
            for system in self.systems:
                step: JSONObject = {"node": inc.node, "step": RemediationStep.TICKET.value, "target": system.target,
                                    "gpu": ev.gpu_uuid}
                if dry_run:
                    results.append({**step, "ok": True, "result": f"dry run: would open a {system.system} ticket "
                                    f"with {len(ev.xid_history)} Xid(s) and {len(ev.kernel_log)} kernel log line(s)"})
                    continue
                try:
                    ticket, how = await self._one(system, ev)
                except TicketError as exc:
                    results.append({**step, "ok": False, "result": str(exc), "retry": exc.retry})
                    continue
                await self.link(inc.id, ticket)
                results.append({**step, "ok": True, "result": how, "key": ticket.key, "url": ticket.url})
        return results

    async def _one(self, system: TicketSystem, ev: RmaEvidence) -> tuple[TicketLink, str]:
        now = self.clock()
        claim = await self.store.claim_ticket(ev.incident, ev.gpu_uuid, system.target, system.system, self.holder,
                                              now, now - STALE)
        if claim.done is not None:
            return claim.done, f"opened before: {claim.done.key}"
        if not claim.granted:
            raise TicketError(f"{system.target}: another replica is opening this ticket", retry=True)
        found = await system.find(ev) if claim.takeover else None
        if found is not None:
            ticket = dataclasses.replace(found, opened_at=iso(now))
            how = f"found {found.key}, opened before a restart"
        else:
            try:
                ticket = await system.open(ev, now)
            except TicketError as exc:
                if not exc.retry:  # refused: nothing was opened, the next try may claim again
                    await self.store.release_ticket(ev.incident, ev.gpu_uuid, system.target, self.holder)
                raise
            how = f"opened {ticket.key}"
        if not await self.store.record_ticket(ev.incident, ticket, self.holder):
            log.warning("ticket %s of %s recorded by another holder meanwhile", ticket.key, ev.incident)
        return ticket, how

    async def close(self) -> None:
        for system in self.systems:
            await system.close()


__all__ = ["RmaHandoff", "build_evidence", "build_systems", "xid_history"]
