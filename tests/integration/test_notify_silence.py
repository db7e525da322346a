"""Silence and Unsilence buttons against the real Alertmanager (Debian prometheus-alertmanager)."""
from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import aiohttp
import pytest

from alertd.core.model import parse_iso
from testkit.notify_harness import Harness, hook, top_messages, wait_for, xid_alert
from testkit import services
from tests.support.fixtures import require

pytestmark = pytest.mark.services

AM_CONFIG = """
route:
  receiver: none
receivers:
  - name: none
"""


@pytest.fixture
def alertmanager(tmp_path):
    cfg = tmp_path / "alertmanager.yml"
    cfg.write_text(AM_CONFIG)
    am = require(services.start_alertmanager, cfg, tmp_path / "am")
    yield am
    am.stop()


async def am_get(url: str) -> object:
    async with aiohttp.ClientSession() as s:
        async with s.get(url) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()


async def am_post_alert(url: str, labels: dict) -> None:
    now = datetime.now(timezone.utc)
    body = [{"labels": labels, "startsAt": now.isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat()}]
    async with aiohttp.ClientSession() as s:
        async with s.post(url + "/api/v2/alerts", json=body) as resp:
            assert resp.status == 200, await resp.text()


def matcher(silence: dict, name: str) -> dict | None:
    return next((m for m in silence["matchers"] if m["name"] == name), None)


async def test_silence_button_mutes_the_node_and_unsilence_expires_it(tmp_path, slack, alertmanager):
    h = await Harness(tmp_path, slack=slack, alertmanager_url=alertmanager.url).start()
    try:
        alert = xid_alert("gpu-node-7", 3)
        uuid = alert["labels"]["UUID"]
        await h.post(hook(alert, node="gpu-node-7"))
        await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
        inc = await h.one_incident()

        assert await h.click("alertd_silence_4h", inc["id"], user=("U0ANA", "ana")) == 200
        await h.actions_idle()
        detail = await h.incident(inc["id"])
        recorded = detail["annotations"]["silence"]
        assert recorded["createdBy"] == "ana (slack:U0ANA)"
        ends = parse_iso(recorded["endsAt"])
        assert timedelta(hours=3, minutes=59) < ends - datetime.now(timezone.utc) <= timedelta(hours=4)
        assert any(e["kind"] == "silenced" and e["actor"] == "ana (slack:U0ANA)" for e in detail["timeline"])

        # Alertmanager lists it, active, with the node matcher and the GPU (a one-GPU incident)
        silences = await am_get(alertmanager.url + "/api/v2/silences")
        (silence,) = [s for s in silences if s["id"] == recorded["id"]]
        assert silence["status"]["state"] == "active"
        assert matcher(silence, "node") == {"name": "node", "value": "gpu-node-7", "isRegex": False, "isEqual": True}
        assert matcher(silence, "UUID")["value"] == uuid
        assert silence["createdBy"] == "ana (slack:U0ANA)" and inc["id"] in silence["comment"]

        # an alert from that node and GPU is suppressed; another node's is not
        labels = {"alertname": "GPUXidError", "node": "gpu-node-7", "UUID": uuid, "cluster": "prod", "xid": "79"}
        await am_post_alert(alertmanager.url, labels)
        await am_post_alert(alertmanager.url, {**labels, "node": "gpu-node-8"})

        async def states():
            alerts = await am_get(alertmanager.url + "/api/v2/alerts?filter=" + quote('alertname="GPUXidError"'))
            return {a["labels"]["node"]: a["status"] for a in alerts} if len(alerts) == 2 else None
        got = await wait_for(states)
        assert got["gpu-node-7"]["state"] == "suppressed" and recorded["id"] in got["gpu-node-7"]["silencedBy"]
        assert got["gpu-node-8"]["state"] == "active"
        silenced = await am_get(alertmanager.url + "/api/v2/alerts?silenced=true&active=false&inhibited=false")
        assert [a["labels"]["node"] for a in silenced] == ["gpu-node-7"]

        # the message says so and offers Unsilence
        ts = top_messages(slack, "#gpu-oncall")[0]["ts"]

        def buttons():
            return [e["action_id"] for b in slack.messages["#gpu-oncall"][ts]["blocks"] if b["type"] == "actions"
                    for e in b["elements"]]
        await wait_for(lambda: "alertd_unsilence" in buttons())
        assert "Silenced until" in json.dumps(slack.messages["#gpu-oncall"][ts]["blocks"])

        # Unsilence: the silence expires and the node's alert is active again
        assert await h.click("alertd_unsilence", inc["id"], user=("U0BO", "bo")) == 200
        await h.actions_idle()
        after = await am_get(alertmanager.url + f"/api/v2/silence/{recorded['id']}")
        assert after["status"]["state"] == "expired"
        detail = await h.incident(inc["id"])
        assert "silence" not in detail["annotations"]
        assert any(e["kind"] == "silence_removed" and e["actor"] == "bo (slack:U0BO)" for e in detail["timeline"])
        got = await wait_for(states)
        assert got["gpu-node-7"]["state"] == "active"
        await wait_for(lambda: "alertd_silence_1h" in buttons())
    finally:
        await h.stop()


async def test_node_level_incident_is_silenced_by_node_only(tmp_path, slack, alertmanager):
    h = await Harness(tmp_path, slack=slack, alertmanager_url=alertmanager.url).start()
    try:
        await h.post(hook(xid_alert("gpu-node-9", 0), xid_alert("gpu-node-9", 1), node="gpu-node-9"))
        inc = await wait_for(lambda: h.incidents())
        await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
        assert await h.click("alertd_silence_1h", inc[0]["id"]) == 200
        await h.actions_idle()
        sid = (await h.incident(inc[0]["id"]))["annotations"]["silence"]["id"]
        silence = await am_get(alertmanager.url + f"/api/v2/silence/{sid}")
        # two GPUs: the node, no UUID; the fault's alertname and Xid, not everything else on the node
        assert {m["name"] for m in silence["matchers"]} == {"alertname", "xid", "node", "cluster"}
        # silencing again replaces the silence: the old one expires
        assert await h.click("alertd_silence_24h", inc[0]["id"]) == 200
        await h.actions_idle()
        new = (await h.incident(inc[0]["id"]))["annotations"]["silence"]["id"]
        assert new != sid
        assert (await am_get(alertmanager.url + f"/api/v2/silence/{sid}"))["status"]["state"] == "expired"
    finally:
        await h.stop()


async def test_alertmanager_down_is_reported_not_recorded(tmp_path, slack):
    h = await Harness(tmp_path, slack=slack, alertmanager_url="http://127.0.0.1:9").start()
    try:
        await h.post(hook(xid_alert("n1", 0)))
        inc = await h.one_incident()
        assert await h.click("alertd_silence_1h", inc["id"]) == 200
        await h.actions_idle()
        await asyncio.sleep(0.1)
        assert "silence" not in (await h.incident(inc["id"]))["annotations"]
    finally:
        await h.stop()
