"""The incident page at 3 a.m.: the action in words, the catalog's investigate text, the runbook as a link,
which reasons throttle the clocks, a hot rack's temperatures and advice; resolve asks first; no silence
buttons that can only fail."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from testkit.notify_harness import Harness, hook, wait_for, xid_alert
from testkit.webhooks import gpu_alert

ACTION_79 = "Drain and reboot the node (often a power cycle); save dmesg and the BMC log first."


async def press(h: Harness, incident_id: str, action: str):
    origin = str(h.client.make_url("")).rstrip("/")
    return await h.client.post(f"/ui/incidents/{incident_id}/action", data={"action": action},
                               headers={"Origin": origin}, allow_redirects=False)


async def test_the_page_says_what_to_do_in_words(tmp_path):
    h = await Harness(tmp_path).start()
    try:
        await h.post(hook(xid_alert("gpu-node-3", 2), node="gpu-node-3"))
        inc = await h.one_incident()
        page = await (await h.client.get(f"/ui/incidents/{inc['id']}")).text()
        assert ACTION_79 in page and ">reboot_node<" not in page
        assert "Before rebooting save dmesg (PCIe AER and NVRM lines) and the BMC event log" in page
        assert f'<a href="{h.svc.cfg.runbook_base_url}xid-hardware.md" rel="noreferrer">xid-hardware</a>' in page
        assert "Silence 1h" not in page and 'value="silence-' not in page  # no alertmanager.url: nothing to ask
    finally:
        await h.stop()


async def test_resolve_asks_before_it_resolves(tmp_path):
    h = await Harness(tmp_path).start()
    try:
        await h.post(hook(xid_alert("gpu-node-4", 1), node="gpu-node-4"))
        inc = await h.one_incident()
        resp = await press(h, inc["id"], "confirm-resolve")
        assert resp.status == 303 and resp.headers["Location"].endswith("?confirm=resolve")
        assert (await h.incident(inc["id"]))["status"] != "resolved"  # the first press changes nothing
        page = await (await h.client.get(resp.headers["Location"])).text()
        assert "Yes, resolve" in page and 'value="resolve"' in page
        resp = await press(h, inc["id"], "resolve")
        assert resp.headers["Location"].endswith("?done=resolved")
    finally:
        await h.stop()


async def test_a_throttling_incident_says_which_reason(tmp_path):
    h = await Harness(tmp_path).start()
    try:
        starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=1)
        alert = gpu_alert("prod", "gpu-node-5", 0, kind=5, starts_at=starts, extra={"clock_event_reasons": "96"})
        await h.post(hook(alert, node="gpu-node-5"))
        inc = await h.one_incident()
        page = await (await h.client.get(f"/ui/incidents/{inc['id']}")).text()
        assert "Throttled by</dt><dd>sw thermal slowdown, hw thermal slowdown</dd>" in page, inc["title"]
    finally:
        await h.stop()


async def test_a_hot_rack_says_its_temperatures_and_what_to_do(tmp_path):
    from testkit.webhooks import fingerprint
    h = await Harness(tmp_path).start()
    try:
        starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=6)
        for n in range(12):
            node = f"gpu-r07-n{n:02d}"
            alerts = []
            for gpu in range(8):
                hot = gpu_alert("prod", node, gpu, kind=4, starts_at=starts, extra={"label_rack": "r07"})
                hot["annotations"]["temperature"] = str(86 + (n + gpu) % 9)  # as GPUTemperatureHigh sends it
                throttled = gpu_alert("prod", node, gpu, kind=5, starts_at=starts,
                                      extra={"label_rack": "r07", "clock_event_reasons": "64"})
                for a in (hot, throttled):
                    a["fingerprint"] = fingerprint(a["labels"])
                alerts += [hot, throttled]
            await h.post(hook(*alerts, node=node))
        fleet = await wait_for(lambda: _fleet(h))
        page = await (await h.client.get(f"/ui/incidents/{fleet['id']}")).text()
        assert "of rack r07 in prod (86-94 °C, median 90 °C" in page, fleet["title"]
        assert "<dt>Readings</dt><dd>GPU temperature: hottest 94 °C on GPU" in page
        assert "over 96 of the storm&#39;s 96 GPUs</dd>" in page
        assert "<dt>Advice</dt><dd>Check the cooling these nodes share" in page
        assert fleet["severity"] == "error"
    finally:
        await h.stop()


async def _fleet(h: Harness) -> dict | None:
    rows = [r for r in await h.incidents() if r.get("fleet") and len(r.get("nodes") or ()) == 12]
    return rows[0] if rows else None
