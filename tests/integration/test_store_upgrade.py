"""A database written by the version before the slimmer per-alert rows upgrades in place, on SQLite AND
PostgreSQL, and every read path returns what it returned before: incident search (GPU, node, Xid filters),
the GPU pages, the node and fleet views, the outbox and the timeline.

The old rows are written with the old schema's SQL (the migrations up to that version), in the shapes the
old code wrote: search facets for GPUs and own nodes, per-GPU history rows carrying the incident's fields
and a long-key document, outbox payloads in the outbox row, timeline documents as JSON text.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from alertd.core.model import GPU, Alert, Change, Event, Incident, Member, Signal, Subject, iso
from alertd.receive.payload import delivery_key, encode_webhook, read_notification
from alertd.store import sql
from alertd.store.base import Hook, Step
from alertd.store.reads import IncidentQuery
from alertd.store.sqlite import SqliteStore
from testkit.stores import gpu_hook, keys_of, make_store, query, received, take_all  # noqa: F401  (fixture)

T0 = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=timezone.utc)
UUID = "GPU-5d1f0c2e-91aa-4c3b-8e7d-2f60a1b4c9e8"
OTHER = "GPU-77aa01bb-22cc-33dd-44ee-55ff66aa77bb"
OLD_VERSION = 9  # the last migration before the slimmer rows
ISO = "2026-11-30T12:00:00.123456Z"
LATER = "2026-11-30T12:05:00.000000Z"


def old_incident() -> Incident:
    inc = Incident(id="INC-7", key="node|cluster=prod-a|node=gpu-node-4", group="node",
                   title="Xid 79: GPU has fallen off the bus on gpu-node-4", severity="critical", category="hardware",
                   status="open", opened_at=T0, updated_at=T0 + timedelta(minutes=5), cluster="prod-a", node="gpu-node-4")
    m = Member(fingerprint="a1b2c3d4e5f60718", alertname="GPUXidError", status="firing",
               signal=Signal(kind="xid", severity="critical", category="hardware", xid=79, title="Xid 79"),
               subject=Subject(cluster="prod-a", node="gpu-node-4",
                               gpu=GPU(uuid=UUID, index="2", pci_bus_id="0000:3b:00", serial="1652921003541")),
               labels={"alertname": "GPUXidError", "UUID": UUID, "xid": "79"}, starts_at=T0, last_seen=T0)
    inc.members[m.fingerprint] = m
    inc.signals, inc.xids, inc.gpus = ["xid"], [79], [m.subject.gpu.to_dict()]
    inc.timeline = [Event(at=T0, kind="opened", text="GPUXidError: Xid 79 (GPU 2)", data={"fingerprint": m.fingerprint})]
    return inc


async def write_old_rows(store) -> None:
    inc = old_incident()
    long_doc = {"xids": [79], "signals": ["xid"], "alertnames": ["GPUXidError"], "index": "2",
                "serial": "1652921003541", "pci_bus_id": "0000:3b:00", "first": ISO, "last": LATER}

    def do(cur) -> None:
        q = store.db.q
        cur.execute(q(sql.UPSERT_INCIDENT), sql.incident_row(inc))  # JSON text, as PostgreSQL and old SQLite
        member = inc.members["a1b2c3d4e5f60718"]
        cur.execute(q(sql.UPSERT_MEMBER), (inc.id, member.fingerprint, sql.dumps(member.to_dict())))
        cur.execute(q(sql.INSERT_EVENT), (inc.id, sql.dumps(inc.timeline[0].to_dict())))
        for kind, value in (("gpu", UUID), ("node", "gpu-node-4"), ("xid", "79"), ("signal", "xid")):
            cur.execute(q("INSERT INTO incident_facets (incident_id, seq, opened_at, kind, value) VALUES (?, 7, ?, ?, ?)"),
                        (inc.id, ISO, kind, value))
        gpus = "INSERT INTO gpus (uuid, serial, pci_bus_id, model, cluster, node, first_seen, last_seen, last_incident) "
        cur.execute(q(gpus + "VALUES (?, ?, ?, '', 'prod-a', 'gpu-node-4', ?, ?, 'INC-7')"),
                    (UUID, "1652921003541", "0000:3b:00", ISO, LATER))
        cur.execute(q(gpus + "VALUES (?, '', '', '', 'prod-a', 'gpu-node-5', ?, ?, 'INC-3')"), (OTHER, ISO, ISO))
        history = ("INSERT INTO gpu_history (uuid, incident_id, seq, cluster, node, opened_at, updated_at, status, "
                   "severity, title, doc) VALUES (?, ?, ?, 'prod-a', ?, ?, ?, ?, 'critical', ?, ?)")
        cur.execute(q(history), (UUID, "INC-7", 7, "gpu-node-4", ISO, LATER, "open", inc.title, json.dumps(long_doc)))
        cur.execute(q(history), (OTHER, "INC-3", 3, "gpu-node-5", ISO, ISO, "resolved", "Xid 48 on gpu-node-5",
                                 json.dumps({"xids": [48], "signals": ["xid"], "alertnames": ["GPUXidError"]})))
        outbox = ("INSERT INTO outbox (incident_id, target, kind, payload, created_at, due_at, state, done_at) "
                  "VALUES ('INC-7', ?, 'show', ?, ?, ?, ?, ?)")
        cur.execute(q(outbox), ("console", json.dumps({"kinds": ["opened"], "incident": {"id": "INC-7"}}), ISO, ISO, "done", LATER))
        cur.execute(q(outbox), ("slack:#gpu", json.dumps({"kinds": ["opened"], "urgent": False, "note": "ü"}), ISO, ISO, "pending", None))
        cur.execute(q("INSERT INTO inbox (dedup, received_at, alert, processed) VALUES (?, ?, '', 1)"),
                    ("a1b2c3d4e5f60718|1796000000.123|firing", ISO))
        cur.execute(q(sql.UPSERT_META), ("history_backfilled", "1"))
    await store.db.run(store.db.tx, do)


async def test_an_old_database_upgrades_in_place_and_reads_the_same(make_store, monkeypatch):  # noqa: F811
    monkeypatch.setattr(sql, "MIGRATIONS", sql.MIGRATIONS[:OLD_VERSION])
    old = make_store()
    await old.open()
    await write_old_rows(old)
    await old.close()
    monkeypatch.undo()

    s = make_store()
    await s.open()
    try:
        assert (await s.db.run(s.db.query, "SELECT version FROM schema_version")) == [(len(sql.MIGRATIONS),)]
        ids = lambda rows: [doc["id"] for _, doc in rows]  # noqa: E731
        assert ids(await s.query_incidents(IncidentQuery(gpus=[UUID]))) == ["INC-7"]
        assert ids(await s.query_incidents(IncidentQuery(node="gpu-node-4"))) == ["INC-7"]
        assert ids(await s.query_incidents(IncidentQuery(xid="79", signal="xid"))) == ["INC-7"]
        assert [(x, n) for x, _, n in await s.xid_heatmap(T0 - timedelta(days=1))] == [(79, 1)]

        (row, ) = await s.gpu_history(UUID)
        assert row == {"uuid": UUID, "incident": "INC-7", "seq": 7, "cluster": "prod-a", "node": "gpu-node-4",
                       "openedAt": ISO, "updatedAt": LATER, "status": "open", "severity": "critical",
                       "title": "Xid 79: GPU has fallen off the bus on gpu-node-4", "xids": [79], "signals": ["xid"],
                       "alertnames": ["GPUXidError"], "index": "2", "serial": "1652921003541",
                       "pci_bus_id": "0000:3b:00", "first": ISO, "last": LATER}
        assert (await s.gpu_history(OTHER))[0]["last"] == ""  # an old row without "last" still has none
        assert [r["uuid"] for r in await s.gpu_history_since(T0 - timedelta(days=1))] == [OTHER, UUID]
        (gpu, ) = await s.find_gpus("1652921003541")
        assert (gpu["uuid"], gpu["node"], gpu["last_seen"], gpu["last_incident"]) == (UUID, "gpu-node-4", LATER, "INC-7")
        assert [g["uuid"] for g in await s.find_gpus("0000:3B:00.0")] == [UUID]
        assert [g["uuid"] for g in await s.list_gpus()] == [UUID, OTHER]
        assert [g["uuid"] for g in await s.list_gpus(node="gpu-node-5")] == [OTHER]
        assert await s.node_gpus("gpu-node-4") == [{"uuid": UUID, "incidents": 1, "first": ISO, "last": LATER}]
        assert (await s.ranking(T0 - timedelta(days=1)))["gpus"][0] == {"uuid": UUID, "incidents": 1,
                                                                         "node": "gpu-node-4"}

        inc = await s.get_incident("INC-7")
        assert [e.text for e in inc.timeline] == ["GPUXidError: Xid 79 (GPU 2)"]
        assert list(inc.members) == ["a1b2c3d4e5f60718"]
        (due, ) = await s.due_outbox(T0 + timedelta(hours=1), 10)
        assert (due.target, due.payload.note, due.unreadable) == ("slack:#gpu", "ü", "")  # the old payload reads
        state = await s.notification_state("INC-7")
        assert (state["console"]["state"], state["slack:#gpu"]["pending"]) == ("done", 1)
        # The redelivery key now leads with the start time: a redelivery of the alert is still recognised.
        assert await s.known_keys(["1796000000.123|firing|a1b2c3d4e5f60718", "a1b2c3d4e5f60718|1796000000.123|firing"]
                                  ) == {"1796000000.123|firing|a1b2c3d4e5f60718"}

        # The upgraded incident changes again: its GPU keeps its id, the history row is rewritten in place.
        inc.status, inc.updated_at = "resolved", T0 + timedelta(minutes=9)
        inc.resolved_at = inc.updated_at
        await s.commit_step(Step(changes=[Change(incident=inc, kinds=["resolved"], events=[], members=list(inc.members))]))
        (row, ) = await s.gpu_history(UUID)
        assert (row["status"], row["updatedAt"], row["xids"]) == ("resolved", "2026-11-30T12:09:00.123456Z", [79])
        assert [g["uuid"] for g in await s.find_gpus(UUID)] == [UUID]
        assert ids(await s.query_incidents(IncidentQuery(gpus=[UUID], status="resolved"))) == ["INC-7"]
    finally:
        await s.close()


# ----- the inbox of the version before the inbox log: one row per alert -----

LOG_VERSION = next(n for n, m in enumerate(sql.MIGRATIONS) if "{inbox_log}" in m)  # migrations before the log


@dataclass
class Legacy:
    """What the previous inbox held: webhook bodies in inbox_hooks, wire forms in inbox_bodies, one row per alert."""

    partly: bytes  # a webhook of which the engine took two alerts of four
    whole: bytes  # a webhook none of whose alerts were taken
    singles: list[Alert]  # alerts alertd made itself (reconciliation), stored one by one, not taken
    taken: list[str]  # keys of alerts taken (processed = 1)
    aside: str  # the key of an alert set aside (processed = 2)


def legacy_inbox() -> Legacy:
    partly = gpu_hook("gpu-node-4", 4, starts=T0)
    whole = gpu_hook("gpu-node-5", 3, starts=T0 + timedelta(minutes=1), kind=6)
    resolutions = [gpu_hook(f"gpu-node-{n}", 1, starts=T0 - timedelta(hours=1), status="resolved") for n in (6, 7)]
    singles = [read_notification(b, T0 + timedelta(seconds=30 * i)).alerts[0] for i, b in enumerate(resolutions)]
    return Legacy(partly, whole, singles, keys_of(partly, T0)[:2] + ["1795990000.000|resolved|0f1e2d3c4b5a6978"],
                  "1795990100.000|firing|9a8b7c6d5e4f3021")


def as_stored_before(key: str) -> str:
    """A redelivery key as the versions before start-led keys wrote it: fingerprint|start|status."""
    start, status, fingerprint = key.split("|")
    return f"{fingerprint}|{start}|{status}"


async def write_legacy_inbox(store, legacy: Legacy) -> None:
    """Rows in the shapes the previous version's receive path and engine wrote, in the order they arrived."""
    def do(cur) -> None:
        q = store.db.q

        def hook(body: bytes, received: datetime, pending: int) -> int:
            cur.execute(q("INSERT INTO inbox_hooks (received_at, pending, body) VALUES (?, ?, ?) RETURNING id"),
                        (iso(received), pending, body.decode()))
            return int(cur.fetchone()[0])

        def row(key: str, received: datetime, processed: int, hook: int | None = None, pos: int = 0) -> int:
            cur.execute(q("INSERT INTO inbox (dedup, received_at, alert, processed, hook, pos) VALUES (?, ?, '', ?, ?, ?) "
                          "RETURNING seq"), (as_stored_before(key), iso(received), processed, hook, pos))
            return int(cur.fetchone()[0])

        def single(alert: Alert, processed: int = 0) -> None:
            seq = row(delivery_key(alert), alert.received_at, processed)
            cur.execute(q("INSERT INTO inbox_bodies (seq, alert) VALUES (?, ?)"), (seq, sql.dumps(alert.to_wire())))

        partly = hook(legacy.partly, T0, 2)
        for pos, key in enumerate(keys_of(legacy.partly, T0)):
            row(key, T0, 1 if pos < 2 else 0, partly, pos)
        single(legacy.singles[0])
        whole = hook(legacy.whole, T0 + timedelta(minutes=1), 3)
        for pos, key in enumerate(keys_of(legacy.whole, T0)):
            row(key, T0 + timedelta(minutes=1), 0, whole, pos)
        single(legacy.singles[1])
        row(legacy.taken[2], T0, 1)  # taken: its body went
        aside = read_notification(gpu_hook("gpu-node-9", 1, starts=T0), T0).alerts[0]
        seq = row(legacy.aside, T0, 2)
        cur.execute(q("INSERT INTO inbox_bodies (seq, alert) VALUES (?, ?)"), (seq, sql.dumps(aside.to_wire())))
    await store.db.run(store.db.tx, do)


