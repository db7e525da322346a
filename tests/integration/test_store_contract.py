"""The storage contract, run against SQLite AND a real PostgreSQL.

Every test gets a fresh store: a new SQLite file, or a new PostgreSQL schema in
the session's database (``search_path`` set through the DSN). The PostgreSQL
server comes from the session ``postgres`` fixture (tests.support.fixtures);
without it installed the PostgreSQL half is skipped (failed under CI). The inbox log's own
contract (appends, the order of taking, taken webhooks never handed out again) is in test_store_inbox.py.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from alertd.core.model import GPU, Change, Event, Incident, Member, Signal, Subject, iso
from alertd.core.outbox_items import Show
from alertd.store import sql
from alertd.store.base import (ESCALATION, REOPENABLE, SENT, Hook, InboxKey, MemoryDelta, OutboxItem, RouterMemory,
                               Step, StoreUnavailable, Taken)
from alertd.store.facade import SqlStore
from alertd.store.steps import RECENT_EVENTS
from testkit.stores import (backend, gpu_hook, keys_of, log_ids, make_store, pending, query, store,  # noqa: F401
                                  taking)

T0 = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=timezone.utc)
SQLITE_DEFAULT_MAX_PAGES = 1_073_741_823


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# ----- one fresh store per test, on each backend, and reads on its connection: testkit/stores.py -----
# ----- builders -----

def member(fp: str, node: str = "gpu-node-1", *, status: str = "firing", starts: datetime = T0) -> Member:
    return Member(fingerprint=fp, alertname="GPUXidError", status=status,
                  signal=Signal(kind="xid", severity="critical", category="hardware", xid=79,
                                title="Xid 79: GPU has fallen off the bus"),
                  subject=Subject(cluster="prod-a", node=node), labels={"alertname": "GPUXidError", "node": node,
                                                                        "gpu": "3", "note": "ü 🚀"},
                  starts_at=starts, last_seen=starts)


def incident(seq: int, *, key: str = "", node: str = "gpu-node-1", status: str = "open", updated: datetime = T0,
             members: tuple[str, ...] = (), events: int = 1) -> Incident:
    inc = Incident(id=f"INC-{seq}", key=key or f"node|cluster=prod-a|node={node}", group="node",
                   title=f"Xid 79 on {node}", severity="critical", category="hardware", status=status,
                   opened_at=T0, updated_at=updated, cluster="prod-a", node=node)
    for fp in members:
        inc.members[fp] = member(fp, node)
    for i in range(events):
        inc.timeline.append(Event(at=T0 + timedelta(seconds=i), kind="opened" if i == 0 else "alert_joined",
                                  text=f"event {i}"))
    inc.updated_at = updated
    if status == "resolved":
        inc.resolved_at = updated
    return inc


def change(inc: Incident) -> Change:
    return Change(incident=inc, kinds=[e.kind for e in inc.timeline], events=list(inc.timeline),
                  members=list(inc.members))


def outbox(incident_id: str, target: str = "console", due: datetime = T0, n: int = 0) -> OutboxItem:
    return OutboxItem(incident_id=incident_id, target=target, intent="show",
                      payload=Show(kinds=("opened",), note=str(n), muted="ü", route="", receiver="", team=""),
                      due_at=due)


class ExplodingMember(Member):
    """A member whose serialisation fails half-way through a step."""

    def to_dict(self) -> dict[str, Any]:
        raise RuntimeError("member serialisation failed")


# ----- schema -----

async def test_migrations_are_idempotent_on_reopen(make_store):
    first = make_store()
    await first.open()
    body = gpu_hook("gpu-node-1", 2, starts=T0)
    hook = await first.append_hook(body, T0, 2)
    await first.close()
    for _ in range(2):  # reopening finds the schema current and runs nothing again
        again = make_store()
        await again.open()
        assert await query(again, "SELECT version FROM schema_version") == [(len(sql.MIGRATIONS),)]
        assert await pending(again) == [(hook, body)]
        await again.close()


# ----- engine steps -----

async def test_commit_step_is_all_or_nothing_with_the_webhooks_and_keys_it_takes(store):
    for node, n in (("gpu-node-1", 2), ("gpu-node-2", 1)):
        await store.append_hook(gpu_hook(node, n, starts=T0), T0, n)
    hooks = await store.pending_hooks(10)
    took = taking(hooks)
    keys = [k.dedup for k in took.keys]
    good = incident(1, node="gpu-node-1", members=("s0", "s1"))
    bad = incident(2, node="gpu-node-2", members=("s2",))
    bad.members["s2"] = ExplodingMember(**{f: getattr(bad.members["s2"], f) for f in Member.__slots__})
    step = Step(inbox=took, changes=[change(good), change(bad)], outbox=[outbox("INC-1"), outbox("INC-2")],
                next_seq=3, heartbeat_at=at(5))
    with pytest.raises(RuntimeError, match="serialisation"):
        await store.commit_step(step)
    await assert_nothing_committed(store, hooks, keys)

    # A failure inside the database (a NOT NULL column) after the keys, the taken mark, incidents and members
    # were written: same.
    no_target = outbox(None)  # type: ignore[arg-type]
    broken = Step(inbox=took, changes=[change(good)], outbox=[outbox("INC-1"), no_target], next_seq=3)
    with pytest.raises(Exception):
        await store.commit_step(broken)
    await assert_nothing_committed(store, hooks, keys)
    # The next step, which takes no webhook, does not take what the failed one meant to either.
    await store.commit_step(Step(inbox=Taken(keys=[InboxKey("other|1|firing", T0)])))
    assert await pending(store) == [(h.id, h.body) for h in hooks]

    # The store is still usable, and the whole step lands at once.
    await store.commit_step(Step(inbox=took, changes=[change(good)], outbox=[outbox("INC-1")], next_seq=3,
                                 heartbeat_at=at(5)))
    assert await pending(store) == [] and await store.count_pending_inbox() == 0
    assert await store.known_keys(keys) == set(keys)
    assert [i["id"] for i in await store.list_incidents()] == ["INC-1"]
    assert len(await store.due_outbox(at(60), 10)) == 1
    state = await store.load_state()
    assert (state.next_seq, state.heartbeat_at) == (3, at(5))


async def assert_nothing_committed(store: SqlStore, hooks: list[Hook], keys: list[str]) -> None:
    assert await pending(store) == [(h.id, h.body) for h in hooks]  # still pending: will be taken again
    assert await store.count_pending_inbox() == 3
    assert await store.known_keys(keys) == set()
    assert await query(store, "SELECT count(*) FROM inbox") == [(0,)]
    assert await log_ids(store) == [h.id for h in hooks]
    assert await query(store, "SELECT value FROM meta WHERE key = 'inbox_taken' AND value <> '0'") == []
    assert await store.list_incidents() == []
    assert await store.get_incident("INC-1") is None
    assert await store.due_outbox(at(3600), 10) == []
    assert await query(store, "SELECT count(*) FROM members") == [(0,)]
    assert await query(store, "SELECT count(*) FROM events") == [(0,)]
    state = await store.load_state()
    assert (state.incidents, state.next_seq, state.heartbeat_at) == ({}, 1, None)


async def test_router_memory_is_committed_with_the_step_or_not_at_all(make_store):
    store = make_store()
    await store.open()
    try:
        assert await store.load_router_memory() == RouterMemory()
        good = incident(1, members=("m1",))
        first = MemoryDelta(marks={("INC-1", SENT, "slack:#gpu"), ("INC-1", ESCALATION, "escalation:infra"),
                                   ("INC-2", SENT, "pagerduty:infra")},
                            cordons={("prod-a", "gpu-node-1"): (at(-60), "INC-1"), ("prod-a", "gpu-node-2"): (T0, "INC-2")})
        await store.commit_step(Step(changes=[change(good)], outbox=[outbox("INC-1")], next_seq=2, memory=first))
        expected = RouterMemory(sent={"INC-1": {"slack:#gpu"}, "INC-2": {"pagerduty:infra"}},
                                escalations={"INC-1": {"escalation:infra"}},
                                cordons={("prod-a", "gpu-node-1"): (at(-60), "INC-1"),
                                         ("prod-a", "gpu-node-2"): (T0, "INC-2")})
        assert await store.load_router_memory() == expected

        # A step whose commit fails in the database leaves the memory as it was.
        lost = MemoryDelta(marks={("INC-1", SENT, "slack:#other")}, forget={"INC-2"},
                           cordons={("prod-a", "gpu-node-1"): None})
        with pytest.raises(Exception):
            await store.commit_step(Step(outbox=[outbox(None)], memory=lost))  # type: ignore[arg-type]
        assert await store.load_router_memory() == expected

        # Marks again (idempotent), a closed incident forgotten, one closed but able to reopen (its escalations
        # dropped, its targets kept), a cordon ended and one moved.
        again = MemoryDelta(marks={("INC-1", SENT, "slack:#gpu"), ("INC-1", SENT, "slack:#other"),
                                   ("INC-1", REOPENABLE, iso(at(3600))), ("INC-2", SENT, "slack:#late")},
                            forget={"INC-2"}, drop={("INC-1", ESCALATION)},
                            cordons={("prod-a", "gpu-node-1"): (at(-120), "INC-1"), ("prod-a", "gpu-node-2"): None})
        await store.commit_step(Step(memory=again))
    finally:
        await store.close()
    reopened = make_store()  # a restart, or another instance taking over
    await reopened.open()
    try:
        assert await reopened.load_router_memory() == RouterMemory(
            sent={"INC-1": {"slack:#gpu", "slack:#other"}}, reopenable={"INC-1": at(3600)},
            cordons={("prod-a", "gpu-node-1"): (at(-120), "INC-1")})
    finally:
        await reopened.close()


async def test_load_state_restores_open_incidents_last_by_key_and_next_seq(make_store):
    key_a, key_b, key_c = "node|cluster=prod-a|node=a", "node|cluster=prod-a|node=b", "node|cluster=prod-a|node=c"
    store = make_store()
    await store.open()
    await store.commit_step(Step(changes=[change(incident(1, key=key_a, node="a", status="resolved", updated=at(10)))]))
    await store.commit_step(Step(changes=[
        change(incident(2, key=key_a, node="a", status="resolved", updated=at(20))),
        change(incident(3, key=key_a, node="a", members=("a1",), updated=at(30))),
        change(incident(4, key=key_b, node="b", members=("b1", "b2"), events=RECENT_EVENTS + 5, updated=at(40))),
        change(incident(5, key=key_c, node="c", status="resolved", updated=at(50))),
    ], next_seq=4, heartbeat_at=at(45)))  # next_seq behind the highest stored incident: the store corrects it
    inc4 = incident(4, key=key_b, node="b", members=("b1", "b2"), events=0, updated=at(60))
    inc4.status, inc4.acknowledged_by, inc4.acknowledged_at = "acknowledged", "alice", at(60)
    inc4.members["b2"].status = "resolved"
    await store.commit_step(Step(changes=[Change(inc4, ["acknowledged"], members=["b2"])]))
    await store.close()

    store = make_store()  # a restart
    await store.open()
    try:
        state = await store.load_state()
    finally:
        await store.close()
    assert sorted(state.incidents) == ["INC-3", "INC-4"]
    assert state.by_key == {key_a: "INC-3", key_b: "INC-4"}
    assert state.by_fingerprint == {"a1": "INC-3", "b1": "INC-4", "b2": "INC-4"}
    assert state.last_by_key == {key_a: "INC-2", key_c: "INC-5"}
    assert state.next_seq == 6
    assert state.heartbeat_at == at(45)
    inc = state.incidents["INC-4"]
    assert (inc.status, inc.acknowledged_by, inc.acknowledged_at) == ("acknowledged", "alice", at(60))
    assert {fp: m.status for fp, m in inc.members.items()} == {"b1": "firing", "b2": "resolved"}
    assert inc.members["b1"].labels["note"] == "ü 🚀"
    assert inc.members["b1"].signal.xid == 79
    assert [e.text for e in inc.timeline] == [f"event {i}" for i in range(5, RECENT_EVENTS + 5)]
    # the last resolved incident of each key comes back too, so the engine can reopen it after a restart
    assert sorted(state.closed) == [key_a, key_c] and state.closed[key_c].id == "INC-5"
    assert state.closed[key_a].id == "INC-2" and state.closed[key_a].resolved_at == at(20)


async def test_load_state_leaves_out_incidents_resolved_long_before_the_newest(make_store):
    store = make_store()
    await store.open()
    old, new = incident(1, node="a", status="resolved", updated=at(0), members=("a1",)), \
        incident(2, node="b", status="resolved", updated=at(7 * 3600), members=("b1",))
    await store.commit_step(Step(changes=[change(old), change(new)]))
    try:
        state = await store.load_state()
    finally:
        await store.close()
    assert [inc.id for inc in state.closed.values()] == ["INC-2"]
    assert {fp: inc.id for fp, inc in state.closed_fps.items()} == {"b1": "INC-2"}


# ----- outbox -----

async def test_outbox_hands_out_only_the_oldest_pending_item_per_incident_and_target(store):
    items = ([outbox("INC-1", "console", n=i) for i in range(3)]
             + [outbox("INC-1", "slack:#gpu", n=i) for i in range(2)]
             + [outbox("INC-2", "console", due=at(3600))]  # not due yet
             + [outbox("INC-3", "console", due=at(3600), n=0), outbox("INC-3", "console", n=1)])  # oldest not due
    await store.commit_step(Step(outbox=items))
    due = await store.due_outbox(at(60), 100)
    assert [(o.incident_id, o.target, int(o.payload.note)) for o in due] == [("INC-1", "console", 0),
                                                                          ("INC-1", "slack:#gpu", 0)]
    assert (due[0].payload.note, due[0].payload.muted) == ("0", "ü") and due[0].attempts == 0 and due[0].due_at == T0
    assert len(await store.due_outbox(at(60), 1)) == 1

    console, slack = due
    await store.finish_outbox(console.id, ref=("INC-1", "console", "ts-1"))
    assert await store.notify_ref("INC-1", "console") == "ts-1"
    assert await store.notify_ref("INC-1", "slack:#gpu") is None
    due = await store.due_outbox(at(60), 100)
    assert [(o.target, int(o.payload.note)) for o in due] == [("console", 1), ("slack:#gpu", 0)]

    # A retry pushes the pair's head into the future: nothing behind it overtakes.
    await store.retry_outbox(slack.id, at(600), "429 rate limited")
    assert [(o.target, int(o.payload.note)) for o in await store.due_outbox(at(60), 100)] == [("console", 1)]
    later = [o for o in await store.due_outbox(at(601), 100) if o.target == "slack:#gpu"]
    assert [(o.id, o.attempts, o.last_error, o.due_at) for o in later] == [(slack.id, 1, "429 rate limited", at(600))]
    # Giving up on it lets the next one go.
    await store.retry_outbox(slack.id, at(601), "400 invalid_blocks", give_up=True)
    assert [(o.target, int(o.payload.note)) for o in await store.due_outbox(at(601), 100) if o.target == "slack:#gpu"] == [
        ("slack:#gpu", 1)]
    assert (await store.stats())["outbox_failed"] == 1

    # Every pair drains in order; the ref is overwritten by the latest delivery.
    delivered: dict[tuple[str, str], list[int]] = {}
    for _ in range(20):
        due = await store.due_outbox(at(7200), 100)
        if not due:
            break
        for o in due:
            delivered.setdefault((o.incident_id, o.target), []).append(int(o.payload.note))
            await store.finish_outbox(o.id, ref=(o.incident_id, o.target, f"ts-{o.id}"))
    assert delivered == {("INC-1", "console"): [1, 2], ("INC-1", "slack:#gpu"): [1], ("INC-2", "console"): [0],
                         ("INC-3", "console"): [0, 1]}
    rows = await query(store, "SELECT id FROM outbox WHERE incident_id = 'INC-1' AND target = 'console'")
    last_console = max(r[0] for r in rows)
    assert await store.notify_ref("INC-1", "console") == f"ts-{last_console}"
    await store.save_ref("INC-9", "slack:#gpu", "1700000000.000100")  # type: ignore[attr-defined]
    assert await store.notify_ref("INC-9", "slack:#gpu") == "1700000000.000100"
    stats = await store.stats()
    assert stats.get("outbox_pending", 0) == 0 and stats["outbox_done"] == 7


# ----- reads -----

async def test_list_incidents_filters_and_get_incident(store):
    await store.commit_step(Step(changes=[
        change(incident(1, node="gpu-node-1", status="resolved", updated=at(10))),
        change(incident(2, node="gpu-node-2", updated=at(20), members=("m1", "m2"), events=30)),
        change(incident(3, node="gpu-node-1", updated=at(30))),
        change(incident(4, node="gpu-node-3", status="resolved", updated=at(40))),
    ]))
    ids = lambda rows: [r["id"] for r in rows]  # noqa: E731
    assert ids(await store.list_incidents()) == ["INC-4", "INC-3", "INC-2", "INC-1"]
    assert ids(await store.list_incidents(status="open")) == ["INC-3", "INC-2"]
    assert ids(await store.list_incidents(status="resolved")) == ["INC-4", "INC-1"]
    assert ids(await store.list_incidents(node="gpu-node-1")) == ["INC-3", "INC-1"]
    assert ids(await store.list_incidents(since=at(20))) == ["INC-4", "INC-3", "INC-2"]
    assert ids(await store.list_incidents(status="resolved", node="gpu-node-1", since=at(5))) == ["INC-1"]
    assert ids(await store.list_incidents(limit=2)) == ["INC-4", "INC-3"]
    assert await store.list_incidents(node="no-such-node") == []
    row = (await store.list_incidents(node="gpu-node-2"))[0]
    assert row["memberCount"] == 2 and "members" not in row

    inc = await store.get_incident("INC-2")
    assert sorted(inc.members) == ["m1", "m2"]
    assert len(inc.timeline) == 30  # the whole timeline, not the in-memory tail
    assert await store.get_incident("INC-404") is None


async def test_open_incidents_on_nodes_and_incidents_by_id_are_one_query_each(store, monkeypatch):
    """What a silence preview reads (alertd/app/silence_preview.py): the open and acknowledged incidents on a
    set of nodes, a fleet by one of its nodes too, with their members; and incidents by id. One query each."""
    fleet = incident(5, key="fleet|rack-1", node="")
    fleet.fleet, fleet.nodes, fleet.children = True, ["gpu-node-1", "gpu-node-2"], ["INC-1", "INC-2"]
    await store.commit_step(Step(changes=[
        change(incident(1, node="gpu-node-1", members=("m1",), events=3)),
        change(incident(2, node="gpu-node-2", status="acknowledged", members=("m2", "m3"))),
        change(incident(3, node="gpu-node-1", status="resolved", members=("m4",))),
        change(incident(4, node="gpu-node-9")),
        change(fleet),
    ]))
    queries: list[str] = []
    real = store.db.query
    monkeypatch.setattr(store.db, "query", lambda statement, args=(): queries.append(statement) or real(statement, args))

    found = {i.id: i for i in await store.open_incidents_on(["gpu-node-1", "gpu-node-2"], 100)}
    assert sorted(found) == ["INC-1", "INC-2", "INC-5"] and len(queries) == 1
    assert sorted(found["INC-2"].members) == ["m2", "m3"] and found["INC-2"].status == "acknowledged"
    assert found["INC-1"].members["m1"].labels["note"] == "ü 🚀" and found["INC-1"].timeline == []
    assert found["INC-5"].fleet and not found["INC-5"].members
    known = await store.open_incidents_on(["gpu-node-1", "gpu-node-2"], 100, {"INC-1", "INC-5"})
    assert [i.id for i in known] == ["INC-2"]
    assert await store.open_incidents_on(["no-such-node"], 100) == []

    queries.clear()
    by_id = await store.incidents_with_members(["INC-3", "INC-404", "INC-4"])
    assert sorted(i.id for i in by_id) == ["INC-3", "INC-4"] and len(queries) == 1
    assert [list(i.members) for i in sorted(by_id, key=lambda i: i.id)] == [["m4"], []]


async def test_time_filters_compare_instants_within_one_second(store):
    whole = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
    await store.commit_step(Step(changes=[change(incident(1, updated=whole + timedelta(milliseconds=500)))],
                                 outbox=[outbox("INC-1", due=whole)]))
    assert [r["id"] for r in await store.list_incidents(since=whole)] == ["INC-1"]
    assert len(await store.due_outbox(whole + timedelta(milliseconds=500), 10)) == 1


# ----- retention -----

async def test_prune_drops_old_taken_keys_and_delivered_outbox_rows_and_keeps_set_aside_ones(store):
    now = datetime.now(timezone.utc)
    old, new = now - timedelta(days=2), now
    old_keys = keys_of(gpu_hook("gpu-node-1", 3, starts=old), old)
    new_keys = keys_of(gpu_hook("gpu-node-2", 1, starts=new), new)
    aside = InboxKey(f"webhook:7:{old.timestamp():.6f}", old, 2, "stored webhook no longer reads: alerts.0.labels")
    untaken = await store.append_hook(gpu_hook("gpu-node-3", 2, starts=old), old, 2)
    await store.commit_step(Step(inbox=Taken(keys=[InboxKey(k, old) for k in old_keys] + [aside]
                                             + [InboxKey(k, new) for k in new_keys]),
                                 outbox=[outbox("INC-1", n=0), outbox("INC-1", n=1), outbox("INC-2", n=0)]))
    first = (await store.due_outbox(datetime.now(timezone.utc), 10))[0]
    await store.finish_outbox(first.id)

    assert await store.prune(now - timedelta(days=1)) == 3  # the old taken keys
    everything = old_keys + new_keys + [aside.dedup]
    assert await store.known_keys(everything) == {*new_keys, aside.dedup}  # a redelivery of old ones is new again
    assert [i for i, _ in await pending(store)] == [untaken]  # a webhook not taken is never pruned

    assert await store.prune(datetime.now(timezone.utc) + timedelta(minutes=1)) == 2  # new key + the delivered item
    assert await store.known_keys(everything) == {aside.dedup}  # set aside: kept for inspection, with why
    assert await query(store, "SELECT processed, alert FROM inbox") == [(2, aside.note)]
    assert sorted(r[0] for r in await query(store, "SELECT state FROM outbox")) == ["pending", "pending"]
    assert await store.prune(datetime.now(timezone.utc) + timedelta(days=365)) == 0
    assert [i for i, _ in await pending(store)] == [untaken]


# ----- a store that cannot write -----

async def test_store_unavailable_then_recovers(store):
    before_body = gpu_hook("gpu-node-1", 1, starts=T0)
    before = await store.append_hook(before_body, T0, 1)
    if backend(store) == "sqlite":
        await asyncio.get_running_loop().run_in_executor(None, store.db.set_max_pages, 1)  # the disk is full
        big = [gpu_hook(f"gpu-node-{i}", 8, starts=at(i)) for i in range(5)]  # several pages each
        results = await asyncio.gather(*(store.append_hook(b, T0, 8) for b in big), return_exceptions=True)
        assert all(isinstance(r, StoreUnavailable) for r in results), results  # the log's file is capped too
        with pytest.raises(StoreUnavailable):
            # rows that need new pages (documents are packed small: a few rows could fit in a page's free space)
            await store.commit_step(Step(inbox=taking(await store.pending_hooks(10)), changes=[
                change(incident(1, members=tuple(f"m{i}" for i in range(50)), events=50))]))
        assert await pending(store) == [(before, before_body)]  # the failed step took nothing
        await asyncio.get_running_loop().run_in_executor(None, store.db.set_max_pages, SQLITE_DEFAULT_MAX_PAGES)
        ids = await asyncio.gather(*(store.append_hook(b, T0, 8) for b in big))
        assert await pending(store) == [(before, before_body), *zip(ids, big)]  # the refused ones left nothing
    else:
        import psycopg

        dsn = store.db.dsn  # type: ignore[attr-defined]
        for attempt in range(2):  # the database restarts (or fails over): both of the store's connections are gone
            with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
                killed = [pid for pid, done in conn.execute(
                    "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchall() if done]
                assert len(killed) >= 2  # the engine's connection and the inbox log's
                for _ in range(100):
                    if not conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (killed,)).fetchall():
                        break
                    await asyncio.sleep(0.05)
            body = gpu_hook(f"lost-{attempt}", 2, starts=at(attempt))
            with pytest.raises(StoreUnavailable):  # the append in flight: 503, Alertmanager retries
                await store.append_hook(body, T0, 2)
            retried = await store.append_hook(body, T0, 2)  # the retry: the log reconnected, stored once
            with pytest.raises(StoreUnavailable):  # the engine's connection was gone too
                await store.commit_step(Step(heartbeat_at=at(attempt)))
            hooks = await store.pending_hooks(100)  # reconnected
            waiting = [(before, before_body)] if attempt == 0 else []  # taken in the first round
            assert [(h.id, h.body) for h in hooks] == [*waiting, (retried, body)]  # the refused append left nothing
            await store.commit_step(Step(inbox=taking(hooks)))
            assert await pending(store) == []
    await store.commit_step(Step(changes=[change(incident(1, members=("m",)))]))
    assert [i["id"] for i in await store.list_incidents()] == ["INC-1"]


# ----- audit trail and the durable replay cache -----

async def test_audit_entries_round_trip_newest_first_and_filter(store):
    from alertd.store.base import AuditEntry

    await store.record_audit(AuditEntry(at(0), "oncall", "ack", "INC-1", "api"))
    await store.record_audit(AuditEntry(at(5), "ana (slack:U1)", "resolve", "INC-1", "slack", "refused: closed"))
    await store.record_audit(AuditEntry(at(9), "SIGHUP", "reload", "rules", "signal"))
    everything = await store.list_audit()
    assert [(e.actor, e.action, e.outcome) for e in everything] == [
        ("SIGHUP", "reload", "ok"), ("ana (slack:U1)", "resolve", "refused: closed"), ("oncall", "ack", "ok")]
    assert everything[2].at == at(0)
    assert [e.action for e in await store.list_audit(since=at(5))] == ["reload", "resolve"]
    assert [e.target for e in await store.list_audit(actor="oncall")] == ["INC-1"]
    assert len(await store.list_audit(limit=1)) == 1
    # A principal's entries include those where it stated a name; LIKE's wildcards in a name match themselves.
    await store.record_audit(AuditEntry(at(10), "alice (oncall)", "resolve", "INC-2", "api"))
    await store.record_audit(AuditEntry(at(11), "bob (on_call%)", "resolve", "INC-3", "api"))
    assert [e.target for e in await store.list_audit(actor="oncall")] == ["INC-2", "INC-1"]
    assert [e.target for e in await store.list_audit(actor="slack:U1")] == ["INC-1"]
    assert [e.target for e in await store.list_audit(actor="on_call%")] == ["INC-3"]
    assert await store.list_audit(actor="on%") == []


async def test_remember_once_survives_reopening_and_forgets_after_the_window(make_store):
    s = make_store()
    await s.open()
    assert await s.remember_once("slack:v0=abc", at(0), at(-360)) is True
    assert await s.remember_once("slack:v0=abc", at(1), at(-359)) is False
    await s.close()
    s = make_store()
    await s.open()
    try:
        assert await s.remember_once("slack:v0=abc", at(2), at(-358)) is False  # still known after a restart
        assert await s.remember_once("slack:v0=abc", at(400), at(40)) is True  # forgotten once outside the window
    finally:
        await s.close()


# ----- incident history: facets and GPU identity -----

def gpu_member(fp: str, node: str, uuid: str, xid: int, *, serial: str = "", pci: str = "") -> Member:
    m = member(fp, node)
    m.signal = Signal(kind="xid", severity="critical", category="hardware", xid=xid, title=f"Xid {xid}")
    m.subject = Subject(cluster="prod-a", node=node, gpu=GPU(uuid=uuid, index="3", pci_bus_id=pci, serial=serial))
    return m


async def test_gpu_identity_follows_a_board_across_nodes_and_incidents(make_store):
    from alertd.store.reads import IncidentQuery

    s = make_store()
    await s.open()
    uuid = "GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
    for seq, node, xid in ((1, "gpu-node-1", 79), (2, "gpu-node-1", 79), (3, "gpu-node-2", 48)):
        inc = incident(seq, node=node, status="resolved" if seq < 3 else "open", updated=at(seq * 100))
        inc.opened_at = at(seq * 100)
        m = gpu_member(f"fp{seq}", node, uuid, xid, serial="1654922018827" if seq == 1 else "",
                       pci="0000:3a:00" if seq == 3 else "")
        inc.members[m.fingerprint] = m
        inc.signals, inc.xids, inc.gpus = ["xid"], [xid], [m.subject.gpu.to_dict()]
        await s.commit_step(Step(changes=[change(inc)]))
    await s.commit_step(Step(changes=[change(incident(4, node="gpu-node-9"))]))  # no GPU
    (gpu,) = await s.find_gpus("1654922018827")  # serial kept though later alerts lacked it
    assert (gpu["uuid"], gpu["node"], gpu["pci_bus_id"], gpu["last_incident"]) == (uuid, "gpu-node-2", "0000:3a:00", "INC-3")
    assert [g["uuid"] for g in await s.find_gpus("0000:3A:00.0")] == [uuid]
    history = await s.gpu_history(uuid)
    assert [(r["incident"], r["node"], r["xids"]) for r in history] == [
        ("INC-1", "gpu-node-1", [79]), ("INC-2", "gpu-node-1", [79]), ("INC-3", "gpu-node-2", [48])]
    ids = lambda rows: [doc["id"] for _, doc in rows]  # noqa: E731
    assert ids(await s.query_incidents(IncidentQuery(gpus=[uuid]))) == ["INC-3", "INC-2", "INC-1"]
    assert ids(await s.query_incidents(IncidentQuery(xid="79", limit=1))) == ["INC-2"]
    assert ids(await s.query_incidents(IncidentQuery(xid="79", before=2))) == ["INC-1"]
    assert ids(await s.query_incidents(IncidentQuery(signal="xid", node="gpu-node-2"))) == ["INC-3"]
    assert [(x, n) for x, _, n in sorted(await s.xid_heatmap(T0))] == [(48, 1), (79, 2)]
    fleet = incident(5, key="fleet|cluster=prod-a|xid=79", node="")  # a storm over INC-1 and INC-2: no third 79
    fleet.opened_at, fleet.signals, fleet.xids = at(500), ["xid"], [79]
    await s.commit_step(Step(changes=[change(fleet)]))
    assert [(x, n) for x, _, n in sorted(await s.xid_heatmap(T0))] == [(48, 1), (79, 2)]
    rank = await s.ranking(T0)
    assert rank["gpus"] == [{"uuid": uuid, "incidents": 3, "node": "gpu-node-2"}]
    await s.close()


async def test_history_is_backfilled_for_incidents_stored_before_it(make_store):
    s = make_store()
    await s.open()
    inc = incident(1, node="gpu-node-1")
    m = gpu_member("fp1", "gpu-node-1", "GPU-aaaa", 79)
    inc.members[m.fingerprint] = m
    inc.xids = [79]
    await s.commit_step(Step(changes=[change(inc)]))
    wipe = ("DELETE FROM gpu_history", "DELETE FROM gpu_incidents", "DELETE FROM incident_facets", "DELETE FROM gpus",
            "DELETE FROM meta WHERE key = 'history_backfilled'")  # as if stored before the history tables existed
    await s.db.run(s.db.tx, lambda cur: [cur.execute(w) for w in wipe])  # type: ignore[attr-defined]
    await s.close()
    again = make_store()
    await again.open()
    assert [r["incident"] for r in await again.gpu_history("GPU-aaaa")] == ["INC-1"]
    assert [g["uuid"] for g in await again.find_gpus("GPU-aaaa")] == ["GPU-aaaa"]
    await again.close()


async def test_resolved_incidents_past_their_retention_are_pruned_with_members_and_timeline(store):
    old = incident(1, node="n-old", status="resolved", updated=at(0), members=("fa", "fb"), events=3)
    recent = incident(2, node="n-recent", status="resolved", updated=at(3600), members=("fc",))
    still_open = incident(3, node="n-open", updated=at(0), members=("fd",))
    await store.commit_step(Step(changes=[change(old), change(recent), change(still_open)]))
    pruned = await store.prune(at(-86400), resolved_before=at(1800))
    assert pruned == 1
    assert await store.get_incident("INC-1") is None
    assert {r[0] for r in await query(store, "SELECT incident_id FROM members")} == {"INC-2", "INC-3"}
    assert {r[0] for r in await query(store, "SELECT incident_id FROM events")} == {"INC-2", "INC-3"}
    assert set((await store.get_incident("INC-2")).members) == {"fc"}
