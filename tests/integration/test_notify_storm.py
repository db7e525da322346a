"""A storm that forms after one of its nodes was already posted and paged alone: that node's message is
edited to point at the fleet incident (no new top-level post for it), the nodes folded within group_wait are
never posted, and the fleet incident posts and pages once. In-process service, Slack and PagerDuty test servers."""
from __future__ import annotations

import asyncio
import json

from tests.support.notify_harness import ROUTING, Harness, hook, top_messages, wait_for, xid_alert, keys
from tests.support.pagerduty_server import PagerDutyTestServer

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
