"""Poison webhooks in the store, on SQLite AND a real PostgreSQL: attempts counted before the engine runs a
webhook and kept across store objects (a restart, another replica), forgotten when the webhook is taken;
set-aside rows listed newest first and replayed under a renamed redelivery key."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from alertd.store.base import InboxKey, Step, Taken
from alertd.store.quarantine import BODY_SHOWN, note
from testkit.stores import gpu_hook, make_store, query, store, taking  # noqa: F401

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


async def _append(store, n: int) -> list[int]:
    return [await store.append_hook(gpu_hook(f"gpu-node-{i}", 1, starts=T0), T0 + timedelta(seconds=i), 1)
            for i in range(n)]


async def test_attempts_survive_a_new_store_object_and_isolate_the_first_webhook(make_store):
    first = make_store()
    await first.open()
    ids = await _append(first, 3)
    assert await first.count_attempt(ids, T0) == (ids, 0)  # a fresh batch: all counted, none tried before
    await first.close()  # the process died mid-step: nothing taken

    second = make_store()  # the restarted engine, or the replica that took the lease
    await second.open()
    try:
        assert await second.count_attempt(ids, T0) == (ids[:1], 1)  # one at a time now
        assert await second.count_attempt(ids, T0) == (ids[:1], 2)
        await second.uncount_attempt(ids[:1])  # a step the store refused is not the webhook's fault
        assert await second.count_attempt(ids, T0) == (ids[:1], 2)
        hooks = await second.pending_hooks(100)
        await second.commit_step(Step(inbox=taking(hooks[:1])))
        rows = await query(second, "SELECT hook, attempts FROM inbox_attempts ORDER BY hook")
        assert [r[0] for r in rows] == ids[1:]  # the taken one's count is gone, the others' stay
    finally:
        await second.close()


async def test_set_aside_rows_list_newest_first_and_replay_renames_the_key(store):
    ids = await _append(store, 2)
    hooks = await store.pending_hooks(100)
    body = hooks[1].body.decode()
    aside = [InboxKey(f"webhook:{ids[0]}:1.0", T0, 2, note("3 attempts did not finish", hooks[0].body.decode())),
             InboxKey("alert-key", T0, 2, note("ValueError: boom\nsecond line", body))]
    await store.commit_step(Step(inbox=Taken(ids, aside)))

    listed = await store.list_set_aside(limit=10)
    assert [(x.kind, x.reason) for x in listed] == [("alert", "ValueError: boom second line"),
                                                    ("webhook", "3 attempts did not finish")]
    assert listed[0].body == body and not listed[0].replayed
    assert [x.id for x in await store.list_set_aside(limit=10, before=listed[0].id)] == [listed[1].id]

    taken = await store.take_for_replay(listed[0].id)
    assert taken is not None and taken.replayed and taken.body == body
    assert await store.known_keys(["alert-key"]) == set()  # a replayed copy is not dropped as seen
    again = await store.take_for_replay(listed[0].id)  # replaying twice keeps the one renamed key
    assert again is not None and again.key == taken.key
    assert (await store.list_set_aside(limit=1))[0].to_dict()["state"] == "replayed"
    assert await store.take_for_replay(listed[0].id + 1000) is None


async def test_a_listing_reads_only_the_start_of_a_large_body(store):
    big = '{"alerts": []}' + " " * 200_000
    await store.commit_step(Step(inbox=Taken([], [InboxKey("webhook:1:1.0", T0, 2, note("too big to show", big))])))
    shown = (await store.list_set_aside(limit=1))[0].to_dict()
    assert shown["body_chars"] == len(big) and len(shown["body"]) == BODY_SHOWN
    whole = await store.take_for_replay(shown["id"])
    assert whole is not None and whole.body == big  # a replay sends all of it
