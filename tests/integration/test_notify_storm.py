"""A storm that forms after one of its nodes was already posted and paged alone: that node's message is
edited to point at the fleet incident (no new top-level post for it), the nodes folded within group_wait are
never posted, and the fleet incident posts and pages once. In-process service, Slack and PagerDuty test servers."""
from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

from alertd.core.model import iso
from testkit.storm import node_alerts, resolved
from testkit.notify_harness import ROUTING, Harness, hook, top_messages, wait_for, xid_alert, keys
from testkit.pagerduty_server import PagerDutyTestServer

HELD = ROUTING.replace("  group_wait: 0s\n", "  group_wait: 1s\n")


async def test_a_node_posted_before_the_storm_is_edited_to_point_at_the_fleet(tmp_path, slack, pd):
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=HELD).start()
    try:
        await h.post(hook(xid_alert("n0"), node="n0"))
        await wait_for(lambda: top_messages(slack, "#gpu-oncall") and pd.events)  # posted and paged after 1s
        (alone,) = top_messages(slack, "#gpu-oncall")
        for i in range(1, 5):  # four more nodes: a storm of five
            await h.post(hook(xid_alert(f"n{i}"), node=f"n{i}"))

        async def the_fleet():
            return next((i for i in await h.incidents() if i["fleet"]), None)

        fleet = await wait_for(the_fleet)
        assert sorted(fleet["nodes"]) == [f"n{i}" for i in range(5)]
        await wait_for(lambda: len(top_messages(slack, "#gpu-oncall")) == 2)
        await wait_for(lambda: "Part of fleet incident " + fleet["id"] in json.dumps(
            slack.messages["#gpu-oncall"][alone["ts"]]["blocks"]))
        await asyncio.sleep(1.5)  # past group_wait of the four folded nodes: nothing more is posted
        tops = top_messages(slack, "#gpu-oncall")
        assert len(tops) == 2 and sum(fleet["id"] in m["text"] for m in tops) == 1
        # pages: the node paged alone before the storm, and the fleet; none for the four folded in time
        n0 = next(i for i in await h.incidents(node="n0") if not i["fleet"])
        assert n0["parentId"] == fleet["id"] and alone["text"].endswith(f"({n0['id']})")
        triggers = [e for e in pd.events if e["event_action"] == "trigger"]
        assert len(triggers) == 2 and all(e["routing_key"] == PagerDutyTestServer.ROUTING_KEY for e in triggers)
        assert {e["dedup_key"] for e in triggers} == {e["dedup_key"] for e in triggers
                                                      if e["dedup_key"].endswith((n0["id"], fleet["id"]))}
    finally:
        await h.stop()


async def test_a_node_whose_repair_fails_after_the_fleet_took_its_alert_pages_under_its_own_key(tmp_path, slack, pd):
    """The fleet took over the PagerDuty alert the node had paged (same dedup_key). When the node's fault is
    back after its uncordon it leaves the fleet and pages that the repair failed: a new alert of its own, while
    the fleet's alert stays triggered (resolving the shared key would close the storm's page)."""
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=HELD).start()
    try:
        t = datetime.now(timezone.utc).replace(microsecond=0)
        xid = xid_alert("n0", starts=t - timedelta(seconds=60))
        await h.post(hook(xid, node="n0"))
        await wait_for(lambda: pd.events)
        for i in range(1, 5):
            await h.post(hook(xid_alert(f"n{i}", starts=t - timedelta(seconds=60)), node=f"n{i}"))

        async def the_fleet():
            return next((i for i in await h.incidents() if i["fleet"]), None)

        fleet = await wait_for(the_fleet)
        await wait_for(lambda: len([e for e in pd.events if e["event_action"] == "trigger"]) == 2)
        shared = pd.events[0]["dedup_key"]
        assert {e["dedup_key"] for e in pd.events} == {shared}  # the fleet took the node's alert over
        cordon = node_alerts("n0", 0, t - timedelta(seconds=52), cluster="prod")[2]
        for doc in (cordon, resolved(xid, t - timedelta(seconds=45)), resolved(cordon, t - timedelta(seconds=20))):
            await h.post(hook(doc, node="n0"))
        await h.post(hook(dict(xid, startsAt=iso(t - timedelta(seconds=10))), node="n0"))
        await wait_for(lambda: len(pd.events) >= 3)
        await asyncio.sleep(0.5)
        after = pd.events[2:]
        assert [(e["event_action"], e["dedup_key"]) for e in after] == [("trigger", shared + "/repair-failed")], after
        assert "repair failed" in json.dumps(after[0]["payload"])
        assert fleet["id"] and pd.alerts[shared][-1]["status"] == "triggered"  # the storm's page stays open
    finally:
        await h.stop()
