"""A Slack post whose answer is lost is found in the channel's history by its metadata, never posted twice.

In-process against the Slack test server: the ordinary first post carries the metadata and reads no
history; a post that Slack took but whose answer was dropped is adopted on the retry (one history read),
and later changes edit that message; a token without the history scope is logged once and alertd posts
as before. The kill -9 case with real processes is in tests/integration/test_slack_lost_post_process.py.
"""
from __future__ import annotations

import logging

from alertd.integrations.slack.lost import EVENT_TYPE
from testkit.notify_harness import Harness, hook, one_channel, posts, top_messages, wait_for, xid_alert
from testkit.slack_server import SlackTestServer


async def test_ordinary_first_post_carries_metadata_and_reads_no_history(harness, slack):
    await harness.post(hook(xid_alert("n1", 0)))
    await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
    inc = await harness.one_incident()
    (call,) = posts(slack, "#gpu-oncall", top=True)
    assert call.params["metadata"] == {"event_type": EVENT_TYPE, "event_payload": {
        "installation": harness.cfg.installation_id, "incident": inc["id"]}}
    assert harness.cfg.installation_id  # generated at the start, stored
    await harness.post(hook(xid_alert("n1", 1)))  # a change: edited in place
    await wait_for(lambda: slack.calls_of("chat.update"))
    assert slack.calls_of("conversations.history") == []
    assert len(posts(slack, "#gpu-oncall", top=True)) == 1


async def test_post_whose_answer_was_lost_is_adopted_not_posted_again(harness, slack):
    slack.lose_reply_next("chat.postMessage")  # Slack keeps the message; alertd never hears the ts
    await harness.post(hook(xid_alert("n1", 0)))
    await wait_for(lambda: slack.calls_of("conversations.history"), timeout=15)
    inc = await harness.one_incident()
    await wait_for(lambda: harness.store.notify_ref(inc["id"], "slack:#gpu-oncall"))
    (message,) = top_messages(slack, "#gpu-oncall")
    ref = await harness.store.notify_ref(inc["id"], "slack:#gpu-oncall")
    assert ref == f"{slack.channel_id('#gpu-oncall')}|{message['ts']}"
    (history,) = slack.calls_of("conversations.history")
    assert history.params["channel"] == slack.channel_id("#gpu-oncall")  # the id, learnt from no answer
    assert history.params["include_all_metadata"] in ("1", "true", True) and float(history.params["oldest"]) > 0

    await harness.post(hook(xid_alert("n1", 1)))  # later changes edit the adopted message
    await wait_for(lambda: slack.messages["#gpu-oncall"][message["ts"]]["updates"] >= 1, timeout=15)
    assert len(posts(slack, "#gpu-oncall", top=True)) == 1 and len(top_messages(slack, "#gpu-oncall")) == 1
    assert len(slack.calls_of("conversations.history")) == 1


async def test_lost_answer_in_a_channel_configured_by_id(tmp_path):
    """No earlier answer taught the id: the target is the id itself; a busy channel is paged through."""
    cid = "C0GPUONCALL"
    server = SlackTestServer(token="xoxb-test", signing_secret="x", max_history_limit=15)
    await server.start()
    h = await Harness(tmp_path, slack=server, routing=one_channel(cid)).start()
    try:
        server.lose_reply_next("chat.postMessage")
        await h.post(hook(xid_alert("n1", 0)))
        await wait_for(lambda: top_messages(server, cid))
        for i in range(40):  # people talk in the channel before alertd retries: the message is pages back
            server._post_message({"channel": cid, "text": f"chatter {i}"})
        await wait_for(lambda: server.calls_of("conversations.history"), timeout=15)
        inc = await h.one_incident()
        await wait_for(lambda: h.store.notify_ref(inc["id"], f"slack:{cid}"))
        assert len([m for m in top_messages(server, cid) if "chatter" not in m["text"]]) == 1
        assert len(posts(server, cid, top=True)) == 1
        assert len(server.calls_of("conversations.history")) == 3  # 15 + 15 + the page holding it
    finally:
        await h.stop()
        await server.stop()


async def test_without_the_history_scope_it_says_so_once_and_posts(tmp_path, caplog):
    server = SlackTestServer(token="xoxb-test", signing_secret="x", scopes={"chat:write", "channels:read", "groups:read"})
    await server.start()
    h = await Harness(tmp_path, slack=server).start()
    caplog.set_level(logging.ERROR, logger="alertd.integrations.slack.integration")
    try:
        server.lose_reply_next("chat.postMessage", count=2)
        await h.post(hook(xid_alert("n1", 0)))
        await h.post(hook(xid_alert("n2", 0, cluster="prod-b"), node="n2", cluster="prod-b"))  # another cluster: no storm pending
        await wait_for(lambda: len(server.calls_of("conversations.history")) == 2, timeout=20)
        await wait_for(lambda: len(top_messages(server, "#gpu-oncall")) == 4, timeout=20)
        told = [r.getMessage() for r in caplog.records if "conversations.history" in r.getMessage()]
        assert len(told) == 1 and "missing_scope" in told[0] and "channels:history" in told[0], told
    finally:
        await h.stop()
        await server.stop()
