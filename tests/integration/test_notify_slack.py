"""Slack flow through the whole service against the Slack Web API test server.

The real slack_sdk client talks to testkit/slack_server.py over loopback:
one post per incident then edits in place, replies in its thread, the
per-channel rate, 429 Retry-After, coalescing, and no second post after a crash
between the post and the outbox commit. ``Harness`` (testkit/notify_harness.py)
and the fixtures (tests/integration/conftest.py) are shared by the test_notify_* modules.
"""
from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from alertd.config.settings import parse_config
from alertd.engine.pipeline import Engine
from alertd.core.service_metrics import Metrics
from alertd.core.model import Alert
from alertd.notify.outbox import OutboxWorker
from alertd.app.notifiers import build_router
from alertd.integrations.slack.integration import SlackNotifier, SlackSettings
from alertd.rules.ruleset import load_rules
from alertd.app.service import utcnow
from alertd.store.base import Step
from alertd.store.sqlite import SqliteStore
from testkit.slack_server import SlackTestServer
from testkit.webhooks import gpu_alert, webhook
from testkit.notify_harness import ROUTING, TOKEN, Harness, hook, posts, rules_dir, top_messages, wait_for, xid_alert

async def test_one_post_then_updates_in_place_and_replies_in_the_thread(harness, slack):
    await harness.post(hook(xid_alert("n1", 0)))
    await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
    (message,) = top_messages(slack, "#gpu-oncall")
    assert "Xid 79" in message["text"] and message["blocks"][0]["type"] == "header"
    inc = await harness.one_incident()
    assert message["text"].endswith(f"({inc['id']})")

    # a second GPU of the node joins: the message is edited and the thread says what joined
    await harness.post(hook(xid_alert("n1", 1)))
    await wait_for(lambda: slack.replies("#gpu-oncall", message["ts"]))
    await wait_for(lambda: slack.messages["#gpu-oncall"][message["ts"]]["updates"] >= 1)
    reply = slack.replies("#gpu-oncall", message["ts"])[0]
    assert "GPU 1" in reply["text"] or "GPU 1" in json.dumps(reply["blocks"])
    edited = slack.messages["#gpu-oncall"][message["ts"]]
    assert "2 firing" in json.dumps(edited["blocks"])

    # resolved from the API: edited at once, resolution summary in the thread
    resp = await harness.client.post(f"/api/v1/incidents/{inc['id']}/resolve", params={"by": "bo"})
    assert resp.status == 200
    await wait_for(lambda: "RESOLVED" in slack.messages["#gpu-oncall"][message["ts"]]["text"])
    await wait_for(lambda: len(slack.replies("#gpu-oncall", message["ts"])) >= 2)
    summary = json.dumps(slack.replies("#gpu-oncall", message["ts"])[-1]["blocks"])
    assert "resolved by bo" in summary and "Summary" in summary

    assert len(top_messages(slack, "#gpu-oncall")) == 1  # never a second top-level message
    assert len(posts(slack, "#gpu-oncall", top=True)) == 1
    assert {c.params["ts"] for c in slack.calls_of("chat.update")} == {message["ts"]}
    assert all(c.params["channel"] == slack.channel_id("#gpu-oncall") for c in slack.calls_of("chat.update"))
    assert not slack.messages.get("#gpu-alerts")  # not routed there


async def test_posts_to_one_channel_are_spaced_by_the_rate(tmp_path, slack):
    h = await Harness(tmp_path, slack=slack, per_channel=4.0).start()  # 0.25 s apart
    try:
        for i in range(5):  # one cluster each: five incidents, not one storm
            await h.post(hook(xid_alert(f"rate-{i}", 0, cluster=f"c{i}"), node=f"rate-{i}", cluster=f"c{i}"))
        await wait_for(lambda: len(top_messages(slack, "#gpu-oncall")) == 5)
        times = [c.at for c in posts(slack, "#gpu-oncall", top=True)]
        gaps = [b - a for a, b in zip(times, times[1:])]
        # slots are 0.25 s apart; each post waits for its write-ahead store write after its slot, whose
        # time varies on a loaded machine by some milliseconds
        assert len(times) == 5 and min(gaps) >= 0.2 and times[-1] - times[0] >= 0.95, gaps
    finally:
        await h.stop()


