"""The engine's side of the inbox: webhooks taken from the log in order, their alerts' redelivery keys kept.

Mixed into SqlStore; runs on its store thread. The receive side (alertd/store/inbox_log.py)
only appends; here the engine reads the log past what it took, asks which keys it has seen
(``known_keys``: a retry, an HA peer's copy), and its step's transaction records the new
keys in ``inbox`` and what it took (``_take_hooks``, a backend hook). Webhooks stored by
versions that kept one inbox row per alert are moved to the log once, at open.
"""
from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any, Callable

from alertd.core.model import iso, parse_iso
from alertd.receive.payload import encode_webhook
from alertd.store.base import Hook, Taken
from alertd.store.inbox_log import InboxLog

log = logging.getLogger(__name__)
KEY_CHUNK = 500  # keys per statement (a few parameters each; SQLite allows 32766)


class InboxMixin:
    """Needs SqlStore's ``_run``, ``_tx``, ``_q`` and ``_query``; the backend gives ``_log`` and the hooks below."""

    _log: InboxLog
    _run: Callable[..., Any]
    _tx: Callable[..., Any]
    _q: Callable[[str], str]
    _query: Callable[..., list[tuple[Any, ...]]]
    _forget_attempts: Callable[[Any, list[int]], None]  # alertd/store/quarantine.py

    # ----- backend hooks -----

    def _log_query(self, statement: str, args: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        """A read of the log on the store thread (SQLite: the log's own database file)."""
        return self._query(statement, args)

    def _taken_upto(self) -> int:
        """Log ids up to this one are taken (SQLite); 0 where taken rows are deleted in the step (PostgreSQL)."""
        return 0

    def _take_hooks(self, cur: Any, ids: list[int]) -> None:
        """In the step's transaction: these webhooks are taken."""
        raise NotImplementedError

    def _log_idle(self) -> None:
        """The engine found nothing to take: a moment for the log's housekeeping (backend hook)."""

    # ----- receive -----

    async def append_hook(self, body: bytes, received_at: datetime, alerts: int) -> int:
        return await self._log.append(received_at, alerts, body)

    # ----- engine -----

    async def pending_hooks(self, limit: int) -> list[Hook]:
        def do() -> list[Hook]:
            after = self._taken_upto()
            heads = self._log_query("SELECT id, alerts FROM inbox_log WHERE id > ? ORDER BY id LIMIT ?", (after, limit))
            if not heads:
                self._log_idle()
                return []
            total, last = 0, heads[0][0]
            for hook_id, alerts in heads:
                if total and total + alerts > limit:
                    break
                total, last = total + alerts, hook_id
            rows = self._log_query("SELECT id, received_at, alerts, body FROM inbox_log WHERE id > ? AND id <= ? "
                                   "ORDER BY id", (after, last))
            return [Hook(hook_id, at, alerts, bytes(body)) for hook_id, at, alerts, body in rows]
        hooks: list[Hook] = await self._run(do)
        return hooks

    async def count_pending_inbox(self) -> int:
        pending: int = await self._run(self._pending_alerts)
        return pending

    def _pending_alerts(self) -> int:
        """Alerts in webhooks not taken yet (store thread)."""
        rows = self._log_query("SELECT coalesce(sum(alerts), 0) FROM inbox_log WHERE id > ?", (self._taken_upto(),))
        return int(rows[0][0])

    async def count_backlog_hooks(self) -> int:
        backlog: int = await self._run(self._backlog_hooks)
        return backlog

    def _backlog_hooks(self) -> int:
        """Webhooks appended and not taken (store thread; backend hook). Where a step deletes what it takes
        (PostgreSQL) that is the span of ids left in the log: two index lookups whatever its size, where a
        count(*) would read every row. An upper bound: ids skipped by rolled-back appends, and rows taken past
        one another replica had not committed yet, count too."""
        rows = self._log_query("SELECT coalesce(max(id) - min(id) + 1, 0) FROM inbox_log")
        return int(rows[0][0])

    async def known_keys(self, keys: list[str]) -> set[str]:
        def do() -> set[str]:
            found: set[str] = set()
            unique = sorted(set(keys))
            for start in range(0, len(unique), KEY_CHUNK):
                chunk = unique[start:start + KEY_CHUNK]
                found.update(r[0] for r in self._query(
                    "SELECT dedup FROM inbox WHERE dedup IN (" + ", ".join(["?"] * len(chunk)) + ")", chunk))
            return found
        known: set[str] = await self._run(do)
        return known

    def _write_taken(self, cur: Any, taken: Taken) -> None:
        """In the step's transaction: the new keys, and the webhooks taken."""
        rows = [v for k in taken.keys for v in (k.dedup, iso(k.received_at), k.note, k.processed)]
        for start in range(0, len(taken.keys), KEY_CHUNK):
            count = min(KEY_CHUNK, len(taken.keys) - start)
            cur.execute(self._q("INSERT INTO inbox (dedup, received_at, alert, processed) VALUES " +
                                ", ".join(["(?, ?, ?, ?)"] * count) + " ON CONFLICT (dedup) DO NOTHING"),
                        rows[start * 4:(start + count) * 4])
        if taken.hooks:
            self._take_hooks(cur, taken.hooks)
            self._forget_attempts(cur, taken.hooks)
        for k in taken.keys:
            if k.processed == 2:
                log.error("inbox: alert %s set aside (inbox.processed = 2): %s", k.dedup, k.note[:500])

    # ----- upgrade -----

    def _adopt_legacy_inbox(self) -> None:
        """Alerts stored by versions that kept one inbox row per alert, and not yet taken, go to the log as
        webhooks; then their rows go. Appended first: a crash in between appends them again at the next
        start, and the engine drops the second copy by its keys."""
        rows = self._query("SELECT i.seq, i.hook, b.alert, h.received_at, h.body FROM inbox i "
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
            self._log.append_now(at, len(json.loads(body).get("alerts") or []), body)
        seqs = [(r[0],) for r in rows]

        def forget(cur: Any) -> None:
            cur.executemany(self._q("DELETE FROM inbox_bodies WHERE seq = ?"), seqs)
            cur.executemany(self._q("DELETE FROM inbox WHERE seq = ?"), seqs)
            cur.executemany(self._q("DELETE FROM inbox_hooks WHERE id = ?"), [(h,) for h in hooks])
        self._tx(forget)
        log.warning("inbox: %d alerts stored by an earlier version moved to the inbox log (%d webhooks)",
                    len(rows), len(appended))

