"""Poison webhooks: attempts counted before the engine runs them, what was set aside listed and replayed.

The engine counts an attempt at each webhook it is about to take, in a transaction of its
own committed first (``count_attempt``), so a step that never ends (the process killed,
a replica that loses its lease while stuck) still counts; on PostgreSQL the count is
shared by every replica. Taking a webhook forgets its count (``_forget_attempts``, in the
step's transaction). What the engine sets aside (a webhook after too many attempts, an
alert it fails on) is an ``inbox`` row with ``processed = 2`` whose ``alert`` column
holds the reason, a newline, and the body to replay; replaying renames its redelivery
key (``processed = 3``) so the engine does not drop the replayed copy as already seen.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from alertd.core.model import iso
from alertd.store.database import Database, Part
from alertd.store.base import BODY_SHOWN, SetAside

SET_ASIDE, REPLAYED = 2, 3
LISTED_CHARS = 4096 + BODY_SHOWN  # characters of a note read for a listing: the reason, then the body


def note(reason: str, body: str) -> str:
    """What a set-aside row stores: the reason on one line, then the body."""
    return " ".join(reason.split()) + "\n" + body


def split_note(text: str) -> tuple[str, str]:
    """(reason, body) of a stored note (older versions wrote the same shape)."""
    reason, _, body = text.partition("\n")
    return reason, body


class Quarantine(Part):
    """Attempts at webhooks, and what was set aside: listed, and taken back for replay."""

    async def count_attempt(self, ids: list[int], now: datetime) -> tuple[list[int], int]:
        """Count one more attempt at webhooks the engine is about to take, committed before it runs them.
        When any of them was attempted before (a step that failed or never finished), only the first is
        counted and returned: after a failure the engine goes one webhook at a time. Returns the webhooks to
        take and the most attempts any of them had before this one."""
        def do(cur: Any) -> tuple[list[int], int]:
            marks = ", ".join(["?"] * len(ids))
            cur.execute(self.db.q(f"SELECT hook, attempts FROM inbox_attempts WHERE hook IN ({marks})"), ids)
            prior = {int(hook): int(n) for hook, n in cur.fetchall()}
            chosen = ids[:1] if prior else ids
            cur.executemany(self.db.q(
                "INSERT INTO inbox_attempts (hook, attempts, last_at) VALUES (?, 1, ?) ON CONFLICT (hook) "
                "DO UPDATE SET attempts = inbox_attempts.attempts + 1, last_at = excluded.last_at"),
                [(hook, iso(now)) for hook in chosen])
            return chosen, max((prior.get(h, 0) for h in chosen), default=0)
        if not ids:
            return [], 0
        result: tuple[list[int], int] = await self.db.run(self.db.attempt_tx, do)
        return result

    async def uncount_attempt(self, ids: list[int]) -> None:
        """Take back the attempts of a step the store refused (StoreUnavailable): not the webhooks' fault."""
        if ids:
            await self.db.run(self.db.tx, lambda cur: cur.execute(self.db.q(
                "UPDATE inbox_attempts SET attempts = attempts - 1 WHERE attempts > 0 AND hook IN ("
                + ", ".join(["?"] * len(ids)) + ")"), ids))

    async def list_set_aside(self, *, limit: int = 100, before: int | None = None) -> list[SetAside]:
        """Set-aside webhooks and alerts, newest first (``before``: ids below this one, for paging)."""
        bound = "AND seq < ? " if before is not None else ""
        args: list[Any] = [before] if before is not None else []
        rows = await self.db.run(self.db.query, f"SELECT seq, dedup, received_at, substr(alert, 1, {LISTED_CHARS}), "
                               f"length(alert), processed FROM inbox WHERE processed >= {SET_ASIDE} {bound}"
                               "ORDER BY seq DESC LIMIT ?", args + [limit])
        out = []
        for seq, key, received_at, text, length, processed in rows:
            reason, body = split_note(text or "")
            out.append(SetAside(int(seq), key, received_at, reason, body, int(processed) == REPLAYED,
                                int(length or 0) - len(reason) - 1))
        return out

    async def take_for_replay(self, item_id: int) -> SetAside | None:
        """Mark a set-aside row replayed and return it (None when there is no such row). Its redelivery key is
        renamed first, so the copy appended next is not dropped as already seen; appending is the caller's."""
        def do(cur: Any) -> SetAside | None:
            cur.execute(self.db.q("SELECT seq, dedup, received_at, alert, processed FROM inbox WHERE seq = ? "
                                f"AND processed >= {SET_ASIDE}"), (item_id,))
            row = cur.fetchone()
            if row is None:
                return None
            seq, key, received_at, text, processed = row
            if int(processed) != REPLAYED:
                key = f"replayed:{seq}:{key}"
                cur.execute(self.db.q(f"UPDATE inbox SET processed = {REPLAYED}, dedup = ? WHERE seq = ?"), (key, seq))
            reason, body = split_note(text or "")
            return SetAside(int(seq), key, received_at, reason, body, True)
        found: SetAside | None = await self.db.run(self.db.tx, do)
        return found


def forget_attempts(db: Database, cur: Any, ids: list[int]) -> None:
    """In the step's transaction: taken webhooks need no count."""
    cur.execute(db.q("DELETE FROM inbox_attempts WHERE hook IN (" + ", ".join(["?"] * len(ids)) + ")"), ids)


__all__ = ["BODY_SHOWN", "Quarantine", "REPLAYED", "SET_ASIDE", "SetAside", "forget_attempts", "note", "split_note"]
