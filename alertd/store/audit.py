"""Who did what (the audit trail), and the signed requests already seen (a durable replay cache).

Parts of the store; each runs on the backend's thread.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from alertd.core.model import iso, parse_instant
from alertd.store.base import AuditEntry
from alertd.store.database import Part


class AuditTrail(Part):
    """Actions on incidents and rules, through any door, and how they ended."""

    async def record_audit(self, entry: AuditEntry) -> None:
        await self.db.run(self.db.tx, lambda cur: cur.execute(
            self.db.q("INSERT INTO audit (at, actor, action, target, via, outcome, detail) VALUES (?, ?, ?, ?, ?, ?, ?)"),
            (iso(entry.at), entry.actor, entry.action, entry.target, entry.via, entry.outcome, entry.detail[:2000])))

    async def list_audit(self, *, since: datetime | None = None, actor: str | None = None,
                         action: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """Newest first. ``actor``: a principal's entries, also those with a stated name (``alice (oncall)``)."""
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("at >= ", iso(since) if since else None), ("action = ", action)):
            if value:
                where.append(column + "?")
                args.append(value)
        if actor:
            where.append("(actor = ? OR actor LIKE ? ESCAPE '!')")
            args += [actor, "% (" + actor.replace("!", "!!").replace("%", "!%").replace("_", "!_") + ")"]
        statement = ("SELECT at, actor, action, target, via, outcome, detail FROM audit"
                     + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC LIMIT ?")
        rows = await self.db.run(self.db.query, statement, [*args, limit])
        return [AuditEntry(parse_instant(r[0]), *r[1:]) for r in rows]


class SeenOnce(Part):
    """Keys seen before, each kept for a while: Slack's signed requests are refused when replayed."""

    async def remember_once(self, key: str, now: datetime, forget_before: datetime) -> bool:
        """True the first time ``key`` is seen (kept until ``forget_before`` passes it)."""
        def do(cur: Any) -> bool:
            cur.execute(self.db.q("DELETE FROM seen_once WHERE seen_at < ?"), (iso(forget_before),))
            cur.execute(self.db.q("INSERT INTO seen_once (key, seen_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING "
                                  "RETURNING key"), (key, iso(now)))
            return bool(cur.fetchall())
        first: bool = await self.db.run(self.db.tx, do)
        return first
