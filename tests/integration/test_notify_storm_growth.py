"""A growing storm is heard: its PagerDuty alert is told the new node count (a repeated trigger on the same
dedup_key: one alert, its summary current, no second page), at most once per correlation.storm.page_updates;
its Slack thread hears of each doubling once, with the trend, and its message and web page show the trend.
In-process service, Slack and PagerDuty test servers."""
from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime

from testkit.notify_harness import ROUTING, Harness, hook, posts, top_messages, wait_for, xid_alert, keys
from testkit.pagerduty_server import PagerDutyTestServer

EVERY = 2.0  # seconds: correlation.storm.page_updates for the test (shipped: 5m)


def with_page_updates(h: Harness, every: str) -> None:
    """The copied shipped correlation rules, with another page_updates."""
    path = h.tmp_path / "rules" / "correlation.yml"
    text = path.read_text().replace("    page_updates: 5m\n", "")
    assert "    pending: 5m10s\n" in text
    path.write_text(text.replace("    pending: 5m10s\n", f"    pending: 5m10s\n    page_updates: {every}\n"))


def triggers(pd: PagerDutyTestServer) -> list[dict]:
    return [e for e in pd.events if e["event_action"] == "trigger"]


def doubling_replies(slack, channel: str) -> list[str]:
    return [c.params.get("text", "") + json.dumps(c.params.get("blocks", ""))
            for c in posts(slack, channel, top=False) if "nodes now" in json.dumps(c.params)]


async def test_a_growing_storm_keeps_one_page_current_and_its_thread_hears_each_doubling(tmp_path, slack, pd):
    h = Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=ROUTING)
    with_page_updates(h, "2s")
    await h.start()
    try:
        nodes = [f"n{i:02d}" for i in range(40)]
        await h.post(hook(*(xid_alert(n) for n in nodes[:5]), node="n00"))  # one batch: the storm opens with 5

        async def the_fleet():
            return next((i for i in await h.incidents() if i["fleet"]), None)

        fleet = await wait_for(the_fleet)
        await wait_for(lambda: triggers(pd) and top_messages(slack, "#gpu-oncall"))
        assert "on 5 nodes" in triggers(pd)[0]["payload"]["summary"]

        await h.post(hook(*(xid_alert(n) for n in nodes[5:10]), node="n05"))  # 10: doubled
        await wait_for(lambda: any("on 10 nodes" in e["payload"]["summary"] for e in triggers(pd)))
        await wait_for(lambda: len(doubling_replies(slack, "#gpu-oncall")) == 1)
        await h.post(hook(xid_alert(nodes[10]), node=nodes[10]))  # 11, soon after: the update waits its turn
        await h.post(hook(*(xid_alert(n) for n in nodes[11:13]), node=nodes[11]))  # 13
        await wait_for(lambda: any("on 13 nodes" in e["payload"]["summary"] for e in triggers(pd)), timeout=15)
        await h.post(hook(*(xid_alert(n) for n in nodes[13:40]), node=nodes[13]))  # 40: doubled (past 20)
        await wait_for(lambda: any("on 40 nodes" in e["payload"]["summary"] for e in triggers(pd)), timeout=15)
        await wait_for(lambda: len(doubling_replies(slack, "#gpu-oncall")) == 2)
        await asyncio.sleep(EVERY + 1.5)  # nothing more grows: nothing more is sent

        # PagerDuty: ONE alert (one page), its summary the count of now; updates spaced by page_updates
        sent = triggers(pd)
        assert {e["dedup_key"] for e in sent} == {sent[0]["dedup_key"]} and sent[0]["dedup_key"].endswith(fleet["id"])
        [alert] = pd.alerts[sent[0]["dedup_key"]]
        assert alert["status"] == "triggered" and "on 40 nodes" in alert["summary"], alert["summary"]
        assert [e for e in pd.events if e["event_action"] != "trigger"] == []
        counts = [e["payload"]["custom_details"]["node_count"] for e in sent]
        assert counts == sorted(set(counts)) and counts[0] == 5 and counts[-1] == 40, counts  # only on growth
        doc = await h.incident(fleet["id"])  # the engine's decisions, on its clock: spaced by page_updates
        told = [datetime.fromisoformat(e["at"]) for e in doc["timeline"] if e["kind"] == "storm_grew"]
        assert len(told) >= len(sent) - 1 >= 2, (told, counts)  # never a trigger the engine did not decide
        assert all((b - a).total_seconds() >= EVERY for a, b in zip(told, told[1:])), told
        assert "40 nodes now, 10 at" in sent[-1]["payload"]["custom_details"]["trend"]

        # Slack: one top-level message, edited to the trend; one thread reply per doubling
        [top] = top_messages(slack, "#gpu-oncall")
        assert "40 nodes now, 10 at" in json.dumps(top["blocks"]) and "on 40 nodes" in top["text"]
        replies = doubling_replies(slack, "#gpu-oncall")
        assert len(replies) == 2 and "10 nodes now, 5 at" in replies[0] and "40 nodes now, 10 at" in replies[1]
        assert all(c.params.get("thread_ts") == top["ts"] for c in posts(slack, "#gpu-oncall", top=False))

        # the incident's web page shows the trend too
        page = await (await h.client.get(f"/ui/incidents/{fleet['id']}")).text()
        assert "40 nodes now, 10 at" in page
    finally:
        await h.stop()


