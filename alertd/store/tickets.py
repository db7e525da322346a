"""RMA tickets kept in the store: one row per incident, GPU and ticket target, claimed before the ticket exists.

A ticket system with no idempotency key (Jira's issue create has none) is made to open one ticket by a row
claimed in a transaction before the request: the primary key (incident, GPU, target) lets one replica insert
it; the others see it taken. The ticket's key and link are recorded on the row once the system answered.
A claim whose holder died before recording may be taken over after ``stale_before`` (or at once by the
same holder after a restart); the taker is told it is a takeover, so it looks for a ticket the dead
holder may have opened (alertd/app/rma_handoff.py searches Jira by the ticket's own label) before opening one.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alertd.core.model import iso
from alertd.core.tickets import TicketLink
from alertd.store.database import Part

MIGRATION = [
    """CREATE TABLE rma_tickets (
        incident_id TEXT NOT NULL,
        gpu TEXT NOT NULL,
        target TEXT NOT NULL,
        system TEXT NOT NULL,
        holder TEXT NOT NULL,
        claimed_at TEXT NOT NULL,
        ticket_key TEXT NOT NULL DEFAULT '',
        url TEXT NOT NULL DEFAULT '',
        done_at TEXT,
        PRIMARY KEY (incident_id, gpu, target))""",
]
# New: inserted. Taken before: only an unfinished claim, by its own holder (a restart) or gone stale.
CLAIM = """INSERT INTO rma_tickets (incident_id, gpu, target, system, holder, claimed_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (incident_id, gpu, target) DO UPDATE SET holder = excluded.holder, claimed_at = excluded.claimed_at
WHERE rma_tickets.done_at IS NULL AND (rma_tickets.holder = excluded.holder OR rma_tickets.claimed_at < ?)
RETURNING claimed_at"""


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer to a claim: ``granted`` (this caller opens the ticket), ``takeover`` (a claim existed: a
    ticket may have been opened already, look first), or the ticket recorded before (``done``)."""

    granted: bool
    takeover: bool = False
    done: TicketLink | None = None


class RmaTickets(Part):
    """The rma_tickets rows (a part of the store)."""

    async def claim_ticket(self, incident_id: str, gpu: str, target: str, system: str, holder: str, now: datetime,
                           stale_before: datetime) -> Claim:
        def do(cur: Any) -> Claim:
            cur.execute(self.db.q("SELECT holder, ticket_key, url, done_at FROM rma_tickets WHERE incident_id = ? "
                                  "AND gpu = ? AND target = ?"), (incident_id, gpu, target))
            before = cur.fetchall()
            if before and before[0][3] is not None:
                return Claim(False, done=TicketLink(target, system, before[0][1], before[0][2], gpu, before[0][3]))
            cur.execute(self.db.q(CLAIM), (incident_id, gpu, target, system, holder, iso(now), iso(stale_before)))
            return Claim(bool(cur.fetchall()), takeover=bool(before))
        claim: Claim = await self.db.run(self.db.tx, do)
        return claim

    async def record_ticket(self, incident_id: str, ticket: TicketLink, holder: str) -> bool:
        """The ticket's key and link, on the row this holder claimed; False when another holder took it over."""
        def do(cur: Any) -> bool:
            cur.execute(self.db.q("UPDATE rma_tickets SET ticket_key = ?, url = ?, done_at = ? WHERE incident_id = ? "
                                  "AND gpu = ? AND target = ? AND holder = ? AND done_at IS NULL"),
                        (ticket.key, ticket.url, ticket.opened_at, incident_id, ticket.gpu, ticket.target, holder))
            return bool(cur.rowcount == 1)
        recorded: bool = await self.db.run(self.db.tx, do)
        return recorded

    async def release_ticket(self, incident_id: str, gpu: str, target: str, holder: str) -> None:
        """Give an unfinished claim up (the ticket system refused the request: nothing was opened)."""
        await self.db.run(self.db.tx, lambda cur: cur.execute(self.db.q(
            "DELETE FROM rma_tickets WHERE incident_id = ? AND gpu = ? AND target = ? AND holder = ? "
            "AND done_at IS NULL"), (incident_id, gpu, target, holder)))

    async def incident_tickets(self, incident_id: str) -> list[TicketLink]:
        rows = await self.db.run(self.db.query, "SELECT target, system, ticket_key, url, gpu, done_at FROM rma_tickets "
                                 "WHERE incident_id = ? AND done_at IS NOT NULL ORDER BY done_at, target",
                                 (incident_id,))
        return [TicketLink(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]
