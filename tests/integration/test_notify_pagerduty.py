"""PagerDuty Events v2 through the whole service against the PagerDuty test server."""
from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

from alertd.core.model import iso
from testkit.storm import node_alerts, resolved

from testkit.notify_harness import ESCALATION_KEY, Harness, hook, keys, top_messages, wait_for, xid_alert
from testkit.pagerduty_server import PagerDutyTestServer

async def test_trigger_acknowledge_resolve_with_one_dedup_key(tmp_path, slack, pd):
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys()).start()
    try:
        first = xid_alert("gpu-node-7", 3)
        first["generatorURL"] = "http://prometheus.example:9090/graph?g0.expr=x"
        await h.post(hook(first, node="gpu-node-7"))
        await wait_for(lambda: pd.events)
        inc = await h.one_incident()
        (trigger,) = pd.events
        key = f"{h.svc.cfg.installation_id}:{inc['id']}"  # scoped by the installation id stored at first start
        assert len(h.svc.cfg.installation_id) == 8
        assert trigger["event_action"] == "trigger" and trigger["dedup_key"] == key
        assert trigger["routing_key"] == PagerDutyTestServer.ROUTING_KEY
        p = trigger["payload"]
        assert p["source"] == "gpu-node-7" and p["severity"] == "critical" and p["group"] == "prod"
        assert p["summary"].startswith("[CRITICAL] Xid 79: GPU has fallen off the bus on gpu-node-7 GPU 3")
        assert p["class"] == "xid 79" and p["component"] == "GPU 3" and p["timestamp"].endswith("Z")
        d = p["custom_details"]
        assert d["xid"] == [79] and d["gpus"] and d["gpus"][0].startswith("GPU-") and "reboot" in d["action"]
        assert {link["text"] for link in trigger["links"]} >= {"Runbook", "Prometheus"}

        # more alerts join: nothing new for the pager (same severity)
        await h.post(hook(xid_alert("gpu-node-7", 4), node="gpu-node-7"))
        await wait_for(lambda: len(slack.calls_of("chat.update")) >= 1)
        await asyncio.sleep(0.5)
        assert len(pd.events) == 1

        # acknowledged in Slack -> acknowledged in PagerDuty
        assert await h.click("alertd_ack", inc["id"]) == 200
        await wait_for(lambda: len(pd.events) == 2)
        assert pd.events[1]["event_action"] == "acknowledge" and pd.events[1]["dedup_key"] == key
        assert pd.status_of(inc["id"]) == "acknowledged"

        # resolved -> resolve with the same dedup_key
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/resolve", params={"by": "bo"})
        assert resp.status == 200
        await wait_for(lambda: len(pd.events) == 3)
        assert pd.events[2]["event_action"] == "resolve" and pd.events[2]["dedup_key"] == key
        assert pd.status_of(inc["id"]) == "resolved" and len(pd.alerts[key]) == 1
        assert not pd.rejected
    finally:
        await h.stop()


async def test_400_is_never_retried(tmp_path, slack, pd):
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys()).start()
    try:
        pd.fail_next(400)
        await h.post(hook(xid_alert("n1", 0)))

        async def failed():
            return (await h.store.stats()).get("outbox_failed", 0) == 1
        await wait_for(failed)
        await asyncio.sleep(1.5)
        assert len(pd.requests) == 1 and not pd.events
        assert h.notifiers["pagerduty"].rejected == 1
        metrics = await (await h.client.get("/metrics")).text()
        assert 'alertd_notifications_total{outcome="failed",target="pagerduty"} 1.0' in metrics
    finally:
        await h.stop()


async def test_429_and_500_are_retried_with_backoff(tmp_path, slack, pd):
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys()).start()
    try:
        pd.fail_next(500)
        pd.fail_next(429)
        await h.post(hook(xid_alert("n1", 0)))
        await wait_for(lambda: pd.events, timeout=15)
        assert len(pd.requests) == 3 and [e["event_action"] for e in pd.events] == ["trigger"]
        gaps = [b - a for a, b in zip(pd.requests, pd.requests[1:])]
        assert all(g >= 0.9 for g in gaps), gaps  # backoff, not a hot loop
    finally:
        await h.stop()


