"""The incident page at 3 a.m.: the action in words, the catalog's investigate text, the runbook as a link,
which reasons throttle the clocks; resolve asks first; no silence buttons that can only fail."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests.support.notify_harness import Harness, hook, xid_alert
from tests.support.webhooks import gpu_alert

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
