"""Reconciliation takes in the alerts Alertmanager holds for alertd but never sent (alertd/alertmanager/reconcile.py).

The alert is a real one: the first firing GPUXidError the real Alertmanager delivered in
tests/fixtures/alertmanager-runs/by-node.jsonl, listed the way ``GET /api/v2/alerts`` lists an alert
(api/v2 gettableAlert: receivers, status.state, updatedAt, endsAt as Prometheus set it).
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from alertd.alertmanager.reconcile import answer_from, as_webhook, to_take
from alertd.alertmanager.reconcile_loop import Reconciler
from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.authoring.replay import Recording, as_json, replay
from alertd.authoring.virtual import build_router
from alertd.core.model import HELD_BY, parse_instant
from alertd.engine.pipeline import Engine
from alertd.receive.payload import encode_webhook, parse_notification
from alertd.rules.ruleset import load_rules
from alertd.rules.shipped import SHIPPED_RULES

RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "alertmanager-runs" / "by-node.jsonl"
HELD_AFTER = timedelta(minutes=1)


def recorded_xid() -> tuple[datetime, dict[str, Any]]:
    """The first webhook carrying a firing GPUXidError, and that alert."""
    for line in RECORDING.read_text().splitlines():
        doc = json.loads(line)
        for alert in doc["body"]["alerts"]:
            if alert["labels"]["alertname"] == "GPUXidError" and alert["status"] == "firing":
                return parse_instant(doc["received_at"]), alert
    raise AssertionError("no firing GPUXidError in the recording")


def listed(alert: dict[str, Any], *, state: str = "active", receiver: str = "alertd", **status: list[str]) -> dict:
    """The alert as GET /api/v2/alerts lists it."""
    starts = parse_instant(alert["startsAt"])
    return {**{k: v for k, v in alert.items() if k != "status"},
            "endsAt": (starts + timedelta(minutes=4)).isoformat().replace("+00:00", "Z"),
            "updatedAt": alert["startsAt"], "receivers": [{"name": receiver}],
            "status": {"state": state, "silencedBy": status.get("silencedBy", []),
                       "inhibitedBy": status.get("inhibitedBy", [])}}


def webhook(alerts: list[dict[str, Any]], receiver: str = "alertd") -> dict[str, Any]:
    return {"version": "4", "status": "firing", "receiver": receiver, "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "", "groupKey": "", "truncatedAlerts": 0, "alerts": alerts}


def test_only_what_alertmanager_would_send_to_alertd_is_a_candidate():
    _, xid = recorded_xid()
    silenced = dict(xid, fingerprint="1111111111111111")
    inhibited = dict(xid, fingerprint="2222222222222222")
    elsewhere = dict(xid, fingerprint="3333333333333333")
    unprocessed = dict(xid, fingerprint="4444444444444444")
    answer = answer_from([listed(xid), listed(silenced, state="suppressed", silencedBy=["5f0e7c9a"]),
                          listed(inhibited, state="suppressed", inhibitedBy=["a0b1c2d3e4f5a6b7"]),
                          listed(elsewhere, receiver="alertd-health"), listed(unprocessed, state="unprocessed")],
                         {"uptime": "2026-12-02T08:00:00.000Z"}, frozenset({"alertd"}))
    assert [a["fingerprint"] for a in answer.active] == [xid["fingerprint"]]
    assert len(answer.fingerprints) == 5  # every listed alert still counts as held, for resolving


def test_taken_once_old_enough_and_only_when_alertd_holds_no_member_of_it():
    _, xid = recorded_xid()
    starts = parse_instant(xid["startsAt"])
    receivers = frozenset({"alertd"})
    answer = answer_from([listed(xid)], {}, receivers)
    assert to_take([answer], (), starts + timedelta(seconds=30), HELD_AFTER) == []  # group_wait not over yet
    assert [a["fingerprint"] for a in to_take([answer, answer], (), starts + timedelta(seconds=90), HELD_AFTER)] \
        == [xid["fingerprint"]]  # an HA pair lists it twice: taken once

    engine = Engine(load_rules([str(SHIPPED_RULES)]))
    engine.ingest(parse_notification(webhook([xid]), starts).alerts, starts)
    later = starts + timedelta(minutes=3)
    assert to_take([answer], engine.state.incidents.values(), later, HELD_AFTER) == []  # came by webhook

    resolved = dict(xid, status="resolved", endsAt=(starts + timedelta(minutes=2)).isoformat())
    engine.ingest(parse_notification(webhook([resolved]), later).alerts, later)
    assert to_take([answer], engine.state.incidents.values(), later, HELD_AFTER) == []  # never brought back

    again = dict(xid, startsAt=(starts + timedelta(minutes=2, seconds=30)).isoformat().replace("+00:00", "Z"))
    taken = to_take([answer_from([listed(again)], {}, receivers)], engine.state.incidents.values(),
                    later + timedelta(minutes=2), HELD_AFTER)
    assert [a["startsAt"] for a in taken] == [again["startsAt"]]  # a new occurrence of the same series


def test_the_heartbeat_is_never_taken_from_the_api():
    received_at, _ = recorded_xid()
    watchdog = next(a for line in RECORDING.read_text().splitlines() for a in json.loads(line)["body"]["alerts"]
                    if a["labels"]["alertname"] == "Watchdog")
    answer = answer_from([listed(watchdog)], {}, frozenset({"alertd"}))
    engine = Engine(load_rules([str(SHIPPED_RULES)]))
    assert to_take([answer], (), received_at + timedelta(hours=1), HELD_AFTER, engine.heartbeats) == []


def test_a_taken_alert_pages_and_its_later_webhook_is_a_redelivery():
    """Taken from the API a minute and a half after it fired, then the group's flush brings the same alert:
    one member, marked, one page; the webhook's copy is dropped like any redelivery."""
    received_at, xid = recorded_xid()
    starts = parse_instant(xid["startsAt"])
    polled = starts + timedelta(seconds=90)
    taken = to_take([answer_from([listed(xid)], {}, frozenset({"alertd"}))], (), polled, HELD_AFTER)
    held = as_webhook(taken, HELD_BY, "http://alertmanager-by-node-1.example:9093")
    rules = load_rules([str(SHIPPED_RULES)])
    flush = received_at + timedelta(minutes=2)
    report = as_json(replay(Recording(webhooks=[(polled, held), (flush, webhook([xid]))]), rules,
                            router=build_router(rules)))
    assert report["summary"]["duplicates"] == 1
    [incident] = report["incidents"]
    [member] = incident["members"]
    assert member["viaApi"] is True and member["fingerprint"] == xid["fingerprint"]
    assert any("taken from Alertmanager's API" in e.get("text", "") for e in incident["timeline"]), incident["timeline"]
    pages = [n for n in report["notifications"]
             if n["sent"] and n["kind"] == "page" and n["target"].startswith("pagerduty")]
    assert len(pages) == 1 and parse_instant(pages[0]["due"]) < flush


