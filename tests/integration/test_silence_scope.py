"""A silence made from an incident mutes that incident's alerts and nothing else on its nodes, through the real
Alertmanager (Debian prometheus-alertmanager): alerts go to its API v2 as Prometheus sends them (the labels
of deploy/prometheus/gpu-alerts.yml's rules on dcgm-exporter's series), it groups them and sends webhooks to
alertd, alertd folds a rack's heat into one fleet incident, and the silence made from that fleet must leave a
later Xid 79 on the same nodes audible."""
from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import parse_qs, quote, urlencode

import aiohttp
import pytest

from testkit import services
from testkit.browser import Browser, By
from tests.support.fixtures import require
from tests.integration.test_notify_alertmanager_flow import am_config
from testkit.notify_harness import Harness, wait_for
from testkit.process import ReservedPort
from testkit.webhooks import dcgm_labels

pytestmark = pytest.mark.services

NODES = [f"gpu-r7-{i:02d}" for i in range(6)]


def heat(node: str, gpu: int) -> dict[str, str]:
    return {"alertname": "GPUTemperatureHigh", "severity": "warning", **dcgm_labels("prod", node, gpu)}


def throttled(node: str, gpu: int) -> dict[str, str]:
    return {"alertname": "GPUClockEventThrottling", "severity": "warning", "clock_event_reasons": "64",
            **dcgm_labels("prod", node, gpu)}


def xid79(node: str, gpu: int) -> dict[str, str]:
    return {"alertname": "GPUXidError", "severity": "warning", "xid": "79", **dcgm_labels("prod", node, gpu)}


async def am_post(url: str, labels: list[dict[str, str]]) -> None:
    now = datetime.now(timezone.utc)
    body = [{"labels": lbl, "annotations": {"summary": f"{lbl['alertname']} on {lbl['node']}"},
             "generatorURL": "http://prometheus.example:9090/graph?g0.expr=x",
             "startsAt": (now - timedelta(minutes=1)).isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat()}
            for lbl in labels]
    async with aiohttp.ClientSession() as s:
        async with s.post(url + "/api/v2/alerts", json=body) as resp:
            assert resp.status == 200, await resp.text()


async def am_alerts(url: str, matcher: str) -> list[dict]:
    async with aiohttp.ClientSession() as s:
        async with s.get(url + "/api/v2/alerts?filter=" + quote(matcher)) as resp:
            assert resp.status == 200, await resp.text()
            found: list[dict] = await resp.json()
            return found


async def rack_heat(tmp_path: Path) -> tuple[Harness, services.RunningService, dict]:
    """alertd behind the real Alertmanager, and the rack's heat folded into one fleet incident."""
    am_port = ReservedPort()
    h = await Harness(tmp_path, alertmanager_url=am_port.url).start()
    cfg = tmp_path / "alertmanager.yml"
    cfg.write_text(am_config(str(h.client.make_url("/api/v1/alerts/alertmanager"))))
    try:
        am = require(services.start_alertmanager, cfg, tmp_path / "am", port=am_port)
    except BaseException:
        await h.stop()
        raise
    await am_post(am.url, [a(n, g) for n in NODES for g in (0, 1) for a in (heat, throttled)])

    async def fleet() -> dict | None:
        rows = [r for r in await h.incidents(status="open") if r["fleet"]]
        return rows[0] if rows and sorted(rows[0]["nodes"]) == NODES else None
    try:
        found = await wait_for(fleet, timeout=30)
    except BaseException:
        am.stop()
        await h.stop()
        raise
    assert found["signals"] == ["thermal"]
    return h, am, found


