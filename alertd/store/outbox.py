"""The outbox as delivery sees it: due work, its completion and retries, and the notifiers' saved refs.

A part of the store. Items are queued by the engine's step (alertd/store/steps.py); every write here
is one of the engine's and fenced (``Database.ftx``).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from alertd.core.model import iso
from alertd.core.outbox_items import LEGACY_KINDS, OutboxItem
from alertd.store import sql
from alertd.store.database import Part


class Outbox(Part):
    """Pending deliveries, oldest first per incident and target, and the external ids they saved."""

    async def due_outbox(self, now: datetime, limit: int) -> list[OutboxItem]:
        """Pending work that is due, oldest first; at most one (the oldest) per incident+target."""
        return [sql.outbox_item(r) for r in await self.db.run(self.db.query, sql.DUE_OUTBOX, (iso(now), limit))]

    async def finish_outbox(self, item_id: int, *, ref: tuple[str, str, str] | None = None) -> None:
        """Mark delivered; ``ref`` (incident, target, external id such as a Slack ts) is saved in the same commit."""
        await self.finish_outbox_batch([(item_id, ref)])

    async def finish_outbox_batch(self, done: list[tuple[int, tuple[str, str, str] | None]]) -> None:
        """Mark pending items done, saving their refs, in one commit (one fsync per delivery round).

        Also how a notifier marks queued items that one delivery covered (coalesced updates)."""
        if not done:
            return
        now = iso(datetime.now(timezone.utc))
        q = self.db.q

        def do(cur: Any) -> None:
            refs = [ref for _, ref in done if ref is not None]
            if refs:
                cur.executemany(q(sql.UPSERT_REF), refs)
            cur.executemany(q("UPDATE outbox SET state = 'done', done_at = ? WHERE id = ? AND state = 'pending'"),
                            [(now, item_id) for item_id, _ in done])
            # Delivered: the row stays for the incident page (state, attempts, times), the payload is not read again.
            cur.executemany(q("DELETE FROM outbox_payloads WHERE id = ? AND "
                              "(SELECT o.state FROM outbox o WHERE o.id = outbox_payloads.id) = 'done'"),
                            [(item_id,) for item_id, _ in done])
        await self.db.run(self.db.ftx, do)

    async def save_ref(self, incident_id: str, target: str, ref: str) -> None:
        """Save an external id before the rest of a delivery, so a crash cannot post twice."""
        await self.db.run(self.db.ftx, lambda cur: cur.execute(self.db.q(sql.UPSERT_REF), (incident_id, target, ref)))

    async def pending_outbox_for(self, incident_id: str, target: str, *, after_id: int,
                                 kinds: tuple[str, ...]) -> list[OutboxItem]:
        """Pending items of these intents for one incident+target queued after ``after_id``, oldest first."""
        marks = ", ".join("?" for _ in kinds)
        rows = await self.db.run(self.db.query, (
            f"{sql.OUTBOX_SELECT} WHERE o.incident_id = ? AND o.target = ? AND o.state = 'pending' "
            f"AND o.id > ? AND o.kind IN ({marks}) ORDER BY o.id"), (incident_id, str(target), after_id, *(str(LEGACY_KINDS.get(k) or k) for k in kinds)))
        return [sql.outbox_item(r) for r in rows]

    async def retry_outbox(self, item_id: int, due_at: datetime, error: str, *, give_up: bool = False) -> None:
        state = "failed" if give_up else "pending"
        await self.db.run(self.db.ftx, lambda cur: cur.execute(
            self.db.q("UPDATE outbox SET attempts = attempts + 1, due_at = ?, last_error = ?, state = ? WHERE id = ?"),
            (iso(due_at), error[:1000], state, item_id)))

    async def notify_ref(self, incident_id: str, target: str) -> str | None:
        rows = await self.db.run(self.db.query, "SELECT ref FROM notify_refs WHERE incident_id = ? AND target = ?",
                                 (incident_id, target))
        return rows[0][0] if rows else None

    async def any_ref(self, target: str, like: str) -> str | None:
        """One saved ref of ``target`` (any incident) matching the SQL pattern ``like``, or None."""
        rows = await self.db.run(self.db.query, "SELECT ref FROM notify_refs WHERE target = ? AND ref LIKE ? LIMIT 1",
                                 (target, like))
        return rows[0][0] if rows else None