async def test_updates_wait_for_their_interval_and_carry_the_count_of_then(tmp_path, slack, pd):
    """Nodes joining every few hundred milliseconds for a while: the page is updated at most once per
    page_updates, never once per node, and ends at the final count."""
    h = Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=ROUTING)
    with_page_updates(h, "2s")
    await h.start()
    try:
        nodes = [f"m{i:02d}" for i in range(25)]
        await h.post(hook(*(xid_alert(n) for n in nodes[:5]), node="m00"))
        await wait_for(lambda: triggers(pd))
        started = time.monotonic()
        for n in nodes[5:]:  # 20 more nodes, one webhook each, over about 4 seconds
            await h.post(hook(xid_alert(n), node=n))
            await asyncio.sleep(0.2)
        took = time.monotonic() - started
        await wait_for(lambda: "on 25 nodes" in triggers(pd)[-1]["payload"]["summary"], timeout=15)
        await asyncio.sleep(0.5)
        sent = triggers(pd)
        assert len({e["dedup_key"] for e in sent}) == 1 and len(pd.alerts) == 1
        # one first page, then one update at once and one per started interval: never one per node
        assert 2 <= len(sent) <= 2 + int(took / EVERY) + 1, (len(sent), took)
    finally:
        await h.stop()


async def test_an_update_due_when_the_service_stops_is_sent_once_by_the_next_one(tmp_path, slack, pd):
    """The due update is the engine's, stored with the fleet: a restart (or a new leader on the same store)
    sends it when it comes due, once, on the same alert, and posts nothing twice."""
    db = tmp_path / "alertd.sqlite3"
    first = Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=ROUTING, db=db)
    with_page_updates(first, "4s")
    await first.start()
    try:
        await first.post(hook(*(xid_alert(f"r{i}") for i in range(5)), node="r0"))
        await wait_for(lambda: triggers(pd) and top_messages(slack, "#gpu-oncall"))
        await first.post(hook(xid_alert("r5"), node="r5"))  # 6 nodes, within the interval: due later
        fleet = next(i for i in await first.incidents() if i["fleet"])
        await wait_for(lambda: "6 nodes" in top_messages(slack, "#gpu-oncall")[0]["text"])
    finally:
        await first.stop()
    assert len(triggers(pd)) == 1  # stopped before the update was due
    second = Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=ROUTING, db=db)
    with_page_updates(second, "4s")
    await second.start()
    try:
        await wait_for(lambda: len(triggers(pd)) == 2, timeout=15)
        await asyncio.sleep(EVERY + 1.5)
        sent = triggers(pd)
        assert len(sent) == 2 and sent[1]["dedup_key"] == sent[0]["dedup_key"]
        assert "on 6 nodes" in sent[1]["payload"]["summary"] and sent[1]["dedup_key"].endswith(fleet["id"])
        assert len(pd.alerts) == 1 and len(top_messages(slack, "#gpu-oncall")) == 1
    finally:
        await second.stop()