async def test_429_waits_for_retry_after_then_posts_once(harness, slack):
    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    await harness.post(hook(xid_alert("n1", 0)))
    await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
    tries = posts(slack, "#gpu-oncall", top=True)
    assert len(tries) == 2 and tries[1].at - tries[0].at >= 1.0, [t.at for t in tries]
    assert len(top_messages(slack, "#gpu-oncall")) == 1


@pytest.mark.parametrize("status,body,content_type", [
    (502, b"<html><body>502 Bad Gateway</body></html>", "text/html"),
    (200, b"<html>maintenance</html>", "text/html"),
    (502, b"<html><body>502 Bad Gateway</body></html>", "text/plain"),  # read as text by slack_sdk
    (405, b"405 Method Not Allowed", "text/plain"),  # nginx in front of Slack
    (200, b"accepted", "text/plain"),
    (503, b'"unavailable"', "application/json"),  # JSON, but not an object
    (500, b"[]", "application/json"),
], ids=["html-502", "html-200", "text-502", "text-405", "text-200", "json-string-503", "json-list-500"])
async def test_a_non_json_answer_is_retried_and_named(harness, slack, caplog, status, body, content_type):
    """A proxy's error page in front of Slack: a retryable delivery error with a clear line, not an AttributeError
    inside slack_sdk (a notifier crash)."""
    slack.fail_next("chat.postMessage", status=status, body=body, content_type=content_type, count=2)
    await harness.post(hook(xid_alert("n1", 0)))
    await wait_for(lambda: top_messages(slack, "#gpu-oncall"), timeout=15)
    assert len(posts(slack, "#gpu-oncall", top=True)) == 3 and len(top_messages(slack, "#gpu-oncall")) == 1
    assert "AttributeError" not in caplog.text and "crashed" not in caplog.text, caplog.text
    assert caplog.text.count("is not Slack's JSON") == 2, caplog.text


async def test_bursts_are_coalesced_but_acknowledge_is_immediate(tmp_path, slack):
    h = await Harness(tmp_path, slack=slack, debounce="1500ms").start()
    try:
        await h.post(hook(xid_alert("n1", 0)))
        await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
        ts = top_messages(slack, "#gpu-oncall")[0]["ts"]
        for g in range(1, 6):  # five more GPUs fail within a second
            await h.post(hook(xid_alert("n1", g)))
            await asyncio.sleep(0.1)
        await wait_for(lambda: "6 firing" in json.dumps(slack.messages["#gpu-oncall"][ts]["blocks"]), timeout=10)
        await asyncio.sleep(2.0)
        updates = slack.calls_of("chat.update")
        assert 1 <= len(updates) <= 2, len(updates)  # five changes, one or two edits
        replies = slack.replies("#gpu-oncall", ts)
        text = " ".join(json.dumps(r["blocks"]) for r in replies)
        assert len(replies) <= 3 and all(f"GPU {g}" in text for g in range(1, 6))

        inc = await h.one_incident()
        before = len(slack.calls_of("chat.update"))
        started = time.monotonic()
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/ack", params={"by": "ana"})
        assert resp.status == 200
        await wait_for(lambda: len(slack.calls_of("chat.update")) > before, timeout=5)
        assert time.monotonic() - started < 1.2  # not held for the 1.5 s debounce
        assert "ACKNOWLEDGED" in slack.messages["#gpu-oncall"][ts]["text"]
    finally:
        await h.stop()


async def test_bad_token_and_unknown_channel_fail_without_retrying(tmp_path):
    server = SlackTestServer(token="xoxb-right", channels=["#gpu-alerts"])
    await server.start()
    try:
        h = await Harness(tmp_path, slack=server).start()  # configured with the wrong token
        try:
            await h.post(hook(xid_alert("n1", 0)))
            await wait_for(lambda: server.calls_of("chat.postMessage"))

            async def failed():
                return (await h.store.stats()).get("outbox_failed", 0) >= 1
            await wait_for(failed)
            await asyncio.sleep(1.0)
            assert len(server.calls_of("chat.postMessage")) == 1  # invalid_auth is never retried
        finally:
            await h.stop()
        (tmp_path / "b").mkdir()
        h = await Harness(tmp_path / "b", slack=server, slack_extra={"token": "xoxb-right"}).start()
        try:
            await h.post(hook(xid_alert("n2", 0), node="n2"))
            await wait_for(lambda: len(server.calls_of("chat.postMessage")) == 2)
            await asyncio.sleep(1.0)
            assert len(server.calls_of("chat.postMessage")) == 2  # channel_not_found is not retried either
            assert (await h.store.stats()).get("outbox_failed") == 1
        finally:
            await h.stop()
    finally:
        await server.stop()


