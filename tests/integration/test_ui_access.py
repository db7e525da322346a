"""Who may see and do what in the web UI: token login -> session cookie, roles, the trusted proxy header."""
from __future__ import annotations

from urllib.parse import unquote

import pytest

from alertd.config import parse_config
from tests.support import ui_scenario as sc
from tests.support.notify_harness import Harness

READER, ACTOR = "r3ader-t0ken-0123456789", "act0r-t0ken-0123456789"


@pytest.fixture
async def secured(tmp_path):
    h = Harness(tmp_path)
    doc = dict(h.cfg.raw)
    doc["api"] = {"auth": {"tokens": [{"name": "viewer", "role": "read", "token": READER},
                                      {"name": "oncall", "role": "act", "token": ACTOR}],
                           "trusted_proxy": {"header": "X-Forwarded-User", "users": {"ana": "act"}}}}
    h.cfg = parse_config(doc, "test")
    await h.start()
    h.client.session.headers["Authorization"] = f"Bearer {ACTOR}"  # the scenario posts through the API
    ids = await sc.build(h)
    del h.client.session.headers["Authorization"]
    yield h, ids
    await h.stop()


async def login(h: Harness, token: str, target: str = "/ui/incidents"):
    return await h.client.post("/ui/login", data={"token": token, "next": target}, allow_redirects=False)


async def test_pages_need_a_login_that_sets_a_session_cookie(secured):
    h, ids = secured
    resp = await h.client.get(f"/ui/incidents/{ids['b07']}", allow_redirects=False)
    assert resp.status == 303 and unquote(resp.headers["Location"]) == f"/ui/login?next=/ui/incidents/{ids['b07']}"
    assert (await login(h, "wrong")).status == 401
    resp = await login(h, READER, f"/ui/incidents/{ids['b07']}")
    assert resp.status == 303 and resp.headers["Location"] == f"/ui/incidents/{ids['b07']}"
    cookie = resp.cookies["alertd_session"]
    assert cookie["httponly"] and cookie["samesite"] == "Strict" and READER not in cookie.value
    page = await h.client.get(f"/ui/incidents/{ids['b07']}")
    text = await page.text()
    assert page.status == 200 and "viewer (read)" in text and "Acknowledge" not in text  # read: no buttons
    assert (await h.client.get("/api/v1/gpus")).status == 200  # the cookie works for the API too
    resp = await h.client.post(f"/ui/incidents/{ids['b07']}/action", data={"action": "ack"},
                               headers={"Origin": str(h.client.make_url("")).rstrip("/")})
    assert resp.status == 403
    assert (await login(h, "x", "https://evil.example/")).status == 401
    resp = await login(h, ACTOR, "//evil.example/")
    assert resp.headers["Location"] == "/ui/incidents"  # never sent elsewhere after a login


async def test_act_role_acts_from_the_same_origin_only(secured):
    h, ids = secured
    await login(h, ACTOR)
    origin = str(h.client.make_url("")).rstrip("/")
    resp = await h.client.post(f"/ui/incidents/{ids['b07']}/action", data={"action": "ack"},
                               headers={"Origin": "https://evil.example"})
    assert resp.status == 403
    resp = await h.client.post(f"/ui/incidents/{ids['b07']}/action", data={"action": "ack"},
                               headers={"Origin": origin}, allow_redirects=False)
    assert resp.status == 303 and resp.headers["Location"].endswith("?done=acknowledged")
    h.client.session.headers["Authorization"] = f"Bearer {READER}"
    doc = await h.incident(ids["b07"])
    assert doc["status"] == "acknowledged" and doc["acknowledgedBy"] == "oncall"
    resp = await h.client.get("/api/v1/audit", headers={"Authorization": f"Bearer {ACTOR}"})
    assert resp.status == 403  # audit needs admin: the UI session adds nothing to a token's role


async def test_logout_ends_the_session(secured):
    h, _ = secured
    await login(h, READER)
    assert (await h.client.get("/ui/fleet")).status == 200
    await h.client.post("/ui/logout")
    assert (await h.client.get("/ui/fleet", allow_redirects=False)).status == 303


async def test_trusted_proxy_header_needs_no_login(secured):
    h, ids = secured
    resp = await h.client.get(f"/ui/incidents/{ids['c02']}", headers={"X-Forwarded-User": "ana"})
    text = await resp.text()
    assert resp.status == 200 and "ana (act)" in text and "Acknowledge" in text and "Log out" not in text
    resp = await h.client.get("/ui/rma", headers={"X-Forwarded-User": "bob"})
    assert resp.status == 200 and "bob (read)" in await resp.text()
