"""The inbox log's contract, on SQLite AND a real PostgreSQL: webhooks appended as received (group-committed),
taken by the engine in order and never handed out again, and the redelivery keys its steps record.

The all-or-nothing commit of what a step takes, the retention of keys and a store that cannot write are in
test_store_contract.py, with the rest of the engine step; a database written by the previous inbox in
test_store_upgrade.py.
"""
from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import shutil
import sqlite3
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from alertd.core.model import iso
from alertd.receive.payload import read_notification
from alertd.store.base import InboxKey, Step, Taken
from alertd.store.sqlite import SqliteStore
from testkit.stores import (backend, gpu_hook, keys_of, log_ids, make_store, pending, query, store,  # noqa: F401
                                  taking)
from testkit.webhooks import node_webhook

T0 = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def test_pending_hooks_are_oldest_first_about_limit_alerts_and_bytes_as_received(store):
    assert await store.pending_hooks(10) == [] and await store.count_pending_inbox() == 0
    doc = node_webhook("prod-a", "gpu-node-ü", starts_at=T0, gpus=3)
    doc["alerts"][0]["annotations"]["summary"] = 'Xid 79 "fallen off the bus" ü 🚀 \\ end'
    bodies = [json.dumps(doc, indent=2, ensure_ascii=False).encode(),  # raw UTF-8, indented
              json.dumps(doc).encode(),  # the same webhook again (\u escapes): no dedup at receive, its own bytes
              gpu_hook("gpu-node-2", 8, starts=T0), gpu_hook("gpu-node-3", 1, starts=T0)]
    alerts = [3, 3, 8, 1]
    eastern = timezone(timedelta(hours=-5))
    received = [at(0), at(1), at(2).astimezone(eastern), at(3)]
    ids = [await store.append_hook(b, r, n) for b, r, n in zip(bodies, received, alerts)]
    assert ids == sorted(set(ids))

    hooks = await store.pending_hooks(100)
    assert [(h.id, h.received_at, h.alerts, h.body) for h in hooks] == [
        (ids[0], "2026-11-30T12:00:00.123456Z", 3, bodies[0]), (ids[1], "2026-11-30T12:00:01.123456Z", 3, bodies[1]),
        (ids[2], "2026-11-30T12:00:02.123456Z", 8, bodies[2]), (ids[3], "2026-11-30T12:00:03.123456Z", 1, bodies[3])]
    assert {type(h.body) for h in hooks} == {bytes}
    assert read_notification(hooks[0].body, T0).alerts[0].annotations["summary"] == doc["alerts"][0]["annotations"]["summary"]
    # About ``limit`` alerts' worth, whole webhooks, at least one.
    assert [h.id for h in await store.pending_hooks(6)] == ids[:2]
    assert [h.id for h in await store.pending_hooks(5)] == ids[:1]
    assert [h.id for h in await store.pending_hooks(1)] == ids[:1]
    assert [h.id for h in await store.pending_hooks(14)] == ids[:3]
    assert [h.id for h in await store.pending_hooks(15)] == ids
    assert await store.count_pending_inbox() == 15
    assert (await store.stats())["inbox_pending"] == 15

    await store.commit_step(Step(inbox=taking(hooks[:2])))
    assert [h.id for h in await store.pending_hooks(5)] == [ids[2]]  # 8 alerts: more than asked, still handed out
    assert await store.count_pending_inbox() == 9
    assert (await store.stats())["inbox_pending"] == 9


