"""History in every decision, through the real store: an incident that opens after its GPU's history exists
gets the verdict (rules/history.yml), committed with it and there again after a restart; the API shows it.

The service runs in-process with an injected clock: three Xid 79 incidents on one GPU, days apart (each
resolved and closed after the hold-down), make the third a repeat offender; the first two stay unchanged.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from alertd.app.service import Service
from alertd.config.settings import parse_config
from alertd.receive.payload import fingerprint_of
from alertd.rules.ruleset import load_rules
from testkit.notify_harness import wait_for
from testkit.served import served
from testkit.stores import make_store  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
HOOK = "/api/v1/alerts/alertmanager"
UUID = "GPU-8f6e2c1a-4b7d-4e0f-9a3c-2d1e5f7a9173"
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=timezone.utc)
LABELS = {"alertname": "GPUXidError", "cluster": "prod-a", "node": "gpu-node-17", "severity": "critical",
          "xid": "79", "gpu": "3", "UUID": UUID, "pci_bus_id": "00000000:3B:00.0", "modelName": "NVIDIA H100 80GB HBM3",
          "Hostname": "dcgm-exporter-x7k2p"}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def hook(starts: datetime, ends: datetime | None = None, labels: dict | None = None) -> dict:
    """Alertmanager's webhook v4 for one alert (default the GPU's Xid 79; firing, or resolved at ``ends``)."""
    status = "resolved" if ends else "firing"
    alert = {"status": status, "labels": labels or LABELS, "annotations": {"summary": "Xid 79 on gpu-node-17 GPU 3"},
             "startsAt": starts.isoformat().replace("+00:00", "Z"),
             "endsAt": ends.isoformat().replace("+00:00", "Z") if ends else "0001-01-01T00:00:00Z",
             "generatorURL": "http://prometheus.example:9090/graph?g0.expr=changes%28DCGM_FI_DEV_XID_ERRORS%5B5m%5D%29+%3E+0",
             "fingerprint": fingerprint_of(labels or LABELS)}
    return {"version": "4", "groupKey": '{}:{node="gpu-node-17"}', "truncatedAlerts": 0, "status": status,
            "receiver": "alertd", "groupLabels": {"node": "gpu-node-17"}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "http://alertmanager.example:9093", "alerts": [alert]}


async def started(store, clock: Clock) -> TestClient:
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "processing": {"tick_interval": "50ms"},
                        "notify": {"console": {"enabled": False}}}, "test")
    svc = Service(cfg, store, load_rules(cfg.rule_paths), clock=clock)
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    return client


async def incidents(client: TestClient) -> list[dict]:
    resp = await client.get("/api/v1/incidents")
    assert resp.status == 200
    return (await resp.json())["incidents"]


async def xid79_incident(client: TestClient, clock: Clock, day: float, n: int) -> dict:
    """The GPU's Xid 79 on ``day``: it opens incident number ``n``, resolves and closes after the hold-down."""
    starts = T0 + timedelta(days=day)
    clock.now = starts + timedelta(seconds=30)
    assert (await client.post(HOOK, json=hook(starts))).status == 200
    rows = await wait_for(lambda: _count(client, n))
    opened = rows[0]
    clock.now = starts + timedelta(minutes=20)
    assert (await client.post(HOOK, json=hook(starts, starts + timedelta(minutes=19)))).status == 200
    await wait_for(lambda: _quiet(client, opened["id"]))
    clock.now = starts + timedelta(minutes=40)  # past the hold-down: the ticker closes it
    await wait_for(lambda: _closed(client, opened["id"]))
    return opened


async def _count(client: TestClient, n: int) -> list[dict] | None:
    rows = await incidents(client)
    return rows if len(rows) == n else None


async def _quiet(client: TestClient, inc_id: str) -> dict | None:
    doc = await (await client.get(f"/api/v1/incidents/{inc_id}")).json()
    return doc if doc.get("quietSince") else None


async def _closed(client: TestClient, inc_id: str) -> dict | None:
    doc = await (await client.get(f"/api/v1/incidents/{inc_id}")).json()
    return doc if doc.get("status") == "resolved" else None


@pytest.mark.parametrize("make_store", ["sqlite", "postgres"], indirect=True)
async def test_third_xid79_in_7_days_gets_the_verdict_and_keeps_it_after_a_restart(make_store):
    clock = Clock()
    store = make_store()
    client = await started(store, clock)
    try:
        first = await xid79_incident(client, clock, 0, 1)
        second = await xid79_incident(client, clock, 2, 2)
        third = await xid79_incident(client, clock, 4, 3)
        assert first["verdict"] is None and second["verdict"] is None  # a first (and second) Xid 79: unchanged
        verdict = third["verdict"]
        assert verdict["rule"] == "xid79-third-in-7d" and verdict["action"] == "replace_gpu"
        assert verdict["wasAction"] == "reboot_node"
        assert verdict["incidents"] == [second["id"], first["id"]]
        assert verdict["line"] == (f"3rd Xid 79 on GPU GPU-…-9173 in 7 days (last: {second['id']}, {first['id']}); "
                                   "action: replace GPU (was: reboot node)")
        doc = await (await client.get(f"/api/v1/incidents/{third['id']}")).json()
        assert any(e["kind"] == "verdict" and e["text"] == verdict["line"] for e in doc["timeline"])
        assert "verdict" not in doc["annotations"]
    finally:
        await client.close()
    clock.now = T0 + timedelta(days=5)
    client = await started(make_store(), clock)  # a new process on the same database
    try:
        doc = await (await client.get(f"/api/v1/incidents/{third['id']}")).json()
        assert doc["verdict"] == verdict
        page = await (await client.get(f"/ui/incidents/{third['id']}")).text()
        assert "3rd Xid 79 on GPU GPU-…-9173 in 7 days" in page
        # a fourth, 9 days after the first: the first is out of the window, still the 3rd in 7 days
        fourth = await xid79_incident(client, clock, 9, 4)
        assert fourth["verdict"]["incidents"] == [third["id"], second["id"]]
    finally:
        await client.close()


