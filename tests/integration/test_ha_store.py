"""The engine lease, fencing and forwarded actions, on SQLite and a real PostgreSQL."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from alertd.ha.lease import Fenced
from alertd.store.base import InboxEntry, Step
from tests.support.stores import make_store, pending, store  # noqa: F401  (fixtures)


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
        seqs = (await old.append_inbox([InboxEntry("k1", datetime.now(timezone.utc), {"x": 1})])).seqs
        await old.commit_step(Step(processed=[s for s in seqs if s]))  # holds the lease: accepted
        await asyncio.sleep(0.4)
        decision, _ = await new.acquire_lease("new", "", 5, 0)
        assert decision.token == 2
        new.set_fence("new", 2)
        seqs = (await new.append_inbox([InboxEntry("k2", datetime.now(timezone.utc), {"x": 2})])).seqs
        with pytest.raises(Fenced):
            await old.commit_step(Step(processed=[s for s in seqs if s]))
        assert [seq for seq, _ in await pending(new, 10)] == seqs  # the refused step changed nothing
        with pytest.raises(Fenced):
            await old.finish_outbox_batch([(1, None)])
        await new.commit_step(Step(processed=[s for s in seqs if s]))
        assert await pending(new, 10) == []
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