async def test_concurrent_appends_share_a_commit_and_each_gets_its_own_id_in_order(store):
    log = store.db.log  # type: ignore[attr-defined]
    real, rounds = log._insert, []
    gate, entered = threading.Event(), threading.Event()

    def counted(rows: list) -> list[int]:  # runs on the log's thread: one call is one transaction
        rounds.append(len(rows))
        entered.set()
        gate.wait(10)
        return real(rows)
    log._insert = counted
    bodies = [gpu_hook(f"gpu-node-{i}", 1 + i % 8, starts=at(i)) for i in range(32)]

    first = asyncio.gather(*(store.append_hook(b, T0, 1 + i % 8) for i, b in enumerate(bodies[:5])))
    for _ in range(500):  # the first round is being written ...
        if entered.is_set():
            break
        await asyncio.sleep(0.01)
    second = asyncio.gather(*(store.append_hook(b, T0, 1 + (i + 5) % 8) for i, b in enumerate(bodies[5:12])))
    await asyncio.sleep(0.05)  # ... while seven more arrive: they wait for the next round, together
    gate.set()
    ids = await first + await second
    ids += await asyncio.gather(*(store.append_hook(b, T0, 1 + (i + 12) % 8) for i, b in enumerate(bodies[12:])))
    assert rounds == [5, 7, 20]
    assert ids == sorted(set(ids))  # each its own id, in the order the requests came
    assert await pending(store) == list(zip(ids, bodies))
    assert await store.count_pending_inbox() == sum(1 + i % 8 for i in range(32))
    if backend(store) == "postgres":  # one transaction per round, as the database saw it
        xmins = await query(store, "SELECT count(*) FROM inbox_log GROUP BY xmin::text ORDER BY 1")
        assert xmins == [(5,), (7,), (20,)]


async def test_appends_from_several_processes_interleave_without_loss(make_store):
    """Receiver processes (SQLite: each with its own connection and flock on the log) or replicas (PostgreSQL)."""
    stores = [make_store() for _ in range(3)]
    for s in stores:
        await s.open()
    try:
        bodies = [[gpu_hook(f"gpu-node-{p}-{i}", 1, starts=at(i)) for i in range(30)] for p in range(3)]
        results = await asyncio.gather(*(s.append_hook(b, at(i), 1) for i in range(30) for s, b in zip(
            stores, (bodies[0][i], bodies[1][i], bodies[2][i]))))
        assert len(set(results)) == 90
        sent = dict(zip(results, [(bodies[p][i]) for i in range(30) for p in range(3)]))
        for s in stores:  # every process sees every webhook, under the id its appender was given
            assert dict(await pending(s)) == sent
        await stores[1].commit_step(Step(inbox=taking(await stores[1].pending_hooks(1000))))
        assert await stores[1].pending_hooks(1000) == []
        assert await stores[1].known_keys(keys_of(bodies[2][29], T0)) == set(keys_of(bodies[2][29], T0))
    finally:
        for s in stores:
            await s.close()


async def test_taken_webhooks_are_never_handed_out_again_even_after_reopening(make_store):
    bodies = [gpu_hook(f"gpu-node-{i}", 2, starts=at(i)) for i in range(4)]
    s = make_store()
    await s.open()
    ids = [await s.append_hook(b, at(i), 2) for i, b in enumerate(bodies)]
    hooks = await s.pending_hooks(4)
    assert [h.id for h in hooks] == ids[:2]
    await s.commit_step(Step(inbox=taking(hooks)))
    assert await pending(s) == list(zip(ids[2:], bodies[2:]))
    assert await log_ids(s) == ids[2:]  # taken webhooks leave the log (SQLite: after the step, PostgreSQL: in it)
    if backend(s) == "sqlite":
        assert await query(s, "SELECT value FROM meta WHERE key = 'inbox_taken'") == [(str(ids[1]),)]
    await s.close()
    for _ in range(2):
        s = make_store()
        await s.open()
        assert await pending(s) == list(zip(ids[2:], bodies[2:]))
        assert await s.count_pending_inbox() == 4
        await s.close()

    s = make_store()
    await s.open()
    again = await s.append_hook(bodies[0], at(9), 2)  # Alertmanager sends the first one again: a new webhook
    hooks = await s.pending_hooks(100)
    assert [h.id for h in hooks] == [*ids[2:], again]
    assert await s.known_keys(keys_of(bodies[0], T0)) == set(keys_of(bodies[0], T0))  # the engine drops its alerts
    await s.commit_step(Step(inbox=Taken([h.id for h in hooks], taking(hooks[:2]).keys)))
    assert await pending(s) == [] and await s.count_pending_inbox() == 0
    assert await log_ids(s) == []
    await s.close()
    s = make_store()
    await s.open()
    try:
        assert await pending(s) == []
        assert await s.known_keys([k for b in bodies for k in keys_of(b, T0)]) == {
            k for b in bodies for k in keys_of(b, T0)}
        late = await s.append_hook(bodies[1], at(10), 2)  # into an empty log: ids go on, past the engine's mark
        assert late > again
        assert await pending(s) == [(late, bodies[1])]
    finally:
        await s.close()


