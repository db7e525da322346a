"""The engine lease, fencing and forwarded actions, on SQLite and a real PostgreSQL."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from alertd.store.lease import Fenced
from alertd.store.base import Step, StoreUnavailable
from testkit.stores import gpu_hook, keys_of, make_store, pending, store, taking  # noqa: F401  (fixtures)


async def test_one_holder_at_a_time_and_takeover_after_expiry(store):
    a, row = await store.acquire_lease("a", "10.0.0.1:9095", 0.5, 0)
    assert (a.action, a.token, row) == ("create", 1, None)
    b, row = await store.acquire_lease("b", "10.0.0.2:9095", 0.5, 0)
    assert b.action == "wait" and row.holder == "a" and row.address == "10.0.0.1:9095"
    renewed, _ = await store.acquire_lease("a", "10.0.0.1:9095", 0.5, 1)
    assert (renewed.action, renewed.token) == ("renew", 1)
    await asyncio.sleep(0.6)  # a stops renewing (killed, partitioned)
    taken, _ = await store.acquire_lease("b", "10.0.0.2:9095", 0.5, 0)
    assert (taken.action, taken.token) == ("take", 2)
    back, row = await store.acquire_lease("a", "10.0.0.1:9095", 0.5, 1)  # a returns with its old token
    assert back.action == "wait" and row.holder == "b" and row.token == 2


async def test_a_deposed_leader_cannot_write(make_store):
    old, new = make_store(), make_store()
    await old.open()
    await new.open()
    try:
        (await old.acquire_lease("old", "", 0.3, 0))
        old.set_fence("old", 1)
        now = datetime.now(timezone.utc)
        first = gpu_hook("gpu-node-1", 2, starts=now)
        await old.append_hook(first, now, 2)
        await old.commit_step(Step(inbox=taking(await old.pending_hooks(10))))  # holds the lease: accepted
        await asyncio.sleep(0.4)
        decision, _ = await new.acquire_lease("new", "", 5, 0)
        assert decision.token == 2
        new.set_fence("new", 2)
        second = gpu_hook("gpu-node-2", 3, starts=now)
        hook = await old.append_hook(second, now, 3)  # a deposed instance still receives: appends are not fenced
        hooks = await old.pending_hooks(10)
        assert [h.id for h in hooks] == [hook]
        with pytest.raises(Fenced):
            await old.commit_step(Step(inbox=taking(hooks)))
        assert await pending(new) == [(hook, second)]  # the refused step took nothing, and recorded no key
        assert await new.known_keys(keys_of(second, now)) == set()
        assert await new.known_keys(keys_of(first, now)) == set(keys_of(first, now))
        with pytest.raises(Fenced):
            await old.finish_outbox_batch([(1, None)])
        await new.commit_step(Step(inbox=taking(await new.pending_hooks(10))))
        assert await pending(new) == []
        assert await new.known_keys(keys_of(second, now)) == set(keys_of(second, now))
    finally:
        await old.close()
        await new.close()


async def test_release_lets_a_follower_take_over_at_once(store):
    await store.acquire_lease("a", "", 30, 0)
    await store.release_lease("a", 1)
    taken, _ = await store.acquire_lease("b", "", 30, 0)
    assert (taken.action, taken.token) == ("take", 2)


async def test_commands_and_shared_settings(store):
    cid = await store.submit_command("acknowledge", "INC-3", {"actor": "ana"})
    assert await store.command_result(cid) == ("pending", "")
    assert await store.pending_commands() == [(cid, "acknowledge", "INC-3", {"actor": "ana"})]
    await store.finish_command(cid, '{"changed": true}')
    assert await store.command_result(cid) == ("done", '{"changed": true}')
    assert await store.pending_commands() == []
    assert await store.meta_setdefault("installation_id", "first") == "first"
    assert await store.meta_setdefault("installation_id", "second") == "first"


async def test_postgres_fails_a_call_behind_a_dead_link_and_reconnects_after_it(postgres):
    """Behind a link that keeps the socket up (a proxy, a pooler) TCP never notices a partition: the
    store's own deadline fails the call, and the next call after the heal connects again."""
    import time

    import psycopg

    from alertd.store.postgres import PostgresStore
    from testkit.ha_cluster import fresh_database
    from testkit.partition_proxy import PartitionProxy

    dsn = fresh_database(postgres.dsn)
    host, _, port = dsn.split("@", 1)[1].split("/", 1)[0].rpartition(":")
    with PartitionProxy((host, int(port))) as link:
        store = PostgresStore(link.dsn(dsn), answer_deadline=1.0)
        await store.open()
        try:
            settings = await store.db.run(store.db.query, "SELECT current_setting('statement_timeout'), "
                                                      "current_setting('idle_in_transaction_session_timeout')")
            assert settings == [("25s", "5s")]
            assert (await store.acquire_lease("a", "", 5, 0))[0].action == "create"
            link.blackhole()
            cut_at = time.monotonic()
            with pytest.raises((psycopg.OperationalError, StoreUnavailable)):
                await asyncio.wait_for(store.lease(), 10)
            took = time.monotonic() - cut_at
            assert 1.0 <= took < 3.5, took  # the deadline plus one watchdog period
            link.heal()
            assert (await asyncio.wait_for(store.lease(), 10)).holder == "a"
        finally:
            await store.close()


async def test_postgres_follower_rounds_do_not_wait_for_a_locked_lease_row(postgres):
    """A cut-off leader's transaction may hold the lease row until the server ends it: followers go on
    (their store serves webhooks meanwhile) and take over once it is gone."""
    import time

    import psycopg

    from alertd.store.postgres import PostgresStore
    from testkit.ha_cluster import fresh_database

    dsn = fresh_database(postgres.dsn)
    store = PostgresStore(dsn)
    await store.open()
    try:
        assert (await store.acquire_lease("a", "", 0.5, 0))[0].action == "create"
        with psycopg.connect(dsn, connect_timeout=10) as zombie:
            zombie.execute("SELECT * FROM leases FOR UPDATE")  # held, like a write of a cut-off leader
            await asyncio.sleep(0.6)  # the lease expires
            started = time.monotonic()
            decision, _ = await asyncio.wait_for(store.acquire_lease("b", "", 5, 0), 5)
            assert decision.action == "wait" and time.monotonic() - started < 1.5
        taken, _ = await store.acquire_lease("b", "", 5, 0)
        assert (taken.action, taken.token) == ("take", 2)
    finally:
        await store.close()