async def test_a_heat_silence_from_a_fleet_leaves_a_later_xid_79_audible(tmp_path):
    h, am, found = await rack_heat(tmp_path)
    try:

        # the preview: Alertmanager's own count of what the matchers select, and the fleet's node incidents
        resp = await h.client.get(f"/api/v1/incidents/{found['id']}/silence/preview")
        assert resp.status == 200, await resp.text()
        preview = await resp.json()
        assert preview["alertCount"] == 24 and preview["overlap"] == []
        assert {m["id"] for m in preview["incidents"]} <= set(found["children"]) and preview["incidents"]

        resp = await h.client.post(f"/api/v1/incidents/{found['id']}/silence?duration=4h")
        assert resp.status == 200, await resp.text()
        recorded = (await h.incident(found["id"]))["annotations"]["silence"]
        by_name = {m["name"]: m for m in recorded["matchers"]}
        assert by_name["alertname"]["value"] == "GPUClockEventThrottling|GPUTemperatureHigh"
        assert by_name["cluster"] == {"name": "cluster", "value": "prod", "isRegex": False, "isEqual": True}
        assert sorted(by_name["node"]["value"].replace("\\", "").split("|")) == NODES

        # the heat on the rack is muted in Alertmanager ...
        async def heat_suppressed() -> bool:
            got = await am_alerts(am.url, 'alertname="GPUTemperatureHigh"')
            return len(got) == 12 and all(a["status"]["state"] == "suppressed" for a in got)
        await wait_for(heat_suppressed, timeout=10)

        # ... and a GPU falling off the bus on one of its nodes is not: Alertmanager sends it, alertd opens it
        await am_post(am.url, [xid79(NODES[2], 3)])
        got = await wait_for(lambda: am_alerts(am.url, 'alertname="GPUXidError"'), timeout=10)
        assert got[0]["status"]["state"] == "active" and got[0]["status"]["silencedBy"] == []

        async def xid_incident() -> dict | None:
            rows = [r for r in await h.incidents() if 79 in (r.get("xids") or [])]
            return rows[0] if rows else None
        opened = await wait_for(xid_incident, timeout=15)
        assert opened["node"] == NODES[2] or NODES[2] in opened["nodes"]
    finally:
        am.stop()
        await h.stop()


async def test_the_silence_preview_reads_at_desktop_and_phone_widths(tmp_path):
    """Chromium at 1400 px and 390 px: the preview fits the width, and its button makes the silence. With
    ALERTD_UI_SCREENSHOTS=DIR the two pages are saved there (docs/screenshots/silence-preview*.png)."""
    h, am, found = await rack_heat(tmp_path)
    browser = Browser.start()
    try:
        d = browser.driver
        url = str(h.client.make_url(f"/ui/incidents/{found['id']}"))
        await browser.get(url)
        await browser.wait(lambda: d.find_elements(By.LINK_TEXT, "Silence 4h…"), what="the Silence buttons")
        for width, name in ((1400, "silence-preview.png"), (390, "silence-preview-phone.png")):
            await browser.do(d.set_window_size, width, 1000)
            await browser.get(url + "?preview=4h")
            section = await browser.wait(lambda: d.find_elements(By.ID, "silence-preview"), what="the preview")
            text = section[0].text
            assert "They match 24 alerts Alertmanager holds now" in text and "alertname=~" in text, text
            fits = await browser.do(d.execute_script, """
                const s = document.getElementById('silence-preview'), r = s.getBoundingClientRect();
                const b = s.querySelector('button').getBoundingClientRect();
                return r.right <= window.innerWidth + 1 && b.right <= window.innerWidth + 1 && b.width > 0;""")
            assert fits, f"the preview overflows {width} px"
            if target := os.environ.get("ALERTD_UI_SCREENSHOTS"):
                inner = await browser.do(d.execute_script, "return window.innerWidth")
                shot = await browser.do(d.execute_cdp_cmd, "Page.captureScreenshot", {
                    "format": "png", "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": inner, "height": 1000, "scale": 1}})
                (Path(target) / name).write_bytes(base64.b64decode(shot["data"]))
        await browser.do(lambda: d.find_element(By.CSS_SELECTOR, "#silence-preview button").click())
        main = "const m = document.querySelector('main'); return m ? m.innerText : '';"  # one read: no stale element
        await browser.wait(lambda: "Done: silenced for 4h" in d.execute_script(main), what="the silence made")
        assert (await h.incident(found["id"]))["annotations"]["silence"]["matchers"][0]["name"] == "alertname"
    finally:
        browser.quit()
        am.stop()
        await h.stop()


