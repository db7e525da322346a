"""The store methods notifiers use (refs, coalescing) on both backends: SQLite and PostgreSQL."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from alertd.core.outbox_items import Show, Timeline
from alertd.store.base import OutboxItem, Step
from alertd.store.sqlite import SqliteStore
from testkit.builders import at, engine, xid


def show(n: int) -> Show:
    return Show(kinds=("opened",), note=str(n), route="", receiver="", team="")


async def exercise(store) -> None:
    eng = engine()
    changes = eng.ingest([xid(79, node="n1")], at(0))
    inc = changes[0].incident
    now = datetime.now(timezone.utc)
    items = [
        OutboxItem(inc.id, "slack:#a", "update", show(1), now),
        OutboxItem(inc.id, "slack:#a", "thread", Timeline(kinds=(), note="2", route="", receiver="", team="", events=()),
                   now),
        OutboxItem(inc.id, "slack:#a", "update", show(3), now + timedelta(seconds=2)),
        OutboxItem(inc.id, "slack:#b", "update", show(4), now),
        OutboxItem(inc.id, "slack:#a", "update", show(5), now + timedelta(seconds=3)),
    ]
    await store.commit_step(Step(changes=changes, outbox=items, next_seq=eng.state.next_seq))
    due = await store.due_outbox(now, 10)
    first = next(i for i in due if i.target == "slack:#a")
    assert first.payload == show(1)
    later = await store.pending_outbox_for(inc.id, "slack:#a", after_id=first.id, kinds=("update",))
    assert [int(i.payload.note) for i in later] == [3, 5]  # not yet due, still covered
    threads = await store.pending_outbox_for(inc.id, "slack:#a", after_id=first.id, kinds=("thread", "update"))
    assert [int(i.payload.note) for i in threads] == [2, 3, 5]

    await store.save_ref(inc.id, "slack:#a", "C1|1.000001")  # saved before the outbox commit
    assert await store.notify_ref(inc.id, "slack:#a") == "C1|1.000001"
    await store.finish_outbox_batch([(i.id, None) for i in later])
    await store.finish_outbox(first.id, ref=(inc.id, "slack:#a", "C1|1.000001"))
    left = await store.pending_outbox_for(inc.id, "slack:#a", after_id=0, kinds=("thread", "update"))
    assert [int(i.payload.note) for i in left] == [2]
    stats = await store.stats()
    assert stats["outbox_done"] == 3 and stats["outbox_pending"] == 2
    await store.finish_outbox_batch([])


async def test_sqlite(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite3")
    await store.open()
    try:
        await exercise(store)
    finally:
        await store.close()


@pytest.mark.services
async def test_postgres(postgres):
    from alertd.store.postgres import PostgresStore
    import psycopg

    with psycopg.connect(postgres.dsn, autocommit=True) as conn:  # a fresh schema for this test
        conn.execute("DROP SCHEMA IF EXISTS notify_store CASCADE")
        conn.execute("CREATE SCHEMA notify_store")
    store = PostgresStore(postgres.dsn + "?options=-csearch_path%3Dnotify_store")
    await store.open()
    try:
        await exercise(store)
    finally:
        await store.close()