async def test_a_step_that_takes_webhooks_before_any_read_of_the_log_keeps_them_taken(make_store):
    body = gpu_hook("gpu-node-1", 2, starts=T0)
    s = make_store()
    await s.open()
    hook = await s.append_hook(body, T0, 2)  # the id the receive side was given is all the step names
    await s.commit_step(Step(inbox=Taken([hook], [InboxKey(k, T0) for k in keys_of(body, T0)])))
    await s.close()
    s = make_store()
    await s.open()
    try:
        assert await pending(s) == []
    finally:
        await s.close()


async def test_a_deleted_or_replaced_sqlite_log_is_taken_from_its_start(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "alertd.store.sqlite")
    path = tmp_path / "alertd.sqlite3"
    s = SqliteStore(path)
    await s.open()
    for i in range(3):
        await s.append_hook(gpu_hook(f"gpu-node-{i}", 1, starts=at(i)), at(i), 1)
    await s.commit_step(Step(inbox=taking(await s.pending_hooks(10))))
    await s.close()

    def remove_log() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}-inbox{suffix}").unlink(missing_ok=True)
    remove_log()  # an operator deleted it (or restored the database without it)
    s = SqliteStore(path)
    await s.open()
    body = gpu_hook("gpu-node-7", 2, starts=at(7))
    assert await s.append_hook(body, at(7), 2) == 1  # a new log numbers from 1 again ...
    assert await pending(s) == [(1, body)]  # ... and is not hidden behind the old log's mark (3)
    assert "is not the one the engine took from" in caplog.text
    await s.commit_step(Step(inbox=taking(await s.pending_hooks(10))))
    await s.close()
    s = SqliteStore(path)
    await s.open()
    assert await pending(s) == []  # the new log is the one the mark names now
    await s.close()

    other = SqliteStore(tmp_path / "other.sqlite3")  # another installation's log, two webhooks not taken
    await other.open()
    others = [gpu_hook(f"gpu-node-{i}", 1, starts=at(20 + i)) for i in range(2)]
    for i, b in enumerate(others):
        await other.append_hook(b, at(20 + i), 1)
    await other.close()
    remove_log()
    shutil.copy(tmp_path / "other.sqlite3-inbox", f"{path}-inbox")
    s = SqliteStore(path)
    await s.open()
    try:
        assert await pending(s) == [(1, others[0]), (2, others[1])]  # id 1 is past the mark, but another log's
    finally:
        await s.close()


async def test_a_failed_release_of_taken_webhooks_leaves_the_log_writers_lock_free(tmp_path):
    s = SqliteStore(tmp_path / "alertd.sqlite3")
    await s.open()
    blocker = sqlite3.connect(f"{s.db.log_path}", isolation_level=None)
    lock = os.open(f"{s.db.log_path}-writer", os.O_RDWR)
    try:
        for i in range(2):
            await s.append_hook(gpu_hook(f"gpu-node-{i}", 1, starts=at(i)), at(i), 1)
        hooks = await s.pending_hooks(1)
        await s.db.run(lambda: s.db._log_reader.execute("PRAGMA busy_timeout=0"))  # type: ignore[union-attr]
        blocker.execute("BEGIN IMMEDIATE")  # a writer that does not take the flock holds the log
        await s.commit_step(Step(inbox=taking(hooks)))  # committed; deleting the taken row from the log fails
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the other processes' appenders are not locked out
        fcntl.flock(lock, fcntl.LOCK_UN)
        blocker.execute("ROLLBACK")
        assert await log_ids(s) == [h.id for h in hooks] + [hooks[0].id + 1]  # still there ...
        assert [h.id for h in await s.pending_hooks(10)] == [hooks[0].id + 1]  # ... but taken
        await s.commit_step(Step(inbox=taking(await s.pending_hooks(10))))
        assert await log_ids(s) == []  # the next step deletes both
    finally:
        blocker.close()
        os.close(lock)
        await s.close()