async def test_slack_asks_before_a_silence_that_mutes_another_jobs_incident(tmp_path, slack):
    """Two jobs on one node hit Xid 13 (each job's own incident, keyed by its pod). A silence of the first,
    whose pod holds two GPUs, matches the node's Xid 13s: the second job's too. Slack asks the clicker first,
    through the payload's response_url, and the silence is made only when the clicker confirms."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from testkit.notify_harness import top_messages, xid_alert
    from testkit.webhooks import fingerprint, webhook

    answers: list[dict] = []

    async def response_url(request: web.Request) -> web.Response:
        answers.append(await request.json())
        return web.json_response({"ok": True})
    app = web.Application()
    app.router.add_post("/response", response_url)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    am_cfg = tmp_path / "am.yml"
    am_cfg.write_text("route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n")
    am = require(services.start_alertmanager, am_cfg, tmp_path / "am")
    h = await Harness(tmp_path, slack=slack, alertmanager_url=am.url).start()
    try:
        alerts = []
        for gpu, pod in ((0, "pretrain-a-0"), (1, "pretrain-a-0"), (2, "finetune-b-0")):
            a = xid_alert("gpu-node-7", gpu, code=13)
            a["labels"].update(namespace="ml-research", pod=pod, severity="warning")
            a["fingerprint"] = fingerprint(a["labels"])
            alerts.append(a)
        await h.post(webhook(alerts, cluster="prod", node="gpu-node-7"))

        async def two() -> dict | None:
            rows = await h.incidents()
            return {r["pod"]: r for r in rows} if len(rows) == 2 else None
        by_pod = await wait_for(two)
        first, second = by_pod["pretrain-a-0"]["id"], by_pod["finetune-b-0"]["id"]
        await wait_for(lambda: top_messages(slack, "#gpu-alerts") or top_messages(slack, "#ml-platform-alerts"))

        async def click(action_id: str) -> None:
            body = Harness.action_body(action_id, first)
            doc = json.loads(parse_qs(body.decode())["payload"][0])
            doc["response_url"] = str(server.make_url("/response"))
            body = urlencode({"payload": json.dumps(doc)}).encode()
            resp = await h.client.post("/api/v1/slack/actions", data=body, headers=Harness.signed(body))
            assert resp.status == 200
            await h.actions_idle()

        await click("alertd_silence_4h")
        (asked,) = answers
        assert asked["response_type"] == "ephemeral" and second in asked["text"]
        buttons = [e for b in asked["blocks"] if b["type"] == "actions" for e in b["elements"]]
        assert [b["action_id"] for b in buttons] == ["alertd_silenceanyway_4h"] and buttons[0]["value"] == first
        assert "silence" not in (await h.incident(first))["annotations"]
        async with aiohttp.ClientSession() as session:  # and nothing was made in Alertmanager
            async with session.get(am.url + "/api/v2/silences") as resp:
                assert await resp.json() == []

        await click("alertd_silenceanyway_4h")
        made = (await h.incident(first))["annotations"]["silence"]
        assert {m["name"]: m["value"] for m in made["matchers"]} == {
            "alertname": "GPUXidError", "xid": "13", "node": "gpu-node-7", "cluster": "prod"}
        audit = [(e.action, e.outcome) for e in await h.store.list_audit()]
        assert ("silence 4h", f"refused: the silence would also mute {second}: confirm to silence them too") in audit
        assert ("silence 4h", "ok") in audit
    finally:
        await h.stop()
        am.stop()
        await server.close()
