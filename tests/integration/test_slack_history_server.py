"""The Slack test server's conversations.history, conversations.list and message metadata keep Slack's
documented contract, through the real slack_sdk client (what alertd's lookup of a lost post relies on)."""
from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from testkit.slack_server import SlackTestServer

META = {"event_type": "alertd_incident", "event_payload": {"installation": "ab12cd34", "incident": "INC-1"}}


async def serving(**kw) -> tuple[SlackTestServer, AsyncWebClient]:
    server = SlackTestServer(token="xoxb-h", **kw)
    await server.start()
    return server, AsyncWebClient(token="xoxb-h", base_url=server.base_url, retry_handlers=[])


async def error_of(call) -> SlackApiError:
    with pytest.raises(SlackApiError) as caught:
        await call
    return caught.value


async def test_history_pages_newest_first_and_shows_metadata_only_when_asked():
    server, client = await serving(max_history_limit=15)
    try:
        first = await client.chat_postMessage(channel="#gpu", text="incident", metadata=META)
        cid = first["channel"]
        await client.chat_postMessage(channel=cid, thread_ts=first["ts"], text="a reply")  # not in history
        for i in range(20):
            await client.chat_postMessage(channel=cid, text=f"chatter {i}")
        plain = await client.conversations_history(channel=cid, limit=100)
        assert len(plain["messages"]) == 15 and plain["has_more"]  # capped like an app outside the Marketplace
        assert plain["messages"][0]["text"] == "chatter 19" and "metadata" not in str(plain["messages"])
        rest = await client.conversations_history(channel=cid, limit=100, include_all_metadata=True,
                                                  cursor=plain["response_metadata"]["next_cursor"])
        assert [m["text"] for m in rest["messages"]] == [f"chatter {i}" for i in range(4, -1, -1)] + ["incident"]
        assert not rest["has_more"] and rest["response_metadata"]["next_cursor"] == ""
        assert rest["messages"][-1]["metadata"] == META
        after = await client.conversations_history(channel=cid, oldest=first["ts"], include_all_metadata=True)
        assert first["ts"] not in {m["ts"] for m in after["messages"]}  # oldest is exclusive
        inclusive = await client.conversations_history(channel=cid, oldest=first["ts"], inclusive=True, limit=15)
        assert len(inclusive["messages"]) == 15
    finally:
        await server.stop()


async def test_history_refuses_what_slack_refuses():
    server, client = await serving(scopes={"chat:write", "channels:read"}, not_member={"C0NOTMEMBR"})
    try:
        cid = (await client.chat_postMessage(channel="#gpu", text="x"))["channel"]
        missing = await error_of(client.conversations_history(channel=cid))
        assert missing.response["error"] == "missing_scope" and missing.response["needed"] == "channels:history"
        assert "chat:write" in missing.response["provided"]
        server.scopes = frozenset(server.scopes | {"channels:history"})
        assert (await error_of(client.conversations_history(channel="#gpu"))).response["error"] == "channel_not_found"
        assert (await error_of(client.conversations_history(channel="C0NOTMEMBR"))).response["error"] == "not_in_channel"
        assert (await error_of(client.conversations_history(channel=cid, cursor="%%%"))).response["error"] == "invalid_cursor"
        assert (await error_of(client.conversations_history(channel=cid, oldest="yesterday"))).response["error"] \
            == "invalid_ts_oldest"
        bad = await error_of(client.chat_postMessage(channel=cid, text="x", metadata={"event_type": "x"}))
        assert bad.response["error"] == "invalid_metadata_format"
    finally:
        await server.stop()


async def test_history_is_rate_limited_with_retry_after():
    server, client = await serving(history_per_minute=1)
    try:
        cid = (await client.chat_postMessage(channel="#gpu", text="x"))["channel"]
        await client.conversations_history(channel=cid)
        limited = await error_of(client.conversations_history(channel=cid))
        assert limited.response.status_code == 429 and limited.response["error"] == "ratelimited"
        assert 1 <= int(limited.response.headers["Retry-After"]) <= 60
    finally:
        await server.stop()


async def test_conversations_list_pages_and_needs_its_scopes():
    server, client = await serving()
    try:
        for i in range(5):
            await client.chat_postMessage(channel=f"#team-{i}", text="x")
        seen, cursor = [], ""
        while True:
            page = await client.conversations_list(types="public_channel,private_channel", limit=2, cursor=cursor or None)
            seen += [c["name"] for c in page["channels"]]
            cursor = page["response_metadata"]["next_cursor"]
            if not cursor:
                break
        assert sorted(seen) == [f"team-{i}" for i in range(5)]
        server.scopes = frozenset({"chat:write", "channels:read"})
        refused = await error_of(client.conversations_list(types="public_channel,private_channel"))
        assert refused.response["error"] == "missing_scope" and refused.response["needed"] == "groups:read"
    finally:
        await server.stop()
