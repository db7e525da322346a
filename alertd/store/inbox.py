"""The engine's side of the inbox: webhooks taken from the log in order, their alerts' redelivery keys kept.

A part of the store; runs on the backend's thread. The receive side (alertd/store/inbox_log.py)
only appends; here the engine reads the log past what it took, asks which keys it has seen
(``known_keys``: a retry, an HA peer's copy), and its step's transaction (alertd/store/steps.py)
records the new keys in ``inbox`` and what it took (``Database.take_hooks``: each backend keeps
its log its way). Webhooks stored by versions that kept one inbox row per alert are moved to the
log once, at open.
"""
from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from alertd.core.model import iso, parse_iso
from alertd.receive.payload import encode_webhook
from alertd.store.database import Part
from alertd.store.base import Hook, Taken
from alertd.store.quarantine import forget_attempts

log = logging.getLogger(__name__)
KEY_CHUNK = 500  # keys per statement (a few parameters each; SQLite allows 32766)


class Inbox(Part):
    """The webhooks appended, read back in order by the engine; the redelivery keys it took."""

    # ----- receive -----

    async def append_hook(self, body: bytes, received_at: datetime, alerts: int) -> int:
        return await self.db.log.append(received_at, alerts, body)

    # ----- engine -----

    async def pending_hooks(self, limit: int) -> list[Hook]:
        def do() -> list[Hook]:
            after = self.db.taken_upto()
            heads = self.db.log_query("SELECT id, alerts FROM inbox_log WHERE id > ? ORDER BY id LIMIT ?", (after, limit))
            if not heads:
                self.db.log_idle()
                return []
            total, last = 0, heads[0][0]
            for hook_id, alerts in heads:
                if total and total + alerts > limit:
                    break
                total, last = total + alerts, hook_id
            rows = self.db.log_query("SELECT id, received_at, alerts, body FROM inbox_log WHERE id > ? AND id <= ? "
                                   "ORDER BY id", (after, last))
            return [Hook(hook_id, at, alerts, bytes(body)) for hook_id, at, alerts, body in rows]
        hooks: list[Hook] = await self.db.run(do)
        return hooks

    async def count_pending_inbox(self) -> int:
        pending: int = await self.db.run(self.pending_alerts)
        return pending

    def pending_alerts(self) -> int:
        """Alerts in webhooks not taken yet (store thread)."""
        rows = self.db.log_query("SELECT coalesce(sum(alerts), 0) FROM inbox_log WHERE id > ?", (self.db.taken_upto(),))
        return int(rows[0][0])

    async def count_backlog_hooks(self) -> int:
        backlog: int = await self.db.run(self.db.backlog_hooks)
        return backlog

    async def known_keys(self, keys: list[str]) -> set[str]:
        def do() -> set[str]:
            found: set[str] = set()
            unique = sorted(set(keys))
            for start in range(0, len(unique), KEY_CHUNK):
                chunk = unique[start:start + KEY_CHUNK]
                found.update(r[0] for r in self.db.query(
                    "SELECT dedup FROM inbox WHERE dedup IN (" + ", ".join(["?"] * len(chunk)) + ")", chunk))
            return found
        known: set[str] = await self.db.run(do)
        return known

    def write_taken(self, cur: Any, taken: Taken) -> None:
        """In the step's transaction: the new keys, and the webhooks taken."""
        rows = [v for k in taken.keys for v in (k.dedup, iso(k.received_at), k.note, k.processed)]
        for start in range(0, len(taken.keys), KEY_CHUNK):
            count = min(KEY_CHUNK, len(taken.keys) - start)
            cur.execute(self.db.q("INSERT INTO inbox (dedup, received_at, alert, processed) VALUES " +
                                ", ".join(["(?, ?, ?, ?)"] * count) + " ON CONFLICT (dedup) DO NOTHING"),
                        rows[start * 4:(start + count) * 4])
        if taken.hooks:
            self.db.take_hooks(cur, taken.hooks)
            forget_attempts(self.db, cur, taken.hooks)
        for k in taken.keys:
            if k.processed == 2:
                log.error("inbox: alert %s set aside (inbox.processed = 2): %s", k.dedup, k.note[:500])

    # ----- upgrade -----

    def adopt_legacy(self) -> None:
        """Alerts stored by versions that kept one inbox row per alert, and not yet taken, go to the log as
        webhooks; then their rows go. Appended first: a crash in between appends them again at the next
        start, and the engine drops the second copy by its keys."""
        rows = self.db.query("SELECT i.seq, i.hook, b.alert, h.received_at, h.body FROM inbox i "
                           "LEFT JOIN inbox_bodies b ON b.seq = i.seq LEFT JOIN inbox_hooks h ON h.id = i.hook "
                           "WHERE i.processed = 0 ORDER BY i.seq")
        if not rows:
            return
        hooks: set[int] = set()
        appended: list[tuple[datetime, bytes]] = []  # in the order they were received (a resolution after its firing)
        for _, hook, alert, received_at, body in rows:
            if hook is not None and body is not None:
                if hook not in hooks:
                    hooks.add(hook)
                    appended.append((parse_iso(received_at) or datetime.now(timezone.utc), body.encode()))
            elif alert is not None:
                a = json.loads(alert)
                appended.append((parse_iso(a.get("receivedAt")) or datetime.now(timezone.utc),
                                 encode_webhook([a], a.get("receiver", ""), a.get("externalURL", ""))))
        for at, body in appended:
            self.db.log.append_now(at, len(json.loads(body).get("alerts") or []), body)
        seqs = [(r[0],) for r in rows]

        def forget(cur: Any) -> None:
            cur.executemany(self.db.q("DELETE FROM inbox_bodies WHERE seq = ?"), seqs)
            cur.executemany(self.db.q("DELETE FROM inbox WHERE seq = ?"), seqs)
            cur.executemany(self.db.q("DELETE FROM inbox_hooks WHERE id = ?"), [(h,) for h in hooks])
        self.db.tx(forget)
        log.warning("inbox: %d alerts stored by an earlier version moved to the inbox log (%d webhooks)",
                    len(rows), len(appended))