CORDON = {"alertname": "KubeNodeCordoned", "cluster": "prod-a", "node": "gpu-node-17", "severity": "info",
          "job": "kube-state-metrics"}
XID48 = {**LABELS, "xid": "48"}


async def post(client: TestClient, body: dict) -> None:
    assert (await client.post(HOOK, json=body)).status == 200


@pytest.mark.parametrize("make_store", ["sqlite", "postgres"], indirect=True)
async def test_the_same_fault_back_after_the_uncordon_is_a_repair_that_did_not_hold(make_store):
    """The repair's end is what the store kept of the earlier incident (its uncordon), read after a restart."""
    clock = Clock()
    client = await started(make_store(), clock)
    try:
        clock.now = T0 + timedelta(seconds=30)
        await post(client, hook(T0, labels=XID48))
        [first] = await wait_for(lambda: _count(client, 1))
        clock.now = T0 + timedelta(minutes=10)
        await post(client, hook(T0 + timedelta(minutes=9), labels=CORDON))  # the on-call cordons the node
        clock.now = T0 + timedelta(minutes=20)
        await post(client, hook(T0, T0 + timedelta(minutes=19), labels=XID48))
        clock.now = T0 + timedelta(hours=2)  # repaired: uncordoned
        await post(client, hook(T0 + timedelta(minutes=9), T0 + timedelta(hours=2) - timedelta(seconds=30), labels=CORDON))
        await wait_for(lambda: _quiet(client, first["id"]))
        clock.now = T0 + timedelta(hours=2, minutes=10)
        closed = await wait_for(lambda: _closed(client, first["id"]))
        assert closed["verdict"] is None
    finally:
        await client.close()
    client = await started(make_store(), clock)  # a restart between the repair and the fault's return
    try:
        back = T0 + timedelta(hours=8)
        clock.now = back + timedelta(seconds=30)
        await post(client, hook(back, labels=XID48))
        rows = await wait_for(lambda: _count(client, 2))
        verdict = rows[0]["verdict"]
        assert verdict["rule"] == "repair-did-not-hold" and verdict["action"] == "drain_and_handoff"
        assert verdict["line"] == (f"Xid 48 back on node gpu-node-17 6 hours after the uncordon of {first['id']}: "
                                   "the repair did not hold; action: drain and hand off (was: reset GPU)")
    finally:
        await client.close()


@pytest.mark.parametrize("make_store", ["sqlite", "postgres"], indirect=True)
async def test_five_finished_remediations_of_a_node_in_7_days_make_it_a_lemon(make_store):
    """The node's remediations as the store keeps them (alertd/store/remediations.py): the ones that ran to
    their end on it count; a dry run and another node's do not."""
    from alertd.engine.judge import judge
    from alertd.gpu.catalog import XidCatalog
    from alertd.rules.shipped import SHIPPED_RULES
    from bench.history_snapshot import commit, node_incident

    catalog = XidCatalog.load(SHIPPED_RULES / "xid-catalog.yml")
    store = make_store()
    await store.open()
    try:
        for n in range(1, 7):
            at = T0 + timedelta(days=n)
            await commit(store, node_incident(n, "gpu-node-9", 8, 62, at, catalog))
            doc = {"id": f"INC-{n}/node", "incident": f"INC-{n}", "cluster": "prod-a",
                   "nodes": ["gpu-node-9"] if n != 6 else ["gpu-node-8"], "kind": "node", "action": "drain-gpu",
                   "state": "done", "createdAt": at.isoformat(), "updatedAt": (at + timedelta(hours=1)).isoformat(),
                   "dryRun": n == 5, "version": 1}
            assert await store.put_remediation(doc, None)
        now = T0 + timedelta(days=7)
        new = node_incident(7, "gpu-node-9", 8, 95, now, catalog)  # another fault: each remediation held
        rules = tuple(r for r in load_rules([ROOT / "rules"]).history if r.action)
        snap = await store.history_snapshot([g["uuid"] for g in new.gpus], "gpu-node-9", now - timedelta(days=37), "INC-7")
        assert sorted(r.incident for r in snap.remediations) == ["INC-1", "INC-2", "INC-3", "INC-4"]
        assert judge(new, snap, rules, now) is None  # 4 remediations: not yet
        doc = {"id": "INC-6/node2", "incident": "INC-6", "cluster": "prod-a", "nodes": ["gpu-node-9"], "kind": "node",
               "action": "cordon", "state": "done", "createdAt": now.isoformat(), "updatedAt": now.isoformat(),
               "dryRun": False, "version": 1}
        assert await store.put_remediation(doc, None)
        snap = await store.history_snapshot([g["uuid"] for g in new.gpus], "gpu-node-9", now - timedelta(days=37), "INC-7")
        verdict = judge(new, snap, rules, now)
        assert verdict is not None and verdict.rule == "lemon-node" and verdict.action == "drain_and_handoff"
        assert verdict.line.startswith("node gpu-node-9 remediated 5 times in 7 days: contact support")
    finally:
        await store.close()