async def test_known_keys_are_what_steps_recorded_and_the_first_record_stays(store):
    keys = keys_of(gpu_hook("gpu-node-1", 1200, starts=T0), T0)  # more than one statement's worth
    assert len(set(keys)) == 1200
    await store.commit_step(Step(inbox=Taken(keys=[InboxKey(k, T0) for k in keys[:1100]])))
    assert await store.known_keys(keys + keys[:50]) == set(keys[:1100])  # asked twice: found once
    assert await store.known_keys([]) == set()
    assert await store.known_keys(keys[1100:]) == set()
    # Recording a known key again (an HA peer's copy), or one twice in a step, is no error: the first record stays.
    await store.commit_step(Step(inbox=Taken(keys=[InboxKey(keys[0], at(60), 2, "second copy"),
                                                   InboxKey(keys[1150], at(60)), InboxKey(keys[1150], at(61))])))
    assert await store.known_keys(keys) == set(keys[:1100]) | {keys[1150]}
    assert await query(store, "SELECT received_at, processed, alert FROM inbox WHERE dedup = ?", (keys[0],)) == [
        (iso(T0), 1, "")]
    assert await query(store, "SELECT received_at FROM inbox WHERE dedup = ?", (keys[1150],)) == [(iso(at(60)),)]


def wal_checkpoint_sequence(wal: Path) -> int | None:
    """The WAL header's checkpoint sequence number (bytes 12-15, big-endian): SQLite adds one each time the WAL
    is restarted or truncated. None while there is no header."""
    try:
        with open(wal, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        return None
    return int.from_bytes(head[12:16], "big") if len(head) == 16 else None


@pytest.mark.parametrize("appender", ["receiver process", "same process"])
async def test_the_sqlite_log_wal_stays_small_under_steady_appends_and_is_truncated_once_quiet(
        tmp_path, monkeypatch, appender):
    """Webhooks appended without pause while the engine takes and releases, from a receiver process (its own
    store object: its own writers' lock) or from the engine's own process (its receive thread): the log's WAL
    is restarted from its start every few MB on average instead of growing to the truncation limit (a truncation holds
    every appending writer waiting); once drained and quiet, the WAL is truncated and the free pages go back."""
    import alertd.store.sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "LOG_QUIET", 0.3)
    path = tmp_path / "alertd.sqlite3"
    engine = SqliteStore(path)
    await engine.open()
    body = gpu_hook("gpu-node-1", 8, starts=T0) + b" " * 12_000  # ~16 KB: 100 MB in ~6,000 webhooks
    total, wal = 100 * 1024 * 1024, Path(f"{engine.db.log_path}-wal")
    done = threading.Event()
    appended = 0

    async def append_all(store: SqliteStore) -> None:
        nonlocal appended
        try:
            while appended * len(body) < total:
                await asyncio.gather(*[store.append_hook(body, T0, 8) for _ in range(8)])
                appended += 8
        finally:
            done.set()

    async def in_receiver_process() -> None:
        receiver = SqliteStore(path)
        await receiver.open()
        try:
            await append_all(receiver)
        finally:
            await receiver.close()

    if appender == "same process":
        task = asyncio.get_running_loop().create_task(append_all(engine))
    else:
        thread = threading.Thread(target=lambda: asyncio.run(in_receiver_process()), daemon=True)
        thread.start()
    biggest = 0
    restarts: set[int | None] = set()  # the WAL header's checkpoint sequence numbers seen
    try:
        while not done.is_set() or await engine.pending_hooks(1):
            hooks = await engine.pending_hooks(2000)
            if hooks:
                await engine.commit_step(Step(inbox=taking(hooks)))
            biggest = max(biggest, wal.stat().st_size if wal.exists() else 0)
            restarts.add(wal_checkpoint_sequence(wal))
            await asyncio.sleep(0.005)
        if appender == "same process":
            await task
        else:
            thread.join(10)
        assert appended * len(body) >= total
        # Restarted every few MB on average (about 5 on an idle machine), never grown to where it is truncated
        # holding the writers. A slow engine round lets it grow further between two restarts: 13-14 MB here,
        # 30 MB once in a loaded full-suite run.
        assert len(restarts - {None}) >= total // (sqlite_store.LOG_WAL_LIMIT // 4), \
            f"the log's WAL was restarted {len(restarts - {None}) - 1} times for {total / 2**20:.0f} MB appended"
        assert biggest < sqlite_store.LOG_WAL_LIMIT, f"the log's WAL grew to {biggest / 2**20:.1f} MB"
        assert await log_ids(engine) == []
        assert wal.stat().st_size > 0  # not truncated while the engine was busy (below) ...
        await asyncio.sleep(0.4)
        assert await engine.pending_hooks(10) == []  # ... only once drained and quiet
        assert wal.stat().st_size == 0
        assert Path(engine.db.log_path).stat().st_size < 1024 * 1024  # the storm's pages went back
    finally:
        done.wait(30)
        await engine.close()


