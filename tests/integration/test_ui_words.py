"""The incident page speaks in words: the notification table says what PagerDuty holds instead of alertd's
stored reference (``{"state": "triggered", ...}``), and the timeline names each event in a phrase instead of
its internal kind (``alert_joined``)."""
from __future__ import annotations

import html
import re

from testkit.notify_harness import Harness, hook, keys, top_messages, wait_for, xid_alert


async def test_notifications_and_timeline_in_words(tmp_path, slack, pd):
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys()).start()
    try:
        await h.post(hook(xid_alert("gpu-node-7", 3), node="gpu-node-7"))
        inc = await h.one_incident()
        await wait_for(lambda: top_messages(slack, "#gpu-oncall") and pd.events)
        await h.post(hook(xid_alert("gpu-node-7", 3), xid_alert("gpu-node-7", 4), node="gpu-node-7"))
        detail = await wait_for(lambda: _with_kind(h, inc["id"], "alert_joined"))
        page = html.unescape(await (await h.client.get(f"/ui/incidents/{inc['id']}")).text())
        assert '{"state"' not in page and "dedup_key" not in page
        assert re.search(r"PagerDuty alert triggered \(critical\); dedup key <code>[^<]+</code>", page), page
        shown = re.findall(r'<span class="kind">([^<]*)</span>', page)
        kinds = [e["kind"] for e in detail["timeline"]]
        assert len(shown) == len(kinds) and "Alert joined" in shown and "Opened" in shown
        assert not any("_" in s for s in shown) and not set(shown) & set(kinds), shown
    finally:
        await h.stop()


async def _with_kind(h: Harness, incident_id: str, kind: str) -> dict | None:
    detail = await h.incident(incident_id)
    return detail if any(e["kind"] == kind for e in detail["timeline"]) else None
