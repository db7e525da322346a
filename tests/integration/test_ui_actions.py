"""Web UI actions against the real Alertmanager, and fleet incidents shown with their children."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from testkit import services
from tests.support.fixtures import require
from testkit.notify_harness import Harness, hook, wait_for, xid_alert


@pytest.fixture
def alertmanager(tmp_path):
    cfg = tmp_path / "alertmanager.yml"
    cfg.write_text("route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n")
    am = require(services.start_alertmanager, cfg, tmp_path / "am")
    yield am
    am.stop()


async def press(h: Harness, incident_id: str, action: str):
    origin = str(h.client.make_url("")).rstrip("/")
    return await h.client.post(f"/ui/incidents/{incident_id}/action", data={"action": action},
                               headers={"Origin": origin}, allow_redirects=False)


@pytest.mark.services
async def test_silence_and_unsilence_buttons_through_alertmanager(tmp_path, alertmanager):
    import json
    import urllib.request

    h = await Harness(tmp_path, alertmanager_url=alertmanager.url).start()
    try:
        await h.post(hook(xid_alert("gpu-node-3", 2), node="gpu-node-3"))
        inc = await h.one_incident()
        page = await (await h.client.get(f"/ui/incidents/{inc['id']}")).text()
        assert f'href="/ui/incidents/{inc["id"]}?preview=4h#silence-preview"' in page
        page = await (await h.client.get(f"/ui/incidents/{inc['id']}?preview=4h")).text()
        assert 'id="silence-preview"' in page and "alertname=&#34;GPUXidError&#34;" in page
        assert 'value="silence-4h"' in page and "It would also mute" not in page
        resp = await press(h, inc["id"], "silence-4h")
        assert resp.status == 303 and resp.headers["Location"].endswith("?done=silenced%20for%204h")
        silence = (await h.incident(inc["id"]))["annotations"]["silence"]
        with urllib.request.urlopen(f"{alertmanager.url}/api/v2/silence/{silence['id']}", timeout=10) as r:
            am = json.load(r)
        assert am["status"]["state"] == "active" and am["createdBy"] == "anonymous"
        assert {"name": "node", "value": "gpu-node-3", "isRegex": False, "isEqual": True} in am["matchers"]
        assert am["comment"].startswith(f"alertd incident {inc['id']}")
        page = await (await h.client.get(f"/ui/incidents/{inc['id']}")).text()
        assert "silenced until" in page and "Unsilence" in page
        resp = await press(h, inc["id"], "unsilence")
        assert resp.headers["Location"].endswith("?done=unsilenced")
        with urllib.request.urlopen(f"{alertmanager.url}/api/v2/silence/{silence['id']}", timeout=10) as r:
            assert json.load(r)["status"]["state"] == "expired"
        resp = await press(h, inc["id"], "silence-9d")  # shown on the page as a problem, nothing done
        assert "a%20silence%20lasts%20from%201m%20to%207d" in resp.headers["Location"]
        audit = [(e.action, e.via, e.outcome) for e in await h.store.list_audit()]
        assert ("silence 4h", "web", "ok") in audit and ("unsilence", "web", "ok") in audit
    finally:
        await h.stop()


async def test_fleet_incident_lists_its_node_incidents_under_it(tmp_path):
    h = await Harness(tmp_path).start()
    try:
        fleet = await storm(h, 6, 79)
        page = await (await h.client.get("/ui/incidents")).text()
        assert 'class="fleet"' in page and "fleet · 6 nodes" in page
        children = fleet["children"]
        assert children and page.count('<details class="nodes"') == 1 and f"Node incidents ({len(children)})" in page
        for child in children:  # once inside the fleet row, not listed again on their own
            assert page.count(f'href="/ui/incidents/{child}"') == 1
        detail = await (await h.client.get(f"/ui/incidents/{fleet['id']}")).text()
        assert f"on its {len(children)} node incidents" in detail and all(c in detail for c in children)
    finally:
        await h.stop()


async def storm(h: Harness, nodes: int, code: int) -> dict:
    """An Xid on ``nodes`` nodes at once, one webhook each: their fleet incident, once it holds them all."""
    starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=1)
    for n in range(nodes):
        node = f"gpu-node-{n:02d}"
        await h.post(hook(xid_alert(node, 1, code=code, starts=starts), node=node))

    async def fleet() -> dict | None:
        rows = await h.incidents(limit=200)
        return next((r for r in rows if r.get("fleet") and len(r["children"]) == nodes), None)
    found: dict = await wait_for(fleet, timeout=30)
    return found


async def test_a_60_node_fleet_page_counts_all_its_nodes_not_the_50_it_lists(tmp_path):
    h = await Harness(tmp_path).start()
    try:
        fleet = await storm(h, 60, 119)
        page = await (await h.client.get(f"/ui/incidents/{fleet['id']}")).text()
        assert "Alerts (60 firing of 60, on its 60 node incidents)" in page
        assert "Listed: 50 of 60 node incidents; 10 more" in page
        assert page.count('href="/ui/nodes/') >= 50
    finally:
        await h.stop()
