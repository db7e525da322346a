"""The router's memory lives in the store: committed with each engine step, restored after a failed
commit and on start. Real SQLite store, Slack and PagerDuty test servers."""
from __future__ import annotations

import asyncio
import sqlite3

from alertd.store.base import ESCALATION, SENT, Step, StoreUnavailable
from testkit.notify_harness import (ESCALATION_KEY, ROUTING_ESC, Harness, hook, keys, posts, wait_for,
                                          xid_alert)
from testkit.pagerduty_server import PagerDutyTestServer


async def escalate_rows(h: Harness) -> list[tuple[str, str]]:
    rows = await h.store.db.run(h.store.db.query, "SELECT target, state FROM outbox WHERE kind = 'escalate' ORDER BY id")
    return [tuple(r) for r in rows]


def triggers(pd: PagerDutyTestServer, key: str) -> list[dict]:
    return [e for e in pd.events if e["routing_key"] == key and e["event_action"] == "trigger"]


async def test_a_failed_step_is_replayed_with_its_escalations(tmp_path, slack, pd):
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=ROUTING_ESC).start()
    try:
        real_commit = h.store.commit_step
        failed: list[Step] = []

        async def fails_once(step: Step) -> None:
            if step.changes and not failed:
                failed.append(step)
                raise StoreUnavailable("database or disk is full")
            await real_commit(step)
        h.store.commit_step = fails_once  # type: ignore[method-assign]

        await h.post(hook(xid_alert("n1", 0)))
        await wait_for(lambda: failed)
        lost = failed[0]
        assert {(i.target, i.intent) for i in lost.outbox if i.intent == "escalate"} == {
            ("pagerduty:infra-escalation", "escalate"), ("slack:#gpu-oncall|escalation", "escalate")}
        assert {role for _, role, _ in lost.memory.marks} == {SENT, ESCALATION}

        # The processor reads the step back from the inbox; the router starts again from what was
        # committed (nothing), so the replay schedules both escalations again.
        inc = await h.one_incident()
        rows = await wait_for(lambda: escalate_rows(h))
        assert [t for t, _ in rows] == ["pagerduty:infra-escalation", "slack:#gpu-oncall|escalation"]
        memory = await h.store.load_router_memory()
        assert memory.escalations[inc["id"]] == {"escalation:infra-escalation", "pagerduty:infra-escalation"}
        assert memory.sent[inc["id"]] == {"slack:#gpu-oncall", "pagerduty:infra"}

        await wait_for(lambda: triggers(pd, ESCALATION_KEY), timeout=10)
        await wait_for(lambda: any("escalated" in c.params.get("text", "") for c in posts(slack, "#gpu-oncall")))
        assert len(triggers(pd, PagerDutyTestServer.ROUTING_KEY)) == 1
        assert len(triggers(pd, ESCALATION_KEY)) == 1
        assert len(posts(slack, "#gpu-oncall", top=True)) == 1
    finally:
        await h.stop()


async def test_a_restart_carries_on_without_a_second_post_page_or_escalation(tmp_path, slack, pd):
    routing = ROUTING_ESC.replace("after: 1500ms", "after: 4s")
    first = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=routing).start()
    try:
        await first.post(hook(xid_alert("n1", 0)))
        await wait_for(lambda: posts(slack, "#gpu-oncall", top=True) and triggers(pd, PagerDutyTestServer.ROUTING_KEY))
        inc = await first.one_incident()
    finally:
        await first.stop()

    again = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=routing).start()
    try:
        assert again.router.memory.sent[inc["id"]] == {"slack:#gpu-oncall", "pagerduty:infra"}
        # Another GPU of the same node joins: a reply in the existing thread, not a new message.
        await again.post(hook(xid_alert("n1", 1)))
        await wait_for(lambda: [c for c in posts(slack, "#gpu-oncall", top=False)
                                if "escalated" not in c.params.get("text", "")])
        await wait_for(lambda: triggers(pd, ESCALATION_KEY), timeout=10)
        await wait_for(lambda: any("escalated" in c.params.get("text", "") for c in posts(slack, "#gpu-oncall")))
        await asyncio.sleep(0.5)  # anything scheduled twice would be due by now
        assert len(posts(slack, "#gpu-oncall", top=True)) == 1
        assert len(triggers(pd, PagerDutyTestServer.ROUTING_KEY)) == 1
        assert len(triggers(pd, ESCALATION_KEY)) == 1
        assert [t for t, _ in await escalate_rows(again)] == ["pagerduty:infra-escalation",
                                                               "slack:#gpu-oncall|escalation"]
    finally:
        await again.stop()


async def test_a_stop_lets_the_round_in_flight_finish_so_nothing_is_paged_twice(tmp_path, slack, pd):
    routing = ROUTING_ESC.replace("after: 1500ms", "after: 1h")
    first = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=routing).start()
    try:
        slack.delay = 1.0  # Slack takes a second to answer; PagerDuty, in the same round, answers at once
        await first.post(hook(xid_alert("n1", 0)))
        await wait_for(lambda: triggers(pd, PagerDutyTestServer.ROUTING_KEY))  # paged, not yet marked done
    finally:
        await first.stop()
    slack.delay = 0.0
    rows = sqlite3.connect(first.db).execute("SELECT target, state FROM outbox ORDER BY id").fetchall()
    assert {("pagerduty:infra", "done"), ("slack:#gpu-oncall", "done")} <= set(rows), rows  # escalations wait 1h

    again = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=routing).start()
    try:
        await again.one_incident()
        await asyncio.sleep(0.5)  # anything left undone would be sent again by now
        assert len(triggers(pd, PagerDutyTestServer.ROUTING_KEY)) == 1
        assert len(posts(slack, "#gpu-oncall", top=True)) == 1
    finally:
        await again.stop()