class Host:
    """The service as reconciliation sees it: an engine (None on a replica that does not lead), a clock, and
    the inbox, which here only records what enters it."""

    def __init__(self, engine: Engine | None, now: datetime, settings: AlertmanagerSettings):
        self.engine, self.now, self.bodies = engine, now, []
        self.cfg = SimpleNamespace(alertmanager=settings)

    @property
    def clock(self):
        return lambda: self.now

    async def receive(self, body: bytes, alerts: int, received_at: datetime | None = None) -> int:
        self.bodies.append(json.loads(body))
        return len(self.bodies)

    async def receive_alerts(self, alerts) -> int:
        return await self.receive(encode_webhook([a.to_wire() for a in alerts], alerts[0].receiver), len(alerts))


async def test_the_leader_takes_a_held_alert_in_once_through_the_inbox():
    _, xid = recorded_xid()
    starts = parse_instant(xid["startsAt"])

    async def alerts(_: web.Request) -> web.Response:
        return web.json_response([listed(xid)])

    async def status(_: web.Request) -> web.Response:
        return web.json_response({"uptime": "2026-12-02T08:00:00.000Z"})

    app = web.Application()
    app.router.add_get("/api/v2/alerts", alerts)
    app.router.add_get("/api/v2/status", status)
    async with TestServer(app, host="127.0.0.1") as am:
        settings = AlertmanagerSettings(urls=(str(am.make_url("")).rstrip("/"),))
        replica = Reconciler(Host(None, starts + timedelta(minutes=2), settings), settings)
        leader = Reconciler(Host(Engine(load_rules([str(SHIPPED_RULES)])), starts + timedelta(minutes=2), settings),
                            settings)
        try:
            assert await replica.reconcile_once() == 0 and replica.svc.bodies == []  # only the engine leader acts
            await leader.reconcile_once()
            await leader.reconcile_once()  # offered once: the inbox would drop it anyway
        finally:
            await replica.close()
            await leader.close()
    [body] = leader.svc.bodies
    assert body["receiver"] == HELD_BY and [a["fingerprint"] for a in body["alerts"]] == [xid["fingerprint"]]
    assert leader.taken == 1
