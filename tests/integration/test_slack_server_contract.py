"""The Slack test server keeps the real Web API's contract, driven with slack_sdk's AsyncWebClient (the
client alertd uses against Slack) and plain aiohttp for the form-encoded calls."""
from __future__ import annotations

import json
import re
import time

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from testkit.slack_server import SlackTestServer

TS = re.compile(r"^\d{10}\.\d{6}$")


@pytest.fixture
def web(slack):  # slack: the test server from conftest.py
    return AsyncWebClient(token="xoxb-test", base_url=slack.base_url)


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


async def test_slack_base_url_is_the_api_root(slack):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/api/", slack.base_url)


async def test_slack_post_message_with_blocks(slack, web):
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": "Xid 79 on gpu-node-1"}},
              section("*GPU has fallen off the bus*")]
    resp = await web.chat_postMessage(channel="#gpu-alerts", text="Xid 79 on gpu-node-1", blocks=blocks)
    assert resp["ok"] is True
    assert resp["channel"].startswith("C") and resp["channel"] != "#gpu-alerts"
    assert TS.match(resp["ts"])
    assert resp["message"]["text"] == "Xid 79 on gpu-node-1" and resp["message"]["blocks"] == blocks
    stored = slack.messages[resp["channel"]][resp["ts"]]
    assert stored["blocks"] == blocks and stored["updates"] == 0 and "thread_ts" not in stored
    assert slack.messages["#gpu-alerts"] is slack.messages[resp["channel"]]  # names resolve to the ID
    method, params, at = slack.calls[-1]
    assert method == "chat.postMessage" and params["channel"] == "#gpu-alerts" and at <= time.monotonic()


async def test_slack_ts_are_unique_and_increasing(web):
    seen = []
    for i in range(20):
        resp = await web.chat_postMessage(channel="C0123ABCD", text=f"m{i}")
        seen.append(resp["ts"])
    assert seen == sorted(seen, key=float) and len(set(seen)) == 20


async def test_slack_update_replaces_content(slack, web):
    posted = await web.chat_postMessage(channel="#gpu-alerts", text="firing", blocks=[section("firing")])
    resp = await web.chat_update(channel=posted["channel"], ts=posted["ts"], text="resolved",
                                 blocks=[section("resolved")])
    assert resp["ok"] and resp["channel"] == posted["channel"] and resp["ts"] == posted["ts"]
    assert resp["text"] == "resolved"
    stored = slack.messages[posted["channel"]][posted["ts"]]
    assert stored["text"] == "resolved" and stored["blocks"] == [section("resolved")] and stored["updates"] == 1


async def test_slack_update_unknown_ts_and_channel_name(web):
    posted = await web.chat_postMessage(channel="#gpu-alerts", text="x")
    with pytest.raises(SlackApiError) as err:
        await web.chat_update(channel=posted["channel"], ts="1700000000.000001", text="y")
    assert err.value.response["error"] == "message_not_found"
    with pytest.raises(SlackApiError) as err:  # chat.update wants the channel ID
        await web.chat_update(channel="#gpu-alerts", ts=posted["ts"], text="y")
    assert err.value.response["error"] == "channel_not_found"


async def test_slack_threads(slack, web):
    parent = await web.chat_postMessage(channel="#gpu-alerts", text="incident")
    r1 = await web.chat_postMessage(channel=parent["channel"], text="update 1", thread_ts=parent["ts"])
    r2 = await web.chat_postMessage(channel="#gpu-alerts", text="update 2", thread_ts=parent["ts"])
    assert r1["message"]["thread_ts"] == parent["ts"]
    assert [m["text"] for m in slack.replies(parent["channel"], parent["ts"])] == ["update 1", "update 2"]
    assert slack.messages[parent["channel"]][parent["ts"]]["reply_count"] == 2
    for bad in ("1700000000.000001", r2["ts"]):  # unknown, or a reply rather than a parent
        with pytest.raises(SlackApiError) as err:
            await web.chat_postMessage(channel="#gpu-alerts", text="x", thread_ts=bad)
        assert err.value.response["error"] == "thread_not_found"
    with pytest.raises(SlackApiError) as err:  # the parent is in another channel
        await web.chat_postMessage(channel="#other", text="x", thread_ts=parent["ts"])
    assert err.value.response["error"] == "thread_not_found"


