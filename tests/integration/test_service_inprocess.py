"""The service in-process over a real socket: receive -> store -> engine -> API, restart, auth."""
from __future__ import annotations

import asyncio
import base64
import json
import time
from datetime import datetime, timezone
from pathlib import Path

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from alertd.config.settings import parse_config
from alertd.rules.ruleset import load_rules
from alertd.app.service import Service
from alertd.store.base import StoreUnavailable
from alertd.store.sqlite import SqliteStore
from testkit.served import served
from testkit.stores import make_store  # noqa: F401  (fixture)
from alertd.web.keys import SERVICE
from testkit.notify_harness import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = json.loads((ROOT / "examples" / "webhook-gpu-node.json").read_text())
HOOK = "/api/v1/alerts/alertmanager"


async def started(tmp_path: Path, doc: dict | None = None) -> TestClient:
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, **(doc or {})}, "test")
    svc = Service(cfg, SqliteStore(tmp_path / "db.sqlite3"), load_rules(cfg.rule_paths))
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    return client



async def incidents(client: TestClient, **query) -> list[dict]:
    resp = await client.get("/api/v1/incidents", params=query)
    assert resp.status == 200
    return (await resp.json())["incidents"]


async def test_webhook_becomes_one_incident_and_survives_restart(tmp_path):
    client = await started(tmp_path)
    try:
        resp = await client.post(HOOK, json=EXAMPLE)
        assert resp.status == 200 and (await resp.json())["alerts"] == 3
        found = await wait_for(lambda: incidents(client))
        assert len(found) == 1 and found[0]["memberCount"] == 3 and found[0]["node"] == "gpu-node-17"
        detail = await (await client.get(f"/api/v1/incidents/{found[0]['id']}")).json()
        assert {m["alertname"] for m in detail["members"]} == {"GPUXidError", "DCGMExporterDown", "KubeNodeCordoned"}
        assert detail["timeline"][0]["kind"] == "opened"
        # redelivery (retry / HA peer): stored, then dropped by the engine as duplicates, no new members
        again = await (await client.post(HOOK, json=EXAMPLE)).json()
        assert again == {"status": "stored", "alerts": 3, "truncatedAlerts": 0}

        async def dropped() -> str | None:
            text = await (await client.get("/metrics")).text()
            return text if "alertd_alerts_duplicate_total 3.0" in text else None
        metrics = await wait_for(dropped)
        assert (await incidents(client))[0]["memberCount"] == 3
        assert 'alertd_incidents{state="open"} 1.0' in metrics
        assert (await client.get("/api/v1/incidents/INC-999")).status == 404
        assert (await client.get("/api/v1/incidents", params={"status": "bogus"})).status == 400
    finally:
        await client.close()
    # restart on the same database: state restored, a resolve closes the same incident
    client = await started(tmp_path, {"notify": {"console": {"enabled": False}}})
    try:
        resolved = json.loads(json.dumps(EXAMPLE))
        resolved["status"] = "resolved"
        for a in resolved["alerts"]:
            a["status"], a["endsAt"] = "resolved", "2026-11-30T10:30:00Z"
        assert (await client.post(HOOK, json=resolved)).status == 200

        async def quiet():
            rows = await incidents(client)
            return rows if rows and rows[0]["quietSince"] else None
        rows = await wait_for(quiet)
        assert len(rows) == 1 and rows[0]["firing"] == 0 and rows[0]["status"] == "open"
    finally:
        await client.close()


async def test_ack_and_resolve_via_api(tmp_path):
    client = await started(tmp_path)
    try:
        await client.post(HOOK, json=EXAMPLE)
        inc = (await wait_for(lambda: incidents(client)))[0]
        resp = await client.post(f"/api/v1/incidents/{inc['id']}/ack", params={"by": "alice"})
        assert resp.status == 200 and (await resp.json())["acknowledgedBy"] == "alice (anonymous)"
        assert (await client.post(f"/api/v1/incidents/{inc['id']}/ack")).status == 409
        assert (await client.post(f"/api/v1/incidents/{inc['id']}/resolve")).status == 200
        assert (await incidents(client, status="resolved"))[0]["id"] == inc["id"]
    finally:
        await client.close()


