"""The fleet simulation's Alertmanager emulation against the real Alertmanager, on short timers.

The same alert timeline goes to a real Alertmanager (POST /api/v2/alerts, as
Prometheus sends) and to bench.fleetsim.alertmanager.Dispatcher; the webhooks
the real one sends are captured on a loopback server. Per notification, in
order: the group, the alerts and their status, the timestamps as written, and
the time it went out (within a tolerance for HTTP and timer jitter).
"""
from __future__ import annotations

import asyncio
import random
import time
from datetime import datetime, timezone

import aiohttp
import pytest
from aiohttp import web

from bench.fleetsim.alertmanager import Dispatcher, RouteConfig, rfc3339
from bench.fleetsim.labelset import fingerprint
from bench.fleetsim.prometheus import Instance
from bench.fleetsim.rules import AlertRule
from testkit import services
from tests.support.fixtures import require
from testkit.loopback import LoopbackServer

pytestmark = pytest.mark.services

TOLERANCE = 0.6  # seconds between the real and the emulated send time
ROUTE = RouteConfig("short", ("alertname", "cluster"), group_wait=1.0, group_interval=3.0, repeat_interval=10.0,
                    dup_probability=0.0, external_url="")
RULE = AlertRule("x", "g", "vector(1)")

# (at, alertname, node, event, starts_offset): the timeline, seconds after the start.
TIMELINE = [
    (0.0, "SimXid", "n1", "fire", 0.0),
    (0.3, "SimXid", "n2", "fire", 0.0),
    (2.0, "SimXid", "n3", "fire", 0.0),
    (3.0, "SimShort", "n9", "fire", 0.0),     # fires and resolves inside group_wait: never sent
    (3.5, "SimShort", "n9", "resolve", 0.0),
    (4.6, "SimXid", "n1", "resolve", 0.0),    # sent as resolved at the next group interval
    (7.5, "SimXid", "n4", "fire", 0.0),       # fires and resolves between two flushes:
    (8.3, "SimXid", "n4", "resolve", 0.0),    # rides along as resolved with the firing ones
    (8.6, "SimXid", "n1", "resend", 0.0),     # Prometheus sends the resolved n1 again: back in the group
    (12.0, "SimOld", "n5", "fire", -60.0),    # started a minute ago: a new group flushes at once
]
END = 25.0  # the repeat_interval (10 s) sends the unchanged SimXid group again at ~22 s


class Capture(LoopbackServer):
    url_path = "/hook"

    def __init__(self) -> None:
        super().__init__()
        self.t0 = 0.0
        self.got: list[tuple[float, dict]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        return app

    async def _hook(self, request: web.Request) -> web.Response:
        self.got.append((time.monotonic() - self.t0, await request.json()))
        return web.Response(text="ok")


def labels(name: str, node: str) -> dict[str, str]:
    return {"alertname": name, "cluster": "c1", "node": node, "severity": "warning"}


def am_config(url: str) -> str:
    return f"""
route:
  receiver: sim
  group_by: [alertname, cluster]
  group_wait: 1s
  group_interval: 3s
  repeat_interval: 10s
receivers:
  - name: sim
    webhook_configs:
      - url: {url}
        send_resolved: true
        max_alerts: 0
"""


def emulate(start: datetime, posted: list[tuple[float, str, str, str, float]]) -> list[tuple[float, dict]]:
    instances: dict[tuple[str, str], Instance] = {}
    puts = []
    for at, name, node, event, offset in posted:
        lbl = labels(name, node)
        if event == "fire":
            inst = Instance(RULE, lbl, fingerprint(lbl), {"summary": node}, at + offset, at + offset, None, "P")
            instances[(name, node)] = inst
            puts.append((at, inst, False))
        else:
            inst = instances[(name, node)]
            if event == "resolve":
                inst.resolved_at = at
            puts.append((at, inst, True))
    d = Dispatcher(ROUTE, start, random.Random(0), cleanup_offset=0.0)
    return [(f.at, f.body) for f in d.run(puts, END)]


def shape(body: dict) -> tuple:
    return (body["groupKey"], body["status"], body["groupLabels"], body["commonLabels"], body["truncatedAlerts"],
            [(a["fingerprint"], a["status"], a["labels"]["node"], a["startsAt"], a["endsAt"]) for a in body["alerts"]])


async def post(session: aiohttp.ClientSession, url: str, start: datetime, at: float, name: str, node: str,
               event: str, offset: float, sent: dict[tuple[str, str], tuple[str, str]]) -> None:
    """As Prometheus sends: a firing alert valid for an hour; resolved with endsAt; a resend repeats the last."""
    if event == "resend":
        starts, ends = sent[(name, node)]
    elif event == "resolve":
        starts, ends = sent[(name, node)][0], rfc3339(start, at)
    else:
        starts, ends = rfc3339(start, at + offset), rfc3339(start, at + 3600)
    sent[(name, node)] = (starts, ends)
    alert = {"labels": labels(name, node), "annotations": {"summary": node}, "generatorURL": "",
             "startsAt": starts, "endsAt": ends}
    async with session.post(url + "/api/v2/alerts", json=[alert]) as resp:
        assert resp.status == 200, await resp.text()


async def test_emulated_dispatcher_sends_what_alertmanager_sends(tmp_path):
    capture = Capture()
    await capture.start()
    try:
        cfg = tmp_path / "alertmanager.yml"
        cfg.write_text(am_config(capture.url))
        am = require(services.start_alertmanager, cfg, tmp_path / "am")
        try:
            posted = []
            sent: dict[tuple[str, str], tuple[str, str]] = {}
            async with aiohttp.ClientSession() as session:
                now = datetime.now(timezone.utc)
                start = now.replace(microsecond=now.microsecond // 1000 * 1000)
                capture.t0 = time.monotonic()
                for at, name, node, event, offset in TIMELINE:
                    await asyncio.sleep(max(0.0, at - (time.monotonic() - capture.t0)))
                    sent_at = round(time.monotonic() - capture.t0, 3)
                    await post(session, am.url, start, sent_at, name, node, event, offset, sent)
                    posted.append((sent_at, name, node, event, offset))
                await asyncio.sleep(max(0.0, END - (time.monotonic() - capture.t0)))
        finally:
            am.stop()
    finally:
        await capture.stop()

    real = sorted(capture.got, key=lambda x: x[0])
    emulated = emulate(start, posted)
    assert [shape(b) for _, b in real] == [shape(b) for _, b in emulated], (
        "real:\n" + "\n".join(f"{t:6.2f} {shape(b)}" for t, b in real)
        + "\nemulated:\n" + "\n".join(f"{t:6.2f} {shape(b)}" for t, b in emulated))
    # The flushes are relative to each group's creation, so compare spacing from the first notification.
    r0, e0 = real[0][0], emulated[0][0]
    for (rt, rb), (et, _) in zip(real, emulated):
        assert abs((rt - r0) - (et - e0)) < TOLERANCE, f"{rb['groupKey']}: real {rt - r0:.2f}s, emulated {et - e0:.2f}s"
    assert len(real) >= 5  # the timeline exercised group_wait, group_interval, resolved, repeat and an old alert