async def test_slack_auth_errors(slack):
    with pytest.raises(SlackApiError) as err:
        await AsyncWebClient(token="xoxb-wrong", base_url=slack.base_url).chat_postMessage(channel="#a", text="x")
    assert err.value.response.status_code == 200 and err.value.response["error"] == "invalid_auth"
    with pytest.raises(SlackApiError) as err:
        await AsyncWebClient(base_url=slack.base_url).chat_postMessage(channel="#a", text="x")
    assert err.value.response["error"] == "not_authed"
    assert slack.messages == {}


async def test_slack_auth_test(web):
    resp = await web.auth_test()
    assert resp["ok"] and resp["user_id"] and resp["bot_id"]


async def test_slack_channel_validation(slack):
    restricted = SlackTestServer(channels={"#gpu-alerts": "C0GPUALERT"})
    base_url = await restricted.start()
    try:
        web = AsyncWebClient(token="xoxb-test", base_url=base_url)
        resp = await web.chat_postMessage(channel="#gpu-alerts", text="x")
        assert resp["channel"] == "C0GPUALERT"
        assert (await web.chat_postMessage(channel="C0GPUALERT", text="y"))["channel"] == "C0GPUALERT"
        for channel in ("#random", "C0NOTTHERE", ""):
            with pytest.raises(SlackApiError) as err:
                await web.chat_postMessage(channel=channel, text="x")
            assert err.value.response["error"] == "channel_not_found"
    finally:
        await restricted.stop()
    # default: '#name' or a C... ID exists, anything else does not
    web = AsyncWebClient(token="xoxb-test", base_url=slack.base_url)
    with pytest.raises(SlackApiError) as err:
        await web.chat_postMessage(channel="gpu-alerts", text="x")
    assert err.value.response["error"] == "channel_not_found"


async def test_slack_no_text(web):
    with pytest.raises(SlackApiError) as err, pytest.warns(UserWarning, match="text"):
        await web.chat_postMessage(channel="#gpu-alerts", text="")
    assert err.value.response["error"] == "no_text"
    # blocks alone are enough (slack_sdk warns that the fallback text is missing)
    with pytest.warns(UserWarning, match="text"):
        assert (await web.chat_postMessage(channel="#gpu-alerts", blocks=[section("only blocks")]))["ok"]


@pytest.mark.parametrize("blocks, pointer", [
    ([section(f"b{i}") for i in range(51)], "/blocks"),
    ([section("x" * 3001)], "/blocks/0/text/text"),
    ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "/blocks/0/text/text"),
    ([{"type": "header", "text": {"type": "mrkdwn", "text": "*h*"}}], "/blocks/0/text/type"),
    ([section("")], "/blocks/0/text/text"),
    ([{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}], "/blocks/0/fields"),
    ([{"type": "bogus"}], "/blocks/0/type"),
])
async def test_slack_invalid_blocks(web, blocks, pointer):
    with pytest.raises(SlackApiError) as err:
        await web.chat_postMessage(channel="#gpu-alerts", text="x", blocks=blocks)
    assert err.value.response["error"] == "invalid_blocks"
    assert any(f"[json-pointer:{pointer}]" in e for e in err.value.response["errors"])


async def test_slack_block_limits_are_inclusive(web):
    assert (await web.chat_postMessage(channel="#a", text="x", blocks=[section(f"b{i}") for i in range(50)]))["ok"]
    assert (await web.chat_postMessage(channel="#a", text="x", blocks=[section("x" * 3000)]))["ok"]
    header = {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}}
    assert (await web.chat_postMessage(channel="#a", text="x", blocks=[header]))["ok"]


