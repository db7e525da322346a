"""The CloudEvents receiver in the served app: authenticated like the webhook, 200 only once stored, a bad
event 400 naming the field, a redelivered event changing nothing, and each producer's event an incident.

NVSentinel's event is shaped as its event exporter builds it (event-exporter/pkg/transformer: type
com.nvidia.nvsentinel.health.v1, source nvsentinel://<cluster>/healthevents, a UUID id, time the health
event's generatedTimestamp, data.metadata and data.healthEvent in camelCase with recommendedAction as an
integer) and is POSTed in structured mode, as its HTTP sink does. The generic event is sent in binary mode.
"""
from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from alertd.app.assemble import build_service
from alertd.config.settings import parse_config
from alertd.store.sqlite import SqliteStore
from testkit.served import served

ROOT = Path(__file__).resolve().parents[2]
PATH = "/api/v1/events/cloudevents"
TOKEN = "ce-test-token-4b1f9d2c7e8a6f30"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def nvsentinel(node: str, healthy: bool = False, event_id: str = "") -> dict[str, Any]:
    at = datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return {"specversion": "1.0", "type": "com.nvidia.nvsentinel.health.v1",
            "source": "nvsentinel://prod-us-west-2/healthevents", "id": event_id or str(uuid.uuid4()), "time": at,
            "data": {"metadata": {"cluster": "prod-us-west-2", "environment": "production"},
                     "healthEvent": {"version": 1, "agent": "syslog-health-monitor", "componentClass": "GPU",
                                     "checkName": "SysLogsXIDError", "isFatal": not healthy, "isHealthy": healthy,
                                     "message": "" if healthy else "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
                                     "recommendedAction": 0 if healthy else 15, "errorCode": [] if healthy else ["79"],
                                     "entitiesImpacted": [{"entityType": "PCI", "entityValue": "0000:17:00.0"},
                                                          {"entityType": "GPU_UUID",
                                                           "entityValue": "GPU-a1b2c3d4-e5f6-7890-abcd-ef1234567890"}],
                                     "generatedTimestamp": at, "nodeName": node}}}


async def started(tmp_path: Path) -> tuple[Any, TestClient]:
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, "receiver": {"auth": {"bearer_token": TOKEN}},
                        "api": {"auth": {"bearer_token": TOKEN + "-api"}}}, "test")
    svc = build_service(cfg, SqliteStore(tmp_path / "alertd.sqlite3"))
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    return svc, client


async def settled(svc: Any, count: int) -> list[Any]:
    for _ in range(200):
        incidents = list(svc.engine.state.incidents.values())
        if len(incidents) >= count and await svc.store.count_pending_inbox() == 0:
            return incidents
        await asyncio.sleep(0.05)
    raise AssertionError(f"incidents: {list(svc.engine.state.incidents.values())}")


async def test_nvsentinel_and_generic_events_each_give_an_incident_and_a_redelivery_changes_nothing(tmp_path):
    svc, client = await started(tmp_path)
    try:
        event = nvsentinel("gpu-node-42")
        headers = {**AUTH, "Content-Type": "application/cloudevents+json"}
        resp = await client.post(PATH, data=json.dumps(event), headers=headers)
        assert (resp.status, await resp.json()) == (200, {"status": "stored", "events": 1})
        generic = {"node": "gpu-node-43", "check": "dcgm-diag-level-3", "healthy": False, "kind": "ecc",
                   "severity": "critical", "message": "DCGM diag: uncorrectable ECC errors on GPU 2",
                   "gpu": {"uuid": "GPU-0b5e6a71-2c1d-4f3e-8a9b-7c6d5e4f3a21", "index": "2"}}
        binary = {**AUTH, "Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": "diag-7f3a",
                  "ce-source": "//gpu-health.example/checker", "ce-type": "dev.alertd.gpu.health.v1",
                  "ce-time": "2026-12-06T04:40:00Z"}
        assert (await client.post(PATH, data=json.dumps(generic), headers=binary)).status == 200
        incidents = await settled(svc, 2)
        by_node = {i.members[next(iter(i.members))].subject.node: i for i in incidents}
        xid, ecc = by_node["gpu-node-42"], by_node["gpu-node-43"]
        assert "Xid 79" in xid.title and xid.members[next(iter(xid.members))].subject.cluster == "prod-us-west-2"
        assert ecc.members[next(iter(ecc.members))].signal.kind == "ecc"

        duplicates = svc.metrics.duplicates._value.get()
        again = await client.post(PATH, data=json.dumps(event), headers=headers)  # the exporter's retry
        assert again.status == 200
        await settled(svc, 2)
        assert svc.metrics.duplicates._value.get() == duplicates + 1
        assert len(svc.engine.state.incidents) == 2 and len(xid.members) == 1

        healthy = nvsentinel("gpu-node-42", healthy=True)  # the check passes again: the alert resolves
        assert (await client.post(PATH, data=json.dumps(healthy), headers=headers)).status == 200
        for _ in range(100):
            if all(m.status == "resolved" for m in xid.members.values()):
                break
            await asyncio.sleep(0.05)
        assert all(m.status == "resolved" for m in xid.members.values())
    finally:
        await client.close()


async def test_bad_events_are_400_naming_the_field_and_unauthenticated_ones_401(tmp_path):
    svc, client = await started(tmp_path)
    try:
        structured = {**AUTH, "Content-Type": "application/cloudevents+json"}
        no_node = nvsentinel("x")
        del no_node["data"]["healthEvent"]["nodeName"]
        cases = [
            (structured, no_node, "data.healthEvent.nodeName"),
            (structured, {**nvsentinel("x"), "specversion": "0.3"}, "specversion"),
            (structured, {**nvsentinel("x"), "type": "com.example.unknown"}, "type"),
            ({**AUTH, "Content-Type": "application/json", "ce-specversion": "1.0", "ce-source": "s",
              "ce-time": "2026-12-06T04:40:00Z", "ce-type": "dev.alertd.gpu.health.v1"},
             {"node": "n", "check": "c", "healthy": False}, "ce-id"),
            ({**AUTH, "Content-Type": "application/json", "ce-specversion": "1.0", "ce-source": "s", "ce-id": "1",
              "ce-type": "dev.alertd.gpu.health.v1"}, {"node": "n", "check": "c", "healthy": False}, "ce-time"),
            ({**AUTH, "Content-Type": "application/json", "ce-specversion": "1.0", "ce-source": "s", "ce-id": "1",
              "ce-time": "2026-12-06T04:40:00Z", "ce-type": "dev.alertd.gpu.health.v1"},
             {"node": "n", "check": "c", "healthy": "no"}, "data.healthy"),
            ({**AUTH, "Content-Type": "application/json"}, nvsentinel("x"), "content-type"),
        ]
        for headers, body, field in cases:
            resp = await client.post(PATH, data=json.dumps(body), headers=headers)
            answer = await resp.json()
            assert (resp.status, answer.get("field")) == (400, field), answer
            assert field in answer["error"]
        batch = [nvsentinel("a"), {**nvsentinel("b"), "id": ""}]  # one bad event: nothing of the batch is stored
        resp = await client.post(PATH, data=json.dumps(batch),
                                 headers={**AUTH, "Content-Type": "application/cloudevents-batch+json"})
        assert (resp.status, (await resp.json())["field"]) == (400, "1.id")
        resp = await client.post(PATH, data=json.dumps(nvsentinel("x")),
                                 headers={"Content-Type": "application/cloudevents+json"})
        assert resp.status == 401
        assert await svc.store.count_pending_inbox() == 0 and not svc.engine.state.incidents
    finally:
        await client.close()
