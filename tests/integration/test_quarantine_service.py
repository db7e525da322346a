"""Poison webhooks through the running service: a webhook whose classification sticks, an alert that overruns
or fails, a webhook whose earlier attempts never finished (a crash, on any replica) are set aside with the
reason while the webhooks behind them flow; the quarantine is listed (API and UI, admin only), counted, and
replayed after the rules are fixed."""
from __future__ import annotations

import copy
import json
import threading
from datetime import datetime, timezone
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from alertd.config.settings import parse_config
from alertd.engine.pipeline import Engine
from alertd.rules.ruleset import load_rules
from alertd.app.service import Service
from alertd.store.sqlite import SqliteStore
from testkit.served import served
from alertd.web.keys import SERVICE
from testkit.notify_harness import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = json.loads((ROOT / "examples" / "webhook-gpu-node.json").read_text())
HOOK = "/api/v1/alerts/alertmanager"
ADMIN, READER = "admin-token-0123456789abcdef", "reader-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {ADMIN}"}


def on_node(node: str, poison: str = "") -> dict:
    """The example webhook (Xid 79, exporter down, cordon) moved to ``node``; ``poison`` marks its Xid alert."""
    doc = copy.deepcopy(EXAMPLE)
    for i, alert in enumerate(doc["alerts"]):
        alert["labels"]["node"] = node
        alert["fingerprint"] = f"{abs(hash((node, i))) % (1 << 60):016x}"
        if poison and i == 0:
            alert["annotations"]["poison"] = poison
    return doc


async def started(tmp_path: Path) -> TestClient:
    tokens = [{"name": "boss", "role": "admin", "token": ADMIN}, {"name": "viewer", "role": "read", "token": READER}]
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "api": {"auth": {"tokens": tokens}}}, "test")
    svc = Service(cfg, SqliteStore(tmp_path / "db.sqlite3"), load_rules(cfg.rule_paths))
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    return client



async def nodes(client: TestClient) -> set[str]:
    resp = await client.get("/api/v1/incidents", headers=AUTH)
    return {i["node"] for i in (await resp.json())["incidents"]}


async def quarantine(client: TestClient) -> list[dict]:
    resp = await client.get("/api/v1/quarantine", headers=AUTH)
    assert resp.status == 200
    return (await resp.json())["items"]


def poisoned(monkeypatch, behave) -> None:
    """Engine.prepare runs ``behave()`` first for alerts annotated ``poison`` (what a hostile input would do)."""
    real = Engine.prepare

    def prepare(self, alert):
        if alert.annotations.get("poison"):
            behave(alert.annotations["poison"])
        return real(self, alert)
    monkeypatch.setattr(Engine, "prepare", prepare)


async def test_a_stuck_webhook_is_set_aside_alone_and_replayed_after_the_fix(tmp_path, monkeypatch):
    release = threading.Event()
    poisoned(monkeypatch, lambda _: release.wait(30))  # a classification that does not return
    client = await started(tmp_path)
    svc = client.server.app[SERVICE]
    svc.budget.stuck_after = 0.3
    try:
        for body in (on_node("gpu-node-1"), on_node("gpu-node-2", poison="stick"), on_node("gpu-node-3")):
            assert (await client.post(HOOK, json=body)).status == 200
        assert await wait_for(lambda: _nodes_are(client, {"gpu-node-1", "gpu-node-3"}))
        items = await wait_for(lambda: quarantine(client))
        assert [(i["kind"], i["state"]) for i in items] == [("webhook", "set aside")]
        assert "did not finish within 0.3 s" in items[0]["reason"] and "gpu-node-2" in items[0]["body"]
        assert (await client.get("/readyz")).status == 200
        metrics = await (await client.get("/metrics")).text()
        assert 'alertd_set_aside_total{cause="stuck"} 1.0' in metrics

        assert (await client.get("/api/v1/quarantine", headers={"Authorization": f"Bearer {READER}"})).status == 403
        page = await client.get("/ui/quarantine", headers=AUTH)
        assert page.status == 200 and "did not finish within" in await page.text()

        replay = f"/ui/quarantine/{items[0]['id']}/replay"
        evil = await client.post(replay, headers={**AUTH, "Origin": "http://evil.example"}, allow_redirects=False)
        assert evil.status == 403 and [i["state"] for i in await quarantine(client)] == ["set aside"]

        release.set()  # the rule is fixed
        monkeypatch.undo()
        own = {**AUTH, "Origin": str(client.make_url("/")).rstrip("/")}
        resp = await client.post(replay, headers=own, allow_redirects=False)
        assert resp.status == 303 and "replayed" in resp.headers["Location"], resp.headers
        assert await wait_for(lambda: _nodes_are(client, {"gpu-node-1", "gpu-node-2", "gpu-node-3"}))
        assert [i["state"] for i in await quarantine(client)] == ["replayed"]
        again = await client.post(f"/api/v1/quarantine/{items[0]['id']}/replay", headers=AUTH)  # harmless twice
        assert again.status == 202 and (await again.json())["item"]["state"] == "replayed"

        async def dropped() -> bool:  # the second copy's alerts were taken already: dropped as redeliveries
            return "alertd_alerts_duplicate_total 3.0" in await (await client.get("/metrics")).text()
        assert await wait_for(dropped)
        assert await nodes(client) == {"gpu-node-1", "gpu-node-2", "gpu-node-3"}
        assert [i["state"] for i in await quarantine(client)] == ["replayed"]
        assert (await client.post("/api/v1/quarantine/999999/replay", headers=AUTH)).status == 404
        assert (await client.post("/api/v1/quarantine/x1/replay", headers=AUTH)).status == 404
    finally:
        release.set()
        await client.close()