async def open_legacy(make_store, monkeypatch, legacy: Legacy) -> None:
    """A database as the version before the inbox log left it (SQLite: no log file next to it)."""
    monkeypatch.setattr(sql, "MIGRATIONS", sql.MIGRATIONS[:LOG_VERSION])
    old = make_store()
    await old.open()
    await write_legacy_inbox(old, legacy)
    await old.close()
    monkeypatch.undo()
    if isinstance(old, SqliteStore):
        for suffix in ("", "-wal", "-shm", "-writer"):
            Path(f"{old.db.log_path}{suffix}").unlink(missing_ok=True)


def alerts_of(hooks: list[Hook]) -> list[Alert]:
    return [a for h in hooks for a in read_notification(h.body, received(h)).alerts]


async def test_pending_alerts_of_the_previous_inbox_move_to_the_log_once_in_order(make_store, monkeypatch):  # noqa: F811
    legacy = legacy_inbox()
    await open_legacy(make_store, monkeypatch, legacy)
    pending_keys = keys_of(legacy.partly, T0)[2:] + [delivery_key(legacy.singles[0])] + keys_of(legacy.whole, T0) + [
        delivery_key(legacy.singles[1])]
    for _ in range(2):  # moved once: opening again finds nothing left to move
        s = make_store()
        await s.open()
        try:
            assert await query(s, "SELECT version FROM schema_version") == [(len(sql.MIGRATIONS),)]
            hooks = await s.pending_hooks(100)
            assert [(h.alerts, h.received_at) for h in hooks] == [
                (4, iso(T0)), (1, iso(T0)), (3, iso(T0 + timedelta(minutes=1))), (1, iso(T0 + timedelta(seconds=30)))]
            assert (hooks[0].body, hooks[2].body) == (legacy.partly, legacy.whole)  # webhooks as received
            for hook, alert in ((hooks[1], legacy.singles[0]), (hooks[3], legacy.singles[1])):
                (again,) = read_notification(hook.body, received(hook)).alerts
                assert (delivery_key(again), again.labels, again.annotations, again.status, again.received_at) == (
                    delivery_key(alert), alert.labels, alert.annotations, "resolved", alert.received_at)
            assert await s.count_pending_inbox() == 9
            # The partly taken webhook's taken alerts are recognised; those not taken, and the rest, are not.
            every = [delivery_key(a) for a in alerts_of(hooks)]
            assert await s.known_keys(every) == set(legacy.taken[:2])
            assert await s.known_keys(legacy.taken + [legacy.aside]) == {*legacy.taken, legacy.aside}
            # The previous rows are gone but for the keys (and the set-aside alert's body, kept for inspection).
            assert await query(s, "SELECT dedup, processed FROM inbox ORDER BY seq") == [
                (legacy.taken[0], 1), (legacy.taken[1], 1), (legacy.taken[2], 1), (legacy.aside, 2)]
            assert await query(s, "SELECT count(*) FROM inbox_hooks") == [(0,)]
            assert await query(s, "SELECT count(*) FROM inbox_bodies") == [(1,)]
        finally:
            await s.close()

    s = make_store()
    await s.open()
    try:
        assert await take_all(s, 3) == (pending_keys, 2)  # what the engine takes: each pending alert, once
        assert await s.pending_hooks(100) == []
    finally:
        await s.close()


