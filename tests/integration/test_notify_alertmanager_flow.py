"""Real Alertmanager -> alertd -> Slack and PagerDuty test servers, through resolution.

Alerts are posted to Alertmanager's API; Alertmanager groups them per node and
sends webhooks to alertd, which posts one Slack message per failing node, edits
it until the incident resolves, and triggers then resolves one PagerDuty alert
per incident with the same dedup_key.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import aiohttp
import pytest

from testkit.notify_harness import ROOT, Harness, keys, top_messages, wait_for
from testkit import services
from tests.support.fixtures import require
from testkit.webhooks import dcgm_labels

pytestmark = pytest.mark.services


def am_config(url: str) -> str:
    return f"""
route:
  receiver: alertd
  group_by: [cluster, node]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: alertd
    webhook_configs:
      - url: {url}
        send_resolved: true
        max_alerts: 0
"""


def xid_labels(cluster: str, node: str, gpu: int) -> dict[str, str]:
    return {"alertname": "GPUXidError", "severity": "critical", "xid": "79", **dcgm_labels(cluster, node, gpu)}


async def am_post(url: str, labels: list[dict], *, resolved: bool = False) -> None:
    now = datetime.now(timezone.utc)
    body = []
    for lbl in labels:
        alert = {"labels": lbl, "annotations": {"summary": f"Xid 79 on {lbl['node']}"},
                 "generatorURL": "http://prometheus.example:9090/graph?g0.expr=xid",
                 "startsAt": (now - timedelta(minutes=1)).isoformat()}
        alert["endsAt"] = (now - timedelta(seconds=1) if resolved else now + timedelta(hours=1)).isoformat()
        body.append(alert)
    async with aiohttp.ClientSession() as s:
        async with s.post(url + "/api/v2/alerts", json=body) as resp:
            assert resp.status == 200, await resp.text()


async def test_alertmanager_to_slack_and_pagerduty_through_resolution(tmp_path, slack, pd):
    correlation = (ROOT / "rules" / "correlation.yml").read_text().replace("hold_down: 5m", "hold_down: 1s")
    h = Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys())
    (tmp_path / "rules" / "correlation.yml").write_text(correlation)
    await h.start()
    am = None
    try:
        hook_url = str(h.client.make_url("/api/v1/alerts/alertmanager"))
        cfg = tmp_path / "alertmanager.yml"
        cfg.write_text(am_config(hook_url))
        am = require(services.start_alertmanager, cfg, tmp_path / "am")

        n1 = [xid_labels("prod-a", "gpu-node-1", 0), xid_labels("prod-a", "gpu-node-1", 1)]
        n2 = [xid_labels("prod-b", "gpu-node-2", 5)]
        await am_post(am.url, n1 + n2)
        await wait_for(lambda: len(top_messages(slack, "#gpu-oncall")) == 2, timeout=20)
        await wait_for(lambda: len(pd.events) == 2, timeout=10)

        async def both_members() -> list[dict]:  # Alertmanager may deliver node 1's two alerts in two webhooks
            found = await h.incidents()
            return found if sum(i["memberCount"] for i in found) == 3 else []
        incidents = await wait_for(both_members, timeout=10)
        assert sorted(i["node"] for i in incidents) == ["gpu-node-1", "gpu-node-2"]
        by_node = {i["node"]: i for i in incidents}
        assert by_node["gpu-node-1"]["memberCount"] == 2
        assert {e["dedup_key"] for e in pd.events} == {f"{h.svc.cfg.installation_id}:{i['id']}" for i in incidents}
        assert all(e["event_action"] == "trigger" for e in pd.events)

        await am_post(am.url, n1 + n2, resolved=True)

        async def all_resolved():
            rows = await h.incidents()
            return len(rows) == 2 and all(r["status"] == "resolved" for r in rows)
        await wait_for(all_resolved, timeout=30)
        await wait_for(lambda: all("RESOLVED" in m["text"] for m in top_messages(slack, "#gpu-oncall")), timeout=10)
        await wait_for(lambda: len(pd.events) == 4, timeout=10)

        assert len(top_messages(slack, "#gpu-oncall")) == 2  # one message per node, edited through resolution
        for inc in incidents:
            actions = [e["event_action"] for e in pd.events_for(inc["id"])]
            assert actions == ["trigger", "resolve"], (inc["id"], actions)
            assert pd.status_of(inc["id"]) == "resolved"
        for m in top_messages(slack, "#gpu-oncall"):
            assert m["updates"] >= 1

            def summary(ts=m["ts"]):
                return "Summary" in " ".join(json.dumps(r["blocks"]) for r in slack.replies("#gpu-oncall", ts))
            await wait_for(summary, timeout=10)
    finally:
        if am is not None:
            am.stop()
        await h.stop()