async def _nodes_are(client: TestClient, expected: set[str]) -> bool:
    return await nodes(client) == expected


async def test_an_alert_that_overruns_or_fails_is_set_aside_and_its_webhook_flows(tmp_path, monkeypatch):
    def behave(how: str) -> None:
        if how == "fail":
            raise ValueError("rule tripped")
    poisoned(monkeypatch, behave)
    client = await started(tmp_path)
    svc = client.server.app[SERVICE]
    cpu = iter(range(0, 10_000))

    def clock() -> float:  # each read one second later: every alert overruns a budget below one second
        return float(next(cpu))
    try:
        assert (await client.post(HOOK, json=on_node("gpu-node-1", poison="fail"))).status == 200
        assert await wait_for(lambda: _nodes_are(client, {"gpu-node-1"}))
        svc.budget.cpu_clock, svc.budget.cpu_per_alert = clock, 0.5
        assert (await client.post(HOOK, json=on_node("gpu-node-2"))).status == 200
        items = await wait_for(lambda: _at_least(client, 4))
        causes = sorted(i["reason"].split(":")[0] if "Error" in i["reason"] else "overran" for i in items)
        assert causes == ["ValueError", "overran", "overran", "overran"], items
        assert all(i["kind"] == "alert" for i in items)
        detail = json.loads(items[-1]["body"])  # each alert is replayable as a webhook of its own
        assert len(detail["alerts"]) == 1 and detail["alerts"][0]["labels"]["node"] == "gpu-node-1"
        metrics = await (await client.get("/metrics")).text()
        assert 'alertd_set_aside_total{cause="failed"} 1.0' in metrics
        assert 'alertd_set_aside_total{cause="overran"} 3.0' in metrics
    finally:
        await client.close()


async def _at_least(client: TestClient, n: int) -> list[dict] | None:
    items = await quarantine(client)
    return items if len(items) >= n else None


async def test_a_webhook_whose_attempts_never_finished_is_set_aside_at_the_next_start(tmp_path):
    """Three engines died on the same webhook (kill -9 mid-step: nothing taken, each attempt counted first);
    the fourth start sets it aside without running it, and the webhook behind it flows."""
    store = SqliteStore(tmp_path / "db.sqlite3")
    await store.open()
    now = datetime.now(timezone.utc)
    killer = await store.append_hook(json.dumps(on_node("gpu-node-9")).encode(), now, 3)
    after = await store.append_hook(json.dumps(on_node("gpu-node-8")).encode(), now, 3)
    assert await store.count_attempt([killer, after], now) == ([killer, after], 0)
    for tried in (1, 2):
        assert await store.count_attempt([killer, after], now) == ([killer], tried)
    await store.close()
    client = await started(tmp_path)
    try:
        assert await wait_for(lambda: _nodes_are(client, {"gpu-node-8"}))
        items = await quarantine(client)
        assert len(items) == 1 and items[0]["reason"].startswith("3 attempts at this webhook did not finish")
        assert 'alertd_set_aside_total{cause="attempts"} 1.0' in await (await client.get("/metrics")).text()
    finally:
        await client.close()
