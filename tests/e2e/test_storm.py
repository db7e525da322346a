"""The 20-node multi-signal storm through a real ``alertd serve`` (tests/support/storm.py), with and without
a 30 s Slack/PagerDuty outage: at most one top-level Slack post per channel, at most one page per PagerDuty
route, every node named, and the final state (one fleet incident over twenty node incidents) right."""
from __future__ import annotations

from pathlib import Path


from tests.support.loopback import serving_in_thread
from tests.support.pagerduty_server import PagerDutyTestServer
from tests.support.slack_server import SlackTestServer
from tests.support.storm import ESCALATION_KEY, SLACK_TOKEN, StormResult, StormRun

NODES = 20


def check_storm(result: StormResult, run: StormRun) -> None:
    posts = {cid: msgs for cid, msgs in result.top_posts.items() if msgs}
    assert posts, "nothing was posted"
    assert all(len(msgs) == 1 for msgs in posts.values()), {c: [m["text"] for m in ms] for c, ms in posts.items()}
    for msgs in posts.values():
        assert result.names_every_node(msgs[0]), msgs[0]["text"]
    assert set(result.triggers) == {PagerDutyTestServer.ROUTING_KEY}, result.triggers
    assert all(len(t) == 1 for t in result.triggers.values()), result.triggers
    [page] = result.triggers[PagerDutyTestServer.ROUTING_KEY]
    assert page["payload"]["severity"] == "critical" and "nodes in prod-a" in page["payload"]["summary"]
    # the final state: one fleet incident over one incident per node carrying all of its signals
    fleets = [i for i in result.incidents if i["fleet"]]
    assert len(fleets) == 1, [i["title"] for i in fleets]
    fleet = fleets[0]
    assert sorted(fleet["nodes"]) == result.nodes and fleet["status"] == "open"
    children = [i for i in result.incidents if not i["fleet"]]
    assert sorted(i["node"] for i in children) == result.nodes
    for inc in children:
        assert inc["parentId"] == fleet["id"] and sorted(inc["signals"]) == ["metrics_missing", "node_cordoned", "xid"]
    assert page["dedup_key"].endswith(fleet["id"])
    assert all(fleet["id"] in m["text"] for msgs in posts.values() for m in msgs)
    assert result.outbox.get("failed", 0) == 0


def storm(tmp_path: Path, outage: float) -> None:
    slack = SlackTestServer(token=SLACK_TOKEN)
    pd = PagerDutyTestServer(routing_keys=[PagerDutyTestServer.ROUTING_KEY, ESCALATION_KEY])
    with serving_in_thread(slack, pd), StormRun(tmp_path, slack, pd) as run:
        result = run.storm(nodes=NODES, spread=2.0, outage=outage)
        check_storm(result, run)
        if outage:
            assert result.slack_failures > 0 and result.fleet_post_s >= outage - 1  # the outage was real
            # the backlog delivers the current state: the one page already names the twenty nodes
            assert "on 20 nodes" in result.triggers[PagerDutyTestServer.ROUTING_KEY][0]["payload"]["summary"]
        else:
            assert result.slack_failures == 0
        # everything resolves: the fleet with its last node, one resolve for the one page, nothing posted anew
        done = run.resolve_all()
        assert not [i for i in done.incidents if i["status"] != "resolved"]
        assert {c: len(ms) for c, ms in done.top_posts.items() if ms} == {c: 1 for c in posts_of(result)}
        assert [e["event_action"] for e in done.pd_events] == ["trigger", "resolve"]
        assert all("Resolved" in m["text"] or "RESOLVED" in m["text"] for ms in done.top_posts.values() for m in ms)


def posts_of(result: StormResult) -> list[str]:
    return [c for c, ms in result.top_posts.items() if ms]


def test_twenty_node_storm_is_one_post_per_channel_and_one_page(tmp_path: Path) -> None:
    storm(tmp_path, outage=0.0)


def test_twenty_node_storm_after_a_30s_slack_and_pagerduty_outage(tmp_path: Path) -> None:
    storm(tmp_path, outage=30.0)
