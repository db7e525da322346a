"""Slack interactivity at POST /api/v1/slack/actions: signatures, replays, fast answers, recorded actors."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time

import pytest

from alertd.web.slack_actions import ACTIONS
from testkit.notify_harness import SECRET, Harness, hook, top_messages, wait_for, xid_alert


@pytest.fixture
async def opened(harness, slack):
    await harness.post(hook(xid_alert("n1", 3)))
    await wait_for(lambda: top_messages(slack, "#gpu-oncall"))
    inc = await harness.one_incident()
    return harness, inc["id"]


async def post_action(h: Harness, body: bytes, headers: dict) -> int:
    resp = await h.client.post("/api/v1/slack/actions", data=body, headers=headers)
    return resp.status


async def state(h: Harness, incident_id: str) -> tuple[str, int]:
    inc = await h.incident(incident_id)
    return inc["status"], len(inc["timeline"])


async def test_valid_click_acknowledges_and_records_who(opened, slack):
    h, inc_id = opened
    body = h.action_body("alertd_ack", inc_id, user=("U0ANA", "ana"))
    started = time.monotonic()
    assert await post_action(h, body, h.signed(body)) == 200
    assert time.monotonic() - started < 3.0
    await h.actions_idle()
    inc = await h.incident(inc_id)
    assert inc["status"] == "acknowledged" and inc["acknowledgedBy"] == "ana (slack:U0ANA)"
    ack = [e for e in inc["timeline"] if e["kind"] == "acknowledged"]
    assert ack and ack[0]["actor"] == "ana (slack:U0ANA)"
    ts = top_messages(slack, "#gpu-oncall")[0]["ts"]
    await wait_for(lambda: "ACKNOWLEDGED" in slack.messages["#gpu-oncall"][ts]["text"])
    await wait_for(lambda: any("acknowledged by ana" in json.dumps(r["blocks"]) for r in slack.replies("#gpu-oncall", ts)))
    buttons = [e["action_id"] for b in slack.messages["#gpu-oncall"][ts]["blocks"] if b["type"] == "actions"
               for e in b["elements"]]
    assert "alertd_ack" not in buttons and "alertd_resolve" in buttons


async def test_resolve_click(opened, slack):
    h, inc_id = opened
    assert await h.click("alertd_resolve", inc_id, user=("U0BO", "bo")) == 200
    await h.actions_idle()
    inc = await h.incident(inc_id)
    assert inc["status"] == "resolved"
    assert any(e["kind"] == "resolved" and e["actor"] == "bo (slack:U0BO)" for e in inc["timeline"])


@pytest.mark.parametrize("case", ["unsigned", "no_timestamp", "expired", "future", "tampered", "wrong_secret",
                                  "garbage_signature"])
async def test_bad_requests_get_401_and_change_nothing(opened, case):
    h, inc_id = opened
    before = await state(h, inc_id)
    body = h.action_body("alertd_ack", inc_id)
    headers = h.signed(body)
    if case == "unsigned":
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
    elif case == "no_timestamp":
        del headers["X-Slack-Request-Timestamp"]
    elif case == "expired":
        headers = h.signed(body, timestamp=int(time.time()) - 6 * 60)  # correctly signed, too old
    elif case == "future":
        headers = h.signed(body, timestamp=int(time.time()) + 6 * 60)
    elif case == "tampered":
        body = h.action_body("alertd_resolve", inc_id)  # the signature was made for the ack body
    elif case == "wrong_secret":
        headers = h.signed(body, secret=SECRET[::-1])
    elif case == "garbage_signature":
        headers["X-Slack-Signature"] = "v0=" + "0" * 64
    assert await post_action(h, body, headers) == 401
    await h.actions_idle()
    await asyncio.sleep(0.2)
    assert await state(h, inc_id) == before


async def test_replayed_request_is_refused(opened):
    h, inc_id = opened
    body = h.action_body("alertd_resolve", inc_id)
    headers = h.signed(body)
    # the first delivery does nothing visible yet: the replay must still be refused
    assert await post_action(h, body, headers) == 200
    assert await post_action(h, body, headers) == 401
    await h.actions_idle()
    inc = await h.incident(inc_id)
    assert sum(1 for e in inc["timeline"] if e["kind"] == "resolved") == 1


async def test_replay_is_refused_after_a_restart(opened, tmp_path, slack):
    """The replay cache is in the store: a captured click replayed after a restart still gets 401."""
    h, inc_id = opened
    body = h.action_body("alertd_ack", inc_id)
    headers = h.signed(body)
    assert await post_action(h, body, headers) == 200
    await h.actions_idle()
    await h.stop()
    again = await Harness(tmp_path, slack=slack, db=h.db).start()
    try:
        assert await post_action(again, body, headers) == 401
        other = again.action_body("alertd_resolve", inc_id)  # a fresh signed click still works
        assert await post_action(again, other, again.signed(other)) == 200
        await again.actions_idle()
        assert (await again.incident(inc_id))["status"] == "resolved"
    finally:
        await again.stop()


async def test_clicks_are_in_the_audit_trail_with_the_clicker(opened):
    h, inc_id = opened
    assert await h.click("alertd_ack", inc_id, user=("U0ANA", "ana")) == 200
    await h.actions_idle()
    assert await h.click("alertd_ack", inc_id, user=("U0BOB", "bob")) == 200
    await h.actions_idle()
    entries = [(e.actor, e.action, e.target, e.via, e.outcome) for e in reversed(await h.store.list_audit())]
    assert entries[0] == ("ana (slack:U0ANA)", "ack", inc_id, "slack", "ok")
    assert entries[1][:4] == ("bob (slack:U0BOB)", "ack", inc_id, "slack") and entries[1][4].startswith("refused")


async def test_answer_comes_before_slow_work(opened, monkeypatch):
    h, inc_id = opened
    done = asyncio.Event()
    original = h.svc.run

    async def slow(command):
        await asyncio.sleep(4)
        result = await original(command)
        done.set()
        return result
    monkeypatch.setattr(h.svc, "run", slow)
    started = time.monotonic()
    assert await h.click("alertd_ack", inc_id) == 200
    assert time.monotonic() - started < 1.0  # Slack wants an answer within 3 s
    await asyncio.wait_for(done.wait(), 10)
    assert (await h.incident(inc_id))["status"] == "acknowledged"


async def test_bad_payload_is_400_and_other_interactions_are_ignored(opened):
    h, inc_id = opened
    body = b"payload=not-json"
    assert await post_action(h, body, h.signed(body)) == 400
    body = b"payload=" + json.dumps({"type": "view_submission"}).encode()
    assert await post_action(h, body, h.signed(body)) == 200
    before = await state(h, inc_id)
    await h.actions_idle()
    assert await state(h, inc_id) == before


async def test_without_a_signing_secret_the_endpoint_is_closed(tmp_path, slack):
    h = await Harness(tmp_path, slack=slack, slack_extra={"signing_secret": ""}).start()
    try:
        body = h.action_body("alertd_ack", "INC-1")
        assert await post_action(h, body, h.signed(body)) == 503
    finally:
        await h.stop()


async def test_a_click_signed_ahead_of_the_clock_cannot_be_replayed_later(opened):
    """A timestamp up to 5 minutes ahead is valid until 5 minutes after it: its signature is remembered that long."""
    h, inc_id = opened
    actions = h.app[ACTIONS]
    start = time.time()
    actions.wall_clock = lambda: start
    body = h.action_body("alertd_ack", inc_id)
    headers = h.signed(body, timestamp=int(start) + 290)
    assert await post_action(h, body, headers) == 200
    await h.actions_idle()
    for later in (100, 370, 585):  # past the old 360 s memory, still inside the timestamp's own window
        actions.wall_clock = lambda later=later: start + later
        assert await post_action(h, body, headers) == 401, later
    inc = await h.incident(inc_id)
    assert sum(1 for e in inc["timeline"] if e["kind"] == "acknowledged") == 1


@pytest.mark.parametrize("timestamp", ["9" * 400, "-" + "9" * 30, "1e9", " 17", "१७००००००००"])
async def test_timestamps_that_are_not_unix_seconds_get_401(opened, timestamp):
    h, inc_id = opened
    body = h.action_body("alertd_ack", inc_id)
    headers = {**h.signed(body), "X-Slack-Request-Timestamp": timestamp}
    headers["X-Slack-Signature"] = "v0=" + hmac.new(SECRET.encode(), f"v0:{timestamp}:".encode() + body,
                                                    hashlib.sha256).hexdigest()
    assert await post_action(h, body, headers) == 401