async def test_backlog_counts_webhooks_not_taken_as_the_engine_marks_them(make_store):
    """What receiver.max_backlog compares: 0 empty, one per append, less what a step took; a second store
    object on the same database (a receiver process, or another replica) sees the engine's new mark."""
    engine, receiver = make_store(), make_store()
    await engine.open()
    await receiver.open()
    try:
        assert await engine.count_backlog_hooks() == 0 and await receiver.count_backlog_hooks() == 0
        for i in range(5):
            await receiver.append_hook(gpu_hook(f"gpu-node-{i}", 3, starts=at(i)), at(i), 3)
        assert await engine.count_backlog_hooks() == 5 and await receiver.count_backlog_hooks() == 5
        await engine.commit_step(Step(inbox=taking(await engine.pending_hooks(6))))  # two webhooks of 3 alerts
        assert await engine.count_backlog_hooks() == 3
        assert await receiver.count_backlog_hooks() == 3  # read again, not the mark the receiver read at its open
        await engine.commit_step(Step(inbox=taking(await engine.pending_hooks(100))))
        assert await engine.count_backlog_hooks() == 0 and await receiver.count_backlog_hooks() == 0
        await receiver.append_hook(gpu_hook("gpu-node-9", 1, starts=at(9)), at(9), 1)  # ids go on past the mark
        assert await receiver.count_backlog_hooks() == 1
    finally:
        await receiver.close()
        await engine.close()


async def test_backlog_of_a_sqlite_log_the_mark_is_not_tied_to_counts_the_whole_log(tmp_path):
    path = tmp_path / "alertd.sqlite3"
    s = SqliteStore(path)
    await s.open()
    try:
        for i in range(4):
            await s.append_hook(gpu_hook(f"gpu-node-{i}", 1, starts=at(i)), at(i), 1)
        await s.commit_step(Step(inbox=taking(await s.pending_hooks(3))))
        for i in range(2):
            await s.append_hook(gpu_hook(f"gpu-node-{5 + i}", 1, starts=at(5 + i)), at(5 + i), 1)
        assert await s.count_backlog_hooks() == 3 and await log_ids(s) == [4, 5, 6]
        # The mark names another log (this one was deleted or replaced meanwhile): mark 5 says nothing of it.
        await s.db.run(s.db.tx, lambda cur: cur.executemany("UPDATE meta SET value = ? WHERE key = ?",
                                                        [("another", "inbox_log"), ("5", "inbox_taken")]))
        assert await s.count_backlog_hooks() == 3
    finally:
        await s.close()