async def test_a_crash_between_moving_and_deleting_the_previous_rows_leaves_copies_the_engine_drops(
        make_store, monkeypatch):  # noqa: F811
    legacy = legacy_inbox()
    await open_legacy(make_store, monkeypatch, legacy)
    crashed = make_store()  # the run that appended the first webhooks to the log and died before deleting the rows
    monkeypatch.setattr(crashed, "adopt_legacy", lambda: None)
    await crashed.open()
    await crashed.append_hook(legacy.partly, T0, 4)
    single = legacy.singles[0]
    wire = single.to_wire()
    await crashed.append_hook(encode_webhook([wire], wire["receiver"], wire["externalURL"]), single.received_at, 1)
    await crashed.close()

    s = make_store()
    await s.open()
    try:
        hooks = await s.pending_hooks(100)
        assert [h.alerts for h in hooks] == [4, 1, 4, 1, 3, 1]  # the copies, then every pending webhook again
        assert hooks[0].body == hooks[2].body == legacy.partly
        fresh, dropped = await take_all(s, 5)
        assert sorted(fresh) == sorted(keys_of(legacy.partly, T0)[2:] + keys_of(legacy.whole, T0)
                                       + [delivery_key(a) for a in legacy.singles])
        assert len(fresh) == len(set(fresh)) == 7  # each alert once
        assert dropped == 2 + 4 + 1  # the taken ones of the first copy, and the whole second copies
    finally:
        await s.close()