@pytest.mark.parametrize("auth_doc,good,bad", [
    ({"bearer_token": "t0k"}, {"Authorization": "Bearer t0k"}, {"Authorization": "Bearer nope"}),
    ({"basic": {"username": "am", "password": "pw"}},
     {"Authorization": "Basic " + base64.b64encode(b"am:pw").decode()},
     {"Authorization": "Basic " + base64.b64encode(b"am:wrong").decode()}),
])
async def test_receiver_and_api_auth(tmp_path, auth_doc, good, bad):
    client = await started(tmp_path, {"receiver": {"auth": auth_doc}, "api": {"auth": auth_doc}})
    try:
        assert (await client.post(HOOK, json=EXAMPLE)).status == 401
        resp = await client.post(HOOK, json=EXAMPLE, headers=bad)
        assert resp.status == 401 and "WWW-Authenticate" in resp.headers
        assert (await client.post(HOOK, json=EXAMPLE, headers=good)).status == 200
        assert (await client.get("/api/v1/incidents")).status == 401
        assert (await client.get("/api/v1/incidents", headers=good)).status == 200
        assert (await client.get("/healthz")).status == 200  # probes stay open
    finally:
        await client.close()


async def test_health_ready_and_bad_body(tmp_path):
    client = await started(tmp_path, {"receiver": {"max_body_bytes": 2048}})
    try:
        assert (await client.get("/readyz")).status == 200
        resp = await client.post(HOOK, data=b'{"version": "4", "status": "firing", "alerts": [' + b" " * 4096 + b"]}")
        assert resp.status == 413
        resp = await client.post(HOOK, data=b"\xff\xfe")
        assert resp.status == 400 and "UTF-8" in (await resp.json())["error"]
        metrics = await (await client.get("/metrics")).text()
        assert 'alertd_webhooks_rejected_total{reason="too_large"} 1.0' in metrics
    finally:
        await client.close()


async def test_backlog_limit_refuses_only_authenticated_webhooks_and_nothing_else(tmp_path, caplog):
    """A receiver (no engine takes anything): at receiver.max_backlog webhooks get 503 after the auth check,
    the API and /readyz are untouched, one warning is logged, and 0 turns the limit off."""
    token = {"Authorization": "Bearer t0k"}
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "receiver": {"max_backlog": 2, "auth": {
        "bearer_token": "t0k"}}}, "test")
    svc = Service(cfg, SqliteStore(tmp_path / "db.sqlite3"), load_rules(cfg.rule_paths), role="receiver")
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    try:
        for _ in range(2):
            assert (await client.post(HOOK, json=EXAMPLE, headers=token)).status == 200

        async def counted() -> bool:
            return svc.backlog == 2
        await wait_for(counted)
        assert (await client.post(HOOK, json=EXAMPLE)).status == 401  # who may not send learns nothing
        for _ in range(3):
            resp = await client.post(HOOK, json=EXAMPLE, headers=token)
            assert resp.status == 503 and resp.headers["Retry-After"] == "5"
            assert "holds 2 webhooks not yet processed (receiver.max_backlog 2)" in (await resp.json())["error"]
        assert caplog.text.count("is at receiver.max_backlog 2") == 1
        assert (await client.get("/readyz")).status == 200 and (await client.get("/api/v1/incidents")).status == 200
        metrics = await (await client.get("/metrics")).text()
        assert 'alertd_webhooks_rejected_total{reason="backlog"} 3.0' in metrics
        assert "alertd_inbox_backlog_webhooks 2.0" in metrics
        svc.cfg.receiver = msgspec.structs.replace(svc.cfg.receiver, max_backlog=0)
        assert (await client.post(HOOK, json=EXAMPLE, headers=token)).status == 200
    finally:
        await client.close()


