"""Store fixtures: one fresh store per test on SQLite AND on the session's real PostgreSQL.

A new SQLite file, or a new PostgreSQL schema in the session database (``search_path`` set through
the DSN). Import the fixtures into a test module: ``from testkit.stores import make_store, store``.
Also here: reads on the store's own connection, and webhooks shaped like Alertmanager's for the inbox.
"""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Callable
from urllib.parse import quote

import pytest

from alertd.core.model import parse_iso
from alertd.receive.payload import delivery_key, read_notification
from alertd.store.base import Hook, InboxKey, Step, Taken
from alertd.store.facade import SqlStore
from alertd.store.sqlite import SqliteStore
from testkit.webhooks import dumps, node_webhook


def backend(store: SqlStore) -> str:
    return "sqlite" if isinstance(store, SqliteStore) else "postgres"


async def query(store: SqlStore, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A read on the store's own thread and connection (DB-API stores only)."""
    rows: list[tuple[Any, ...]] = await store.db.run(store.db.query, statement, args)
    return rows


async def log_ids(store: SqlStore) -> list[int]:
    """The webhooks in the inbox log, taken or not (SQLite: its own file; PostgreSQL: a table)."""
    rows = await store.db.run(store.db.log_query, "SELECT id FROM inbox_log ORDER BY id")
    return [r[0] for r in rows]


async def pending(store: SqlStore, limit: int = 100_000) -> list[tuple[int, bytes]]:
    """The webhooks the engine has not taken, oldest first: (log id, body as received)."""
    return [(hook.id, hook.body) for hook in await store.pending_hooks(limit)]


def gpu_hook(node: str, alerts: int, *, starts: datetime, kind: int = 0, status: str = "firing") -> bytes:
    """What Alertmanager posts for one node's GPUs (dcgm-exporter labels), as the bytes alertd keeps."""
    return dumps(node_webhook("prod-a", node, starts_at=starts, gpus=alerts, kind=kind, status=status))


def received(hook: Hook) -> datetime:
    at = parse_iso(hook.received_at)
    assert at is not None, hook
    return at


def keys_of(body: bytes, received_at: datetime) -> list[str]:
    """The redelivery keys the engine derives from a stored webhook (the receive path's own reader)."""
    return [delivery_key(a) for a in read_notification(body, received_at).alerts]


def taking(hooks: list[Hook]) -> Taken:
    """A step's part that takes these webhooks and records all their alerts' keys."""
    return Taken([h.id for h in hooks], [InboxKey(k, received(h)) for h in hooks for k in keys_of(h.body, received(h))])


async def take_all(store: SqlStore, limit: int) -> tuple[list[str], int]:
    """Drain the log the way the engine does (Service.process_pending): each round's alerts whose key is known,
    or repeated in the round, are dropped; the rest are recorded by the step that takes the round's webhooks.
    The fresh keys in the order taken, and how many alerts were dropped."""
    fresh_all: list[str] = []
    dropped = 0
    for _ in range(100):
        hooks = await store.pending_hooks(limit)
        if not hooks:
            return fresh_all, dropped
        keys = [(k, received(h)) for h in hooks for k in keys_of(h.body, received(h))]
        known = await store.known_keys([k for k, _ in keys])
        fresh: dict[str, datetime] = {}
        for key, at in keys:
            if key not in known:
                fresh.setdefault(key, at)  # a key twice in one round: the first counts
        dropped += len(keys) - len(fresh)
        await store.commit_step(Step(inbox=Taken([h.id for h in hooks], [InboxKey(k, at) for k, at in fresh.items()])))
        fresh_all += fresh
    raise AssertionError("the inbox log did not drain in 100 steps")


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request, tmp_path) -> Callable[[], SqlStore]:
    """A factory: every call is a new store object on the SAME database (to test reopening)."""
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "alertd.sqlite3")
        return
    import psycopg

    from alertd.store.postgres import PostgresStore

    pg = request.getfixturevalue("postgres")
    schema = f"contract_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = f"{pg.dsn}?options={quote(f'-csearch_path={schema}')}&connect_timeout=10"
    yield lambda: PostgresStore(dsn)
    with psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
async def store(make_store) -> SqlStore:
    s = make_store()
    await s.open()
    yield s
    await s.close()