async def test_slack_update_validates_blocks(web):
    posted = await web.chat_postMessage(channel="#a", text="x")
    with pytest.raises(SlackApiError) as err:
        await web.chat_update(channel=posted["channel"], ts=posted["ts"], text="y",
                              blocks=[section(str(i)) for i in range(51)])
    assert err.value.response["error"] == "invalid_blocks"


async def test_slack_429_surfaces_with_retry_after(slack, web):
    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    with pytest.raises(SlackApiError) as err:
        await web.chat_postMessage(channel="#gpu-alerts", text="x")
    resp = err.value.response
    assert resp.status_code == 429 and resp["error"] == "ratelimited"
    assert resp.headers["Retry-After"] == "1"
    assert slack.messages == {}
    assert (await web.chat_postMessage(channel="#gpu-alerts", text="x"))["ok"]  # only the next call failed


async def test_slack_rate_limit_retry_handler_retries(slack):
    slack.fail_next("chat.postMessage", status=429, retry_after=1)
    web = AsyncWebClient(token="xoxb-test", base_url=slack.base_url,
                         retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])
    started = time.monotonic()
    resp = await web.chat_postMessage(channel="#gpu-alerts", text="x")
    assert resp["ok"] and time.monotonic() - started >= 1.0
    assert [c.method for c in slack.calls] == ["chat.postMessage", "chat.postMessage"]
    assert slack.calls[1].at - slack.calls[0].at >= 1.0


async def test_slack_server_error_and_delay(slack, web):
    slack.fail_next("chat.update", status=500)
    posted = await web.chat_postMessage(channel="#a", text="x")  # other methods unaffected
    with pytest.raises(SlackApiError) as err:
        await web.chat_update(channel=posted["channel"], ts=posted["ts"], text="y")
    assert err.value.response.status_code == 500
    slack.fail_next(status=200, error="fatal_error")
    with pytest.raises(SlackApiError) as err:
        await web.chat_postMessage(channel="#a", text="x")
    assert err.value.response["error"] == "fatal_error"
    slack.delay = 0.3
    started = time.monotonic()
    await web.chat_postMessage(channel="#a", text="slow")
    assert time.monotonic() - started >= 0.3


async def test_slack_per_channel_rate_limit(session):
    server = SlackTestServer(rate_limit_per_channel_per_s=1.0)
    base_url = await server.start()
    try:
        web = AsyncWebClient(token="xoxb-test", base_url=base_url)
        await web.chat_postMessage(channel="#a", text="1")
        with pytest.raises(SlackApiError) as err:
            await web.chat_postMessage(channel="#a", text="2")
        assert err.value.response.status_code == 429 and err.value.response.headers["Retry-After"] == "1"
        assert (await web.chat_postMessage(channel="#b", text="other channel"))["ok"]
    finally:
        await server.stop()


async def test_slack_form_encoded_and_token_argument(slack, session):
    blocks = [section("form")]
    form = {"token": "xoxb-test", "channel": "#gpu-alerts", "text": "via form", "blocks": json.dumps(blocks)}
    async with session.post(slack.base_url + "chat.postMessage", data=form) as resp:
        body = await resp.json()
    assert resp.status == 200 and body["ok"], body
    assert slack.messages[body["channel"]][body["ts"]]["blocks"] == blocks
    # a JSON body cannot carry the token, and JSON without charset draws Slack's warning
    async with session.post(slack.base_url + "chat.postMessage",
                         data=json.dumps({"token": "xoxb-test", "channel": "#a", "text": "x"}),
                         headers={"Content-Type": "application/json"}) as resp:
        body = await resp.json()
    assert body == {"ok": False, "error": "not_authed", "response_metadata": {"warnings": ["missing_charset"]}}
    async with session.post(slack.base_url + "chat.postMessage", data={"channel": "#a", "text": "x",
                                                                    "blocks": "[not json"},
                         headers={"Authorization": "Bearer xoxb-test"}) as resp:
        assert (await resp.json())["error"] == "invalid_blocks_format"