async def test_no_second_post_after_a_crash_between_post_and_commit(tmp_path, slack):
    """The ts is saved right after chat.postMessage; a redelivery of the same item edits instead of posting."""
    rules = load_rules([rules_dir(tmp_path, ROUTING)])
    cfg = parse_config({"notify": {"slack": {"token": TOKEN, "base_url": slack.base_url, "debounce": "0s"}}}, "test")
    db = tmp_path / "crash.sqlite3"
    store = SqliteStore(db)
    await store.open()
    eng = Engine(rules)
    now = datetime.now(timezone.utc)
    a = Alert.from_wire({**xid_alert("n1", 0), "receivedAt": None})
    changes = eng.ingest([a], now)
    router = build_router(cfg, rules)
    items = [i for i in router.route(changes, now) if i.target.startswith("slack:")]
    assert [i.target for i in items] == ["slack:#gpu-oncall"]
    await store.commit_step(Step(changes=changes, outbox=items, next_seq=eng.state.next_seq))

    worker = OutboxWorker(store, {"slack": SlackNotifier(SlackSettings.from_config(cfg), store, utcnow)}, Metrics(), utcnow)

    class Killed(Exception):
        pass

    async def killed(*args, **kwargs):  # the process dies before the outbox commit
        raise Killed("kill -9")
    store.finish_outbox_batch = killed  # type: ignore[method-assign]
    with pytest.raises(Killed):
        await worker.drain()
    await worker.notifiers["slack"].close()
    store.db._executor.shutdown(wait=True)  # the dead process leaves its connection behind
    assert len(posts(slack, top=True)) == 1

    # restart on the same database: the item is still pending, and its ref is stored
    store2 = SqliteStore(db)
    await store2.open()
    try:
        assert (await store2.stats()).get("outbox_pending") == 1
        ref = await store2.notify_ref(changes[0].incident.id, "slack:#gpu-oncall")
        assert ref is not None
        notifier = SlackNotifier(SlackSettings.from_config(cfg), store2, utcnow)
        worker2 = OutboxWorker(store2, {"slack": notifier}, Metrics(), utcnow)
        await worker2.drain()
        await notifier.close()
        assert len(posts(slack, top=True)) == 1  # no duplicate
        (update,) = slack.calls_of("chat.update")
        (message,) = top_messages(slack, "#gpu-oncall")
        assert update.params["ts"] == message["ts"] and ref == f"{message['channel']}|{message['ts']}"
        assert (await store2.stats()).get("outbox_pending", 0) == 0
    finally:
        await store2.close()


async def test_deleted_message_is_posted_again(harness, slack):
    await harness.post(hook(xid_alert("n1", 0)))
    await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
    cid = slack.channel_id("#gpu-oncall")
    ts = top_messages(slack, "#gpu-oncall")[0]["ts"]
    del slack.messages[cid][ts]  # someone deleted it in Slack
    await harness.post(hook(xid_alert("n1", 1)))
    await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
    (again,) = top_messages(slack, "#gpu-oncall")
    assert again["ts"] != ts and "2 firing" in json.dumps(again["blocks"])


async def test_a_busy_channel_does_not_hold_up_other_channels(tmp_path, slack):
    h = await Harness(tmp_path, slack=slack, per_channel=1.0).start()
    try:
        for i in range(6):  # six pages into #gpu-oncall: about six seconds at one post per second
            await h.post(hook(xid_alert(f"busy-{i}", 0, cluster=f"c{i}"), node=f"busy-{i}", cluster=f"c{i}"))
        await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
        started = time.monotonic()
        warm = gpu_alert("q", "quiet-1", 0, 4, starts_at=datetime.now(timezone.utc) - timedelta(minutes=1))
        await h.post(webhook([warm], cluster="q", node="quiet-1"))
        await wait_for(lambda: top_messages(slack, "#gpu-alerts"), timeout=5)
        assert time.monotonic() - started < 1.5  # not queued behind the busy channel
        assert len(top_messages(slack, "#gpu-oncall")) < 6
        await wait_for(lambda: len(top_messages(slack, "#gpu-oncall")) == 6, timeout=15)
        times = [c.at for c in posts(slack, "#gpu-oncall", top=True)]
        assert min(b - a for a, b in zip(times, times[1:])) >= 0.95
    finally:
        await h.stop()