async def test_unacknowledged_incident_escalates_and_says_so_in_the_thread(paging, slack, pd):
    await paging.post(hook(xid_alert("n1", 0)))
    inc = await paging.one_incident()
    await wait_for(lambda: any(e["routing_key"] == ESCALATION_KEY for e in pd.events), timeout=10)
    esc = [e for e in pd.events if e["routing_key"] == ESCALATION_KEY]
    assert len(esc) == 1 and esc[0]["event_action"] == "trigger" and esc[0]["dedup_key"] == f"{paging.svc.cfg.installation_id}:{inc['id']}"
    assert "escalated" in esc[0]["payload"]["summary"]
    ts = top_messages(slack, "#gpu-oncall")[0]["ts"]
    await wait_for(lambda: any("escalated" in r["text"] for r in slack.replies("#gpu-oncall", ts)))
    # the escalation service hears about the acknowledgement too
    assert await paging.click("alertd_ack", inc["id"]) == 200
    await wait_for(lambda: pd.status_of(inc["id"]) == "acknowledged" and
                   all(a["status"] == "acknowledged" for a in pd.alerts[pd.key_for(inc["id"])]))
    assert {a["routing_key"] for a in pd.alerts[pd.key_for(inc["id"])]} == {PagerDutyTestServer.ROUTING_KEY, ESCALATION_KEY}


async def test_acknowledged_in_time_does_not_escalate(paging, slack, pd):
    await paging.post(hook(xid_alert("n1", 0)))
    inc = await paging.one_incident()
    await wait_for(lambda: pd.events)
    assert await paging.click("alertd_ack", inc["id"]) == 200
    await paging.actions_idle()
    await asyncio.sleep(2.5)  # past the 1.5 s escalation time
    assert not [e for e in pd.events if e["routing_key"] == ESCALATION_KEY]
    ts = top_messages(slack, "#gpu-oncall")[0]["ts"]
    assert not any("escalated" in r["text"] for r in slack.replies("#gpu-oncall", ts))
    assert json.dumps(pd.events).count('"trigger"') == 1


async def test_a_failed_repair_on_an_open_alert_resolves_it_and_triggers_it_again(tmp_path, slack, pd):
    """PagerDuty notifies nobody for a second trigger on a dedup_key whose alert is open: the failed repair (the
    fault back after the uncordon) resolves the alert and triggers it again, so the on-call hears of it."""
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys()).start()
    try:
        now = datetime.now(timezone.utc).replace(microsecond=0)
        xid = xid_alert("gpu-node-9", 2, starts=now - timedelta(minutes=60))
        cordon = node_alerts("gpu-node-9", 2, now - timedelta(minutes=52), cluster="prod")[2]
        await h.post(hook(xid, node="gpu-node-9"))
        await wait_for(lambda: pd.events)
        for doc in (cordon, resolved(xid, now - timedelta(minutes=55)), resolved(cordon, now - timedelta(minutes=5))):
            await h.post(hook(doc, node="gpu-node-9"))
        await asyncio.sleep(0.5)
        assert [e["event_action"] for e in pd.events] == ["trigger"]  # the response pages nothing
        await h.post(hook(dict(xid, startsAt=iso(now - timedelta(minutes=1))), node="gpu-node-9"))
        await wait_for(lambda: len(pd.events) >= 3)
        inc = await h.one_incident()
        key = f"{h.svc.cfg.installation_id}:{inc['id']}"
        assert [(e["event_action"], e["dedup_key"]) for e in pd.events] == [
            ("trigger", key), ("resolve", key), ("trigger", key)]
        assert "repair failed" in json.dumps(pd.events[2]["payload"]), pd.events[2]
        assert len(pd.alerts[key]) == 2 and pd.status_of(inc["id"]) == "triggered"
        assert not pd.rejected
    finally:
        await h.stop()
