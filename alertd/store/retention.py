"""What the store holds and how it is kept bounded: row counts, and pruning past retention.

A part of the store. Pruning runs in small fenced transactions (PRUNE_BATCH rows each), so the
writer is never held long and SQLite's WAL stays small.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, cast

from alertd.core.model import iso
from alertd.store.inbox import Inbox

PRUNE_BATCH = 500  # rows per pruning transaction
PRUNE_MAX_BATCHES = 200  # per table and housekeeping round (the rest waits for the next round)


class Retention(Inbox):
    """Counts for the metrics, and pruning of what retention no longer keeps. Over the inbox part: it counts
    the alerts not taken yet (``pending_alerts``)."""

    async def prune(self, before: datetime, *, resolved_before: datetime | None = None) -> int:
        """Drop processed inbox rows and delivered outbox rows older than ``before`` and, when given, resolved
        incidents (members, timeline) resolved before ``resolved_before``; in small batches."""
        cutoff = iso(before)
        statements = [
            # redelivery keys (set-aside alerts, processed = 2, are kept for inspection)
            ("DELETE FROM inbox WHERE seq IN (SELECT seq FROM inbox WHERE processed = 1 AND received_at < ? LIMIT ?)",
             cutoff),
            ("DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE state = 'done' AND done_at < ? LIMIT ?)",
             cutoff),
            ("DELETE FROM commands WHERE id IN (SELECT id FROM commands WHERE state = 'done' AND created_at < ? LIMIT ?)",
             cutoff),
        ]
        total = 0
        for statement, arg in statements:
            def one(cur: Any, st: str = statement, a: str = arg) -> int:
                return self._delete(cur, st, (a, PRUNE_BATCH))
            total += await self._prune_batches(one)
        if resolved_before is not None:
            resolved_cutoff = iso(resolved_before)
            total += await self._prune_batches(lambda cur: self._prune_incidents(cur, resolved_cutoff))
        return total

    async def _prune_batches(self, one: Callable[[Any], int]) -> int:
        total = 0
        for _ in range(PRUNE_MAX_BATCHES):
            n: int = await self.db.run(self.db.ftx, one)
            total += n
            if n < PRUNE_BATCH:
                break
        return total

    def _delete(self, cur: Any, statement: str, args: tuple[Any, ...]) -> int:
        cur.execute(self.db.q(statement), args)
        return max(cast(int, cur.rowcount), 0)

    def _prune_incidents(self, cur: Any, cutoff: str) -> int:
        """Resolved incidents older than the cutoff, with their members, timeline and search facets."""
        cur.execute(self.db.q("SELECT id FROM incidents WHERE status = 'resolved' AND resolved_at < ? LIMIT ?"),
                    (cutoff, PRUNE_BATCH))
        ids = [(r[0],) for r in cur.fetchall()]
        for table in ("members", "events", "incident_facets", "notify_refs", "router_marks"):
            cur.executemany(self.db.q(f"DELETE FROM {table} WHERE incident_id = ?"), ids)
        cur.executemany(self.db.q("DELETE FROM incidents WHERE id = ?"), ids)
        return len(ids)

    async def stats(self) -> dict[str, int]:
        def do() -> dict[str, int]:
            out = {f"incidents_{s}": n for s, n in self.db.query("SELECT status, count(*) FROM incidents GROUP BY status")}
            out["inbox_pending"] = self.pending_alerts()
            out.update({f"outbox_{s}": n for s, n in self.db.query("SELECT state, count(*) FROM outbox GROUP BY state")})
            return out
        counts: dict[str, int] = await self.db.run(do)
        return counts