async def test_metrics_count_unclassified_gpu_looking_alerts_by_alertname(tmp_path):
    def one(name: str, labels: dict, expr: str) -> dict:
        from urllib.parse import quote_plus

        return {"status": "firing", "labels": {"alertname": name, **labels}, "annotations": {"summary": name},
                "startsAt": "2026-11-30T12:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": f"http://prom:9090/graph?g0.expr={quote_plus(expr)}&g0.tab=1",
                "fingerprint": f"{abs(hash(name)) % (1 << 60):016x}"}

    body = {**EXAMPLE, "alerts": [
        one("GPUPowerDrawHigh", {"node": "n1", "gpu": "0", "UUID": "GPU-1"}, "DCGM_FI_DEV_POWER_USAGE > 650"),
        one("NodeHighLoad", {"node": "n1"}, "node_load1 > 64"),  # not GPU-looking: not counted
        one("GPUXidSeen", {"node": "n1", "gpu": "0"}, "DCGM_FI_DEV_XID_ERRORS > 0"),  # classified: not counted
    ]}
    client = await started(tmp_path)
    try:
        assert (await client.post(HOOK, json=body)).status == 200

        async def counted() -> str | None:
            text = await (await client.get("/metrics")).text()
            return text if "alertd_unclassified_gpu_alerts_total{" in text else None

        text = await wait_for(counted)
        assert 'alertd_unclassified_gpu_alerts_total{alertname="GPUPowerDrawHigh"} 1.0' in text
        assert 'alertname="NodeHighLoad"' not in text and 'alertname="GPUXidSeen"' not in text
    finally:
        await client.close()


async def test_a_stored_webhook_that_no_longer_reads_is_set_aside_and_the_rest_flows(tmp_path):
    """A logged webhook whose body cannot be read (an older version's, or damaged) is set aside, never blocks."""
    store = SqliteStore(tmp_path / "db.sqlite3")
    await store.open()
    now = datetime.now(timezone.utc)
    for body in (b'{"version": "4", "status": "firing"}', b'{"version": "4", "status": "firing", "alerts": [{}]}'):
        await store.append_hook(body, now, 1)  # no alerts, an empty alert: refused when read back
    await store.close()
    client = await started(tmp_path)
    try:
        assert (await client.post(HOOK, json=EXAMPLE)).status == 200
        found = await wait_for(lambda: incidents(client))
        assert len(found) == 1 and found[0]["memberCount"] == 3
        svc = client.server.app[SERVICE]
        rows = await svc.store.db.run(svc.store.db.query, "SELECT dedup, alert FROM inbox WHERE processed = 2")
        assert len(rows) == 2 and all(k.startswith("webhook:") for k, _ in rows), rows
        assert any("alerts" in note and "is a required property" in note for _, note in rows), rows
        assert 'alertd_store_errors_total{operation="quarantine"} 2.0' in await (await client.get("/metrics")).text()
    finally:
        await client.close()


