"""The inbox on any DB-API store: group-committed appends, the engine's reads, and consuming rows.

Mixed into SqlStore; runs on its store thread. Appends from concurrent requests
are coalesced into one transaction per round (a group commit): durability costs
one fsync per batch, not per webhook. A webhook's body is stored once, as
received; its alerts' rows point at it and only carry the redelivery key.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable

from alertd.model import iso
from alertd.store import sql
from alertd.store.base import AppendResult, InboxEntry, Pending, PendingRow, StoreUnavailable

log = logging.getLogger(__name__)
PENDING_COUNT = "SELECT count(*) FROM inbox WHERE processed = 0"
INSERT_CHUNK = 500  # rows per INSERT statement (a few parameters each; SQLite allows 32766)
Queued = tuple[list[InboxEntry], bytes | None, "asyncio.Future[AppendResult]"]


class InboxMixin:
    """Needs SqlStore's ``_run``, ``_tx``, ``_ftx``, ``_q`` and ``_query``."""

    _queue: list[Queued]
    _flushing: bool
    _run: Callable[..., Any]
    _tx: Callable[..., Any]
    _ftx: Callable[..., Any]
    _q: Callable[[str], str]
    _query: Callable[..., list[tuple[Any, ...]]]

    async def append_inbox(self, entries: list[InboxEntry], body: bytes | None = None) -> AppendResult:
        fut: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        self._queue.append((entries, body, fut))
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().create_task(self._flush_inbox())
        return await fut

    async def _flush_inbox(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                await self._store_batch(batch)
        finally:
            self._flushing = False

    async def _store_batch(self, batch: list[Queued]) -> None:
        try:
            results = await self._run(self._tx, lambda cur: [self._insert(cur, e, b) for e, b, _ in batch])
        except StoreUnavailable as exc:  # the store itself refuses: every waiter gets 503
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        except Exception as exc:
            if len(batch) > 1:  # one request's bad entry must not cost the others their data
                for one in batch:
                    await self._store_batch([one])
                return
            _, _, fut = batch[0]
            if not fut.done():
                fut.set_exception(StoreUnavailable(f"{type(exc).__name__}: {exc}"))
            return
        for (_, _, fut), result in zip(batch, results):
            if not fut.done():
                fut.set_result(result)

    def _insert(self, cur: Any, entries: list[InboxEntry], body: bytes | None = None) -> AppendResult:
        """One multi-row INSERT per request; RETURNING names the rows that were new (not redeliveries).

        A webhook's body goes to inbox_hooks once, for all its new rows (without one, each new row's wire form
        goes to inbox_bodies); both are deleted once the engine has taken the rows."""
        hook = None
        if body is not None and entries:
            cur.execute(self._q("INSERT INTO inbox_hooks (received_at, pending, body) VALUES (?, ?, ?) RETURNING id"),
                        (iso(entries[0].received_at), len(entries), body.decode()))
            hook = cur.fetchone()[0]
        fresh: dict[str, int] = {}
        for start in range(0, len(entries), INSERT_CHUNK):
            chunk = entries[start:start + INSERT_CHUNK]
            values = ", ".join(["(?, ?, '', ?, ?)"] * len(chunk))
            cur.execute(self._q(f"INSERT INTO inbox (dedup, received_at, alert, hook, pos) VALUES {values} "
                                "ON CONFLICT (dedup) DO NOTHING RETURNING dedup, seq"),
                        [v for e in chunk for v in (e.dedup, iso(e.received_at), hook, e.pos)])
            fresh.update(cur.fetchall())
        if hook is None:
            bodies = [(fresh[e.dedup], sql.dumps(e.alert)) for e in {e.dedup: e for e in reversed(entries)}.values()
                      if e.dedup in fresh]  # a key twice in one request: the first is the new one
            for start in range(0, len(bodies), INSERT_CHUNK):
                body_chunk = bodies[start:start + INSERT_CHUNK]
                cur.execute(self._q("INSERT INTO inbox_bodies (seq, alert) VALUES " + ", ".join(["(?, ?)"] * len(body_chunk))),
                            [v for row in body_chunk for v in row])
        seqs = [fresh.pop(e.dedup, None) for e in entries]  # a key twice in one request: the first is new
        stored = sum(1 for seq in seqs if seq is not None)
        if hook is not None and stored < len(entries):  # redeliveries: the body serves only the new rows
            cur.execute(self._q("DELETE FROM inbox_hooks WHERE id = ?" if not stored else
                                "UPDATE inbox_hooks SET pending = ? WHERE id = ?"), (hook,) if not stored else (stored, hook))
        return AppendResult(stored=stored, duplicates=len(entries) - stored, seqs=seqs)

    async def pending_inbox(self, limit: int) -> Pending:
        def do() -> Pending:
            rows = self._query("SELECT i.seq, b.alert, i.hook, i.pos FROM inbox i LEFT JOIN inbox_bodies b ON b.seq = i.seq "
                               "WHERE i.processed = 0 ORDER BY i.seq LIMIT ?", (limit,))
            pending = Pending([PendingRow(seq, json.loads(doc) if doc is not None else None, hook, pos)
                               for seq, doc, hook, pos in rows])
            hooks = sorted({r.hook for r in pending.rows if r.hook is not None})
            for start in range(0, len(hooks), INSERT_CHUNK):
                chunk = hooks[start:start + INSERT_CHUNK]
                found = self._query("SELECT id, received_at, body FROM inbox_hooks WHERE id IN (" +
                                    ", ".join(["?"] * len(chunk)) + ")", chunk)
                pending.hooks.update((hook_id, (received, body.encode())) for hook_id, received, body in found)
            return pending
        result: Pending = await self._run(do)
        return result

    async def count_pending_inbox(self) -> int:
        rows = await self._run(self._query, PENDING_COUNT)
        return int(rows[0][0])

    async def quarantine_inbox(self, seqs: list[int], error: str) -> None:
        await self._run(self._ftx, lambda cur: cur.executemany(
            self._q("UPDATE inbox SET processed = 2 WHERE seq = ?"), [(s,) for s in seqs]))
        log.error("quarantined inbox rows %s (processed = 2): %s", seqs, error)

    def _consume(self, cur: Any, seqs: list[int]) -> None:
        """The alert is in the incident's member now: the row stays only as the redelivery dedup key, and
        its body goes (a webhook's body with the last of its rows)."""
        done = [(s,) for s in seqs]
        cur.executemany(self._q("UPDATE inbox SET processed = 1 WHERE seq = ?"), done)
        taken: list[tuple[int, int]] = []
        for start in range(0, len(seqs), INSERT_CHUNK):
            chunk = seqs[start:start + INSERT_CHUNK]
            cur.execute(self._q("SELECT hook, count(*) FROM inbox WHERE hook IS NOT NULL AND seq IN (" +
                                ", ".join(["?"] * len(chunk)) + ") GROUP BY hook"), chunk)
            taken.extend((n, hook) for hook, n in cur.fetchall())
        if taken:
            cur.executemany(self._q("UPDATE inbox_hooks SET pending = pending - ? WHERE id = ?"), taken)
            cur.executemany(self._q("DELETE FROM inbox_hooks WHERE id = ? AND pending <= 0"), [(h,) for _, h in taken])
        if sum(n for n, _ in taken) < len(seqs):  # rows stored with their own body
            cur.executemany(self._q("DELETE FROM inbox_bodies WHERE seq = ?"), done)
