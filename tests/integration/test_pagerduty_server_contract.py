"""The PagerDuty test server keeps the Events API v2 contract, driven with plain aiohttp as alertd drives
PagerDuty."""
from __future__ import annotations

import re
import time

import pytest

from testkit.pagerduty_server import PagerDutyTestServer


def trigger(dedup_key: str | None = "incident-42", **payload) -> dict:
    event = {
        "routing_key": PagerDutyTestServer.ROUTING_KEY,
        "event_action": "trigger",
        "payload": {"summary": "Xid 79 on gpu-node-1", "source": "gpu-node-1", "severity": "critical",
                    "timestamp": "2025-01-02T03:04:05.678+0000", "component": "gpu", "group": "prod",
                    "class": "xid", "custom_details": {"xid": 79, "gpu": "3"}, **payload},
        "links": [{"href": "https://alertd.example/incidents/42", "text": "incident"}],
    }
    if dedup_key is not None:
        event["dedup_key"] = dedup_key
    return event


def follow_up(action: str, dedup_key: str = "incident-42") -> dict:
    return {"routing_key": PagerDutyTestServer.ROUTING_KEY, "event_action": action, "dedup_key": dedup_key}


async def send(session, url, body) -> tuple[int, dict]:
    async with session.post(url, json=body) as resp:
        return resp.status, await resp.json()


async def test_pagerduty_trigger_accepted(pd, session):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v2/enqueue", pd.url)
    status, body = await send(session, pd.url, trigger())
    assert status == 202
    assert body == {"status": "success", "message": "Event processed", "dedup_key": "incident-42"}
    assert pd.events[-1]["payload"]["summary"] == "Xid 79 on gpu-node-1"
    assert pd.status_of("incident-42") == "triggered"


async def test_pagerduty_trigger_without_dedup_key_gets_one(pd, session):
    status, body = await send(session, pd.url, trigger(dedup_key=None))
    assert status == 202 and body["dedup_key"] and pd.status_of(body["dedup_key"]) == "triggered"


async def test_pagerduty_missing_severity_is_rejected(pd, session):
    event = trigger()
    del event["payload"]["severity"]
    status, body = await send(session, pd.url, event)
    assert status == 400
    assert body == {"status": "invalid event", "message": "Event object is invalid",
                    "errors": ["'payload.severity' is missing or blank"]}
    assert pd.events == [] and pd.rejected[-1][0] == 400 and pd.alerts == {}


@pytest.mark.parametrize("mutate, needle", [
    (lambda e: e.update(routing_key="short"), "Length of 'routing_key'"),
    (lambda e: e.update(routing_key="X" * 32), "Invalid routing key"),
    (lambda e: e.update(event_action="escalate"), "'event_action'"),
    (lambda e: e["payload"].update(severity="high"), "'payload.severity'"),
    (lambda e: e["payload"].update(summary="s" * 1025), "'payload.summary' is too long"),
    (lambda e: e["payload"].pop("source"), "'payload.source' is missing"),
    (lambda e: e["payload"].update(timestamp="yesterday"), "'payload.timestamp'"),
    (lambda e: e["payload"].update(custom_details="text"), "'payload.custom_details'"),
    (lambda e: e.update(dedup_key="k" * 256), "'dedup_key' is too long"),
    (lambda e: e.update(links=[{"text": "no href"}]), "'links[0].href'"),
    (lambda e: e.update(images=[{"href": "https://x"}]), "'images[0].src'"),
    (lambda e: e.pop("payload"), "'payload' is missing"),
])
async def test_pagerduty_rejects_invalid_events(pd, session, mutate, needle):
    event = trigger()
    mutate(event)
    status, body = await send(session, pd.url, event)
    assert status == 400 and body["status"] == "invalid event"
    assert any(needle in e for e in body["errors"]), body


async def test_pagerduty_limits_are_inclusive(pd, session):
    status, _ = await send(session, pd.url, trigger(dedup_key="k" * 255, summary="s" * 1024))
    assert status == 202


async def test_pagerduty_follow_ups_need_dedup_key_and_non_json_is_rejected(pd, session):
    status, body = await send(session, pd.url, {"routing_key": PagerDutyTestServer.ROUTING_KEY,
                                             "event_action": "resolve"})
    assert status == 400 and "'dedup_key' is missing or blank" in body["errors"]
    async with session.post(pd.url, data="not json", headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 400


async def test_pagerduty_lifecycle_resolve_then_trigger_opens_a_new_alert(pd, session):
    for event in (trigger(), trigger(), follow_up("acknowledge"), trigger(), follow_up("resolve")):
        status, _ = await send(session, pd.url, event)
        assert status == 202
    [first] = pd.alerts["incident-42"]
    assert first["status"] == "resolved"
    assert [h["action"] for h in first["history"]] == ["trigger", "trigger", "acknowledge", "trigger", "resolve"]
    assert [h["status"] for h in first["history"]] == ["triggered", "triggered", "acknowledged", "acknowledged",
                                                       "resolved"]
    status, _ = await send(session, pd.url, trigger())
    assert status == 202
    assert len(pd.alerts["incident-42"]) == 2
    assert pd.alerts["incident-42"][1]["status"] == "triggered" and pd.open_alert("incident-42") is not None
    assert pd.alerts["incident-42"][0]["id"] != pd.alerts["incident-42"][1]["id"]


async def test_pagerduty_follow_up_without_open_alert_is_dropped(pd, session):
    status, body = await send(session, pd.url, follow_up("resolve", "never-triggered"))
    assert status == 202 and body["dedup_key"] == "never-triggered"
    assert pd.alerts == {} and pd.dropped[-1]["dedup_key"] == "never-triggered"


async def test_pagerduty_fault_injection(pd, session):
    pd.fail_next(status=429)
    pd.fail_next(status=500, count=2)
    assert (await send(session, pd.url, trigger()))[0] == 429
    assert (await send(session, pd.url, trigger()))[0] == 500
    assert (await send(session, pd.url, trigger()))[0] == 500
    assert pd.events == []
    assert (await send(session, pd.url, trigger()))[0] == 202
    pd.delay = 0.2
    started = time.monotonic()
    await send(session, pd.url, follow_up("resolve"))
    assert time.monotonic() - started >= 0.2
    assert len(pd.requests) == 5