async def test_a_deposed_leader_whose_step_was_fenced_is_a_ready_follower(tmp_path):
    """A leader that stalled past its lease resumes: its next engine step is fenced (another replica leads), then
    its lease round deposes it. /readyz must then say follower with 200: the fenced step's error belonged to the
    engine this replica no longer runs, and an unready follower would be taken out of its Service."""
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]},
                        "ha": {"lease_ttl": "1s", "renew_interval": "200ms"}}, "test")
    path = tmp_path / "db.sqlite3"
    old = Service(cfg, SqliteStore(path), load_rules(cfg.rule_paths), role="replica")
    new = Service(cfg, SqliteStore(path), load_rules(cfg.rule_paths), role="replica")
    client = TestClient(TestServer(served(old), host="127.0.0.1"))
    await client.start_server()

    async def fenced() -> bool:
        return "Fenced" in old.health.step_error

    async def taken_by_the_new_leader() -> bool:
        return new.engine is not None and len(new.engine.state.incidents) == 1

    try:
        assert old.leading and old.elector is not None
        next(t for t in asyncio.all_tasks() if t.get_name() == "alertd-elector").cancel()  # stalls: renews no more
        await asyncio.sleep(1.2)
        await new.start()
        assert new.leading
        assert (await client.post(HOOK, json=EXAMPLE)).status == 200  # a deposed leader still receives
        await wait_for(fenced)
        assert (await client.get("/readyz")).status == 503  # still believes it leads, and its engine fails
        await old.elector.round()
        resp = await client.get("/readyz")
        assert (resp.status, await resp.text()) == (200, "ready: follower\n")
        await wait_for(taken_by_the_new_leader)
    finally:
        await client.close()
        await new.stop()


async def test_readyz_forgets_a_store_failure_nothing_retries_but_not_one_that_persists(tmp_path):
    """A housekeeping query that failed once is not retried for a minute: /readyz must not stay 503 for it (a
    lone replica out of its Service's endpoints would never get the webhook that clears it). An engine step
    that keeps failing (retried while its webhook waits) keeps /readyz 503 past the window."""
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}}, "test")
    store = SqliteStore(tmp_path / "db.sqlite3")
    stats, commit = store.stats, store.commit_step

    async def locked(*_args):
        raise StoreUnavailable("database is locked")

    async def failing_disk(*_args):
        raise StoreUnavailable("disk I/O error")

    store.stats = locked  # type: ignore[method-assign]  # the first housekeeping round runs at start
    svc = Service(cfg, store, load_rules(cfg.rule_paths))
    svc.health.window = 3.0
    skew = [0.0]  # the health clock runs with real time (the processor retries on it) and jumps when told
    svc.health.clock = lambda: time.monotonic() + skew[0]
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()

    async def readyz() -> tuple[int, str]:
        resp = await client.get("/readyz")
        return resp.status, await resp.text()

    async def ready() -> bool:
        return (await readyz())[0] == 200

    async def unready() -> bool:
        return (await readyz())[0] == 503

    async def step_failing() -> bool:
        return "disk I/O error" in svc.health.step_error

    try:
        await wait_for(unready)
        assert await readyz() == (503, "store failing: StoreUnavailable: database is locked\n")
        store.stats = stats  # type: ignore[method-assign]
        skew[0] += svc.health.window  # nothing retries a housekeeping round: its failure ends with the window
        await wait_for(ready, timeout=2)

        store.commit_step = failing_disk  # type: ignore[method-assign]
        assert (await client.post(HOOK, json=EXAMPLE)).status == 200  # appended to the log; the engine fails on it
        await wait_for(step_failing)
        for _ in range(22):  # 4.4 s, past the 3 s window: each retry refreshes the failure
            assert (await readyz())[0] == 503
            await asyncio.sleep(0.2)
        store.commit_step = commit  # type: ignore[method-assign]
        await wait_for(ready, timeout=8)
        assert len(await incidents(client)) == 1
    finally:
        await client.close()


async def test_the_store_size_is_exported_on_either_backend(make_store):  # noqa: F811
    """SQLite's files are measured at each scrape; PostgreSQL's database by the leader's housekeeping, whose
    first round runs at start."""
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}}, "test")
    client = TestClient(TestServer(served(Service(cfg, make_store(), load_rules(cfg.rule_paths))), host="127.0.0.1"))
    await client.start_server()

    async def measured() -> float | None:
        text = await (await client.get("/metrics")).text()
        size = next(float(line.split()[1]) for line in text.splitlines() if line.startswith("alertd_store_bytes "))
        return size or None
    try:
        assert await wait_for(measured) > 0
    finally:
        await client.close()
