"""The 20-node multi-signal storm through a real ``alertd serve`` (testkit/storm.py), with and without
a 10 s Slack/PagerDuty outage: at most one top-level Slack post per channel, at most one page per PagerDuty
route, every node named, and the final state (one fleet incident over twenty node incidents) right; and
two fleets that turn out to be one storm (alerts grouped by name) merging with one page."""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.slack_server import SlackTestServer
from testkit.pipeline import wait
from testkit.storm import (CLUSTER, ESCALATION_KEY, SLACK_TOKEN, StormResult, StormRun, _all_text,
                                  node_alerts)
from testkit.webhooks import webhook

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


def test_twenty_node_storm_after_a_10s_slack_and_pagerduty_outage(tmp_path: Path) -> None:
    """The whole storm arrives inside the outage (spread 2 s) and retries back off up to 3 s, so 10 s is
    several failed rounds per item: the backlog, not a lucky retry, delivers the one post and page."""
    storm(tmp_path, outage=10.0)


def by_alertname(alerts: list[dict]) -> dict:
    """One Alertmanager group of a route with ``group_by: [alertname, cluster]``: every node's alert of one
    name in one webhook."""
    name = alerts[0]["labels"]["alertname"]
    body = webhook(alerts, cluster=CLUSTER, node="")
    return dict(body, groupLabels={"alertname": name, "cluster": CLUSTER},
                groupKey=f'{{}}:{{alertname="{name}", cluster="{CLUSTER}"}}')


def test_two_fleets_that_prove_one_storm_merge_in_slack_and_pagerduty(tmp_path: Path) -> None:
    """Alerts grouped by name: six nodes' exporters die before their Xid is scraped (a node-lost fleet,
    warning: posted, not paged), six other nodes report Xid 79 (an Xid fleet: posted and paged), then the
    first six's Xids arrive. The node-lost fleet resolves as merged and its message says so; the Xid fleet's
    message names all twelve nodes, and its page is the only one."""
    lost, faulted = [f"gpu-node-{i:02d}" for i in range(6)], [f"gpu-node-{i:02d}" for i in range(6, 12)]
    starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=30)
    alerts = {n: node_alerts(n, i, starts) for i, n in enumerate(lost + faulted)}
    slack = SlackTestServer(token=SLACK_TOKEN)
    pd = PagerDutyTestServer(routing_keys=[PagerDutyTestServer.ROUTING_KEY, ESCALATION_KEY])
    with serving_in_thread(slack, pd), StormRun(tmp_path, slack, pd) as run:
        for body in (by_alertname([alerts[n][1] for n in lost]), by_alertname([alerts[n][0] for n in faulted])):
            status, doc, _ = run.alertd.post(body)
            assert status == 200, doc
        wait("two fleets posted, one paged", lambda: len(run.fleet_messages()) == 2 and len(pd.events) == 1,
             timeout=30, every=0.1)
        status, doc, _ = run.alertd.post(by_alertname([alerts[n][0] for n in lost]))
        assert status == 200, doc
        wait("one fleet over twelve nodes, everything delivered",
             lambda: len(run.incidents(status="open")) == 13 and run.outbox_due() == 0, timeout=30, every=0.1)
        time.sleep(2.5)  # past the Slack debounce: a late post or page would be seen
        result = run.collect(StormResult(nodes=lost + faulted))
    [fleet] = [i for i in result.incidents if i["fleet"] and i["status"] == "open"]
    [merged] = [i for i in result.incidents if i["fleet"] and i["status"] == "resolved"]
    assert sorted(fleet["nodes"]) == lost + faulted and fleet["title"].startswith("Xid 79")
    assert sorted(merged["nodes"]) == lost and merged["key"] == "fleet|node-lost|cluster=prod-a"
    assert all(i["parentId"] == fleet["id"] for i in result.incidents if not i["fleet"])
    [page] = result.pd_events
    assert page["event_action"] == "trigger" and page["dedup_key"].endswith(fleet["id"])
    posts = [m for ms in result.top_posts.values() for m in ms]
    [kept] = [m for m in posts if fleet["id"] in m["text"]]
    [gone] = [m for m in posts if merged["id"] in m["text"]]
    assert result.names_every_node(kept) and "RESOLVED" in _all_text(gone).upper()
    assert f"Part of fleet incident {fleet['id']}" in _all_text(gone)  # where the storm went
    assert merged["parentId"] == fleet["id"]
