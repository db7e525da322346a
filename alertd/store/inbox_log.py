"""The receive side of the inbox: webhooks appended as received, one row each, group-committed.

The log has its own connection and thread: an acknowledgement never waits behind an
engine commit on the store's thread. Appends from concurrent requests are coalesced
into one transaction per round (a group commit), so durability costs one fsync per
batch, not per webhook. A row is a webhook's body and nothing else to index: an append
costs the body's pages, not the random index pages of a redelivery key per alert (the
engine checks those when it takes the webhook, alertd/store/inbox.py).
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from alertd.core.model import iso
from alertd.store.base import StoreUnavailable
from alertd.store.transaction import transaction

log = logging.getLogger(__name__)
INSERT_CHUNK = 200  # rows per INSERT statement


@dataclass(slots=True)
class InboxLogDatabase:
    """How the log reaches its database: the store's backend supplies these."""

    connect: Callable[[], Any]
    begin: Callable[[Any], None]  # starts a write transaction on a cursor (and takes any cross-process lock)
    end: Callable[[], None]  # after commit or rollback (releases that lock)
    unavailable: tuple[type[BaseException], ...]
    lost: Callable[[Any], bool] = lambda conn: False  # the connection is gone for good: connect again
    placeholder: str = "?"


Queued = tuple[datetime, int, bytes, "asyncio.Future[int]"]


class InboxLog:
    """Appends webhooks to ``inbox_log``; ``append`` returns the row's id once it is durable."""

    def __init__(self, database: InboxLogDatabase, name: str = "alertd-inbox-log"):
        self.database = database
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._conn: Any = None
        self._queue: list[Queued] = []
        self._flushing = False

    async def open(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._open)

    def _open(self) -> None:
        self._conn = self.database.connect()

    async def close(self) -> None:
        def do() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        await asyncio.get_running_loop().run_in_executor(self._executor, do)
        self._executor.shutdown(wait=True)

    def run(self, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(connection)`` on the log's thread (blocking; tests and the full-disk simulation)."""
        return self._executor.submit(lambda: fn(self._conn)).result()

    def append_now(self, received_at: datetime, alerts: int, body: bytes) -> int:
        """Append one webhook at once, from another thread (the store's, moving older rows at open)."""
        ids: list[int] = self._executor.submit(self._insert, [(iso(received_at), alerts, body)]).result()
        return ids[0]

    async def append(self, received_at: datetime, alerts: int, body: bytes) -> int:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append((received_at, alerts, body, fut))
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().create_task(self._flush())
        return await fut

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                await self._store(batch)
        finally:
            self._flushing = False

    async def _store(self, batch: list[Queued]) -> None:
        rows = [(iso(at), n, body) for at, n, body, _ in batch]
        try:
            ids = await asyncio.get_running_loop().run_in_executor(self._executor, self._insert, rows)
        except Exception as exc:
            error = exc if isinstance(exc, StoreUnavailable) else StoreUnavailable(f"{type(exc).__name__}: {exc}")
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(error)
            return
        for (*_, fut), row_id in zip(batch, ids):
            if not fut.done():
                fut.set_result(row_id)

    def _insert(self, rows: list[tuple[str, int, bytes]]) -> list[int]:
        """One transaction for the whole batch; ids in the order of ``rows``."""
        p = self.database.placeholder
        if self._conn is None or self.database.lost(self._conn):  # e.g. the database restarted: connect again
            try:
                self._conn = self.database.connect()
            except self.database.unavailable as exc:
                raise StoreUnavailable(f"reconnecting: {type(exc).__name__}: {exc}") from exc

        def insert(cur: Any) -> list[int]:
            ids: list[int] = []
            for start in range(0, len(rows), INSERT_CHUNK):
                chunk = rows[start:start + INSERT_CHUNK]
                values = ", ".join([f"({p}, {p}, {p})"] * len(chunk))
                cur.execute(f"INSERT INTO inbox_log (received_at, alerts, body) VALUES {values} RETURNING id",
                            [v for row in chunk for v in row])
                # RETURNING gives no order guarantee across rows: ids are given in insertion order, so sort them
                ids.extend(sorted(r[0] for r in cur.fetchall()))
            return ids
        inserted: list[int] = transaction(self._conn, insert, begin=self.database.begin, end=self.database.end,
                                          unavailable=self.database.unavailable)
        return inserted
