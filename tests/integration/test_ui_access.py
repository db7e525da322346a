"""Who may see and do what in the web UI: token login -> session cookie, roles, the trusted proxy header."""
from __future__ import annotations

import asyncio
from urllib.parse import unquote

import pytest

from alertd.config.settings import parse_config
from alertd.web.auth import AUTH, Authenticator
from testkit import ui_scenario as sc
from testkit.notify_harness import Harness, hook, xid_alert

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
    # the cookie works for the API too, from alertd's own pages only (Sec-Fetch-Site or Origin says so)
    assert (await h.client.get("/api/v1/gpus", headers={"Sec-Fetch-Site": "same-origin"})).status == 200
    assert (await h.client.get("/api/v1/gpus")).status == 401
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


# ----- sessions: server-side, revocable, shared by every process over one store -----

@pytest.fixture
async def locked(tmp_path):
    """The API locked with two tokens, no history posted (these tests need at most one incident)."""
    h = Harness(tmp_path)
    doc = dict(h.cfg.raw)
    doc["api"] = {"auth": {"tokens": [{"name": "viewer", "role": "read", "token": READER},
                                      {"name": "oncall", "role": "act", "token": ACTOR}]}}
    h.cfg = parse_config(doc, "test")
    await h.start()
    yield h, {}
    await h.stop()


async def one_incident(h: Harness) -> str:
    await h.post(hook(xid_alert("gpu-n1", 3), node="gpu-n1"))
    for _ in range(200):
        resp = await h.client.get("/api/v1/incidents", headers={"Authorization": f"Bearer {READER}"})
        if rows := (await resp.json())["incidents"]:
            return str(rows[0]["id"])
        await asyncio.sleep(0.05)
    raise AssertionError("no incident")


SAME = {"Sec-Fetch-Site": "same-origin"}


async def test_a_logged_out_cookie_replayed_is_refused(locked):
    h, _ = locked
    resp = await login(h, READER)
    stolen = resp.cookies["alertd_session"].value
    await h.client.post("/ui/logout", headers=SAME)
    for path in ("/ui/fleet", "/api/v1/gpus"):  # the old cookie, sent again as an attacker who copied it would
        resp = await h.client.get(path, headers={"Cookie": f"alertd_session={stolen}", **SAME}, allow_redirects=False)
        assert resp.status in (303, 401), (path, resp.status)


async def test_the_cookie_is_random_and_reveals_nothing_about_the_token(locked):
    h, _ = locked
    values = []
    for _ in range(2):
        resp = await login(h, READER)
        values.append(resp.cookies["alertd_session"].value)
    assert values[0] != values[1] and all(len(v) >= 40 for v in values)
    for value in values:  # no name, role, expiry or MAC in it: 32 random bytes, url-safe base64
        assert "viewer" not in value and "read" not in value and "." not in value and "|" not in value
    rows = await h.store.db.run(h.store.db.query, "SELECT id, name, token FROM sessions")
    assert len(rows) == 2 and {r[1] for r in rows} == {"viewer"}
    assert not {r[0] for r in rows} & set(values)  # the store keeps hashes of the ids, not the ids
    assert all(READER not in r[2] for r in rows)


async def test_rotating_a_token_away_ends_its_sessions(locked):
    h, _ = locked
    await login(h, READER)
    assert (await h.client.get("/ui/fleet", allow_redirects=False)).status == 200
    doc = dict(h.cfg.raw)
    doc["api"] = {"auth": {"tokens": [{"name": "viewer", "role": "read", "token": "n3w-r3ader-t0ken-987654"}]}}
    h.app[AUTH].replace(Authenticator.from_config(parse_config(doc, "test")))  # what SIGHUP / POST /-/reload do
    assert (await h.client.get("/ui/fleet", allow_redirects=False)).status == 303


async def test_a_session_opened_on_one_process_counts_and_ends_on_another(locked, tmp_path):
    h, _ = locked
    other = Harness(h.tmp_path, db=h.db)  # a second receiver process over the same database
    other.cfg = h.cfg
    await other.start()
    try:
        cookie = {"Cookie": "alertd_session=" + (await login(h, READER)).cookies["alertd_session"].value}
        assert (await other.client.get("/ui/fleet", headers=cookie, allow_redirects=False)).status == 200
        await other.client.post("/ui/logout", headers={**cookie, **SAME})
        assert (await h.client.get("/ui/fleet", headers=cookie, allow_redirects=False)).status == 303
    finally:
        await other.stop()


async def test_sessions_on_two_replicas_over_postgresql(postgres, tmp_path):
    from aiohttp.test_utils import TestClient, TestServer

    from alertd.app.assemble import build_service
    from alertd.rules.ruleset import load_rules
    from alertd.store.postgres import PostgresStore
    from testkit.served import served
    from testkit.ha_cluster import fresh_database

    dsn = fresh_database(postgres.dsn)
    cfg = parse_config({"api": {"auth": {"tokens": [{"name": "viewer", "role": "read", "token": READER}]}},
                        "storage": {"backend": "postgres", "postgres_dsn": dsn}}, "test")
    clients = []
    for _ in range(2):
        svc = build_service(cfg, PostgresStore(dsn), load_rules(cfg.rule_paths), role="replica")
        clients.append(TestClient(TestServer(served(svc), host="127.0.0.1")))
        await clients[-1].start_server()
    try:
        a, b = clients
        resp = await a.post("/ui/login", data={"token": READER, "next": "/ui/fleet"}, allow_redirects=False)
        cookie = {"Cookie": "alertd_session=" + resp.cookies["alertd_session"].value}
        assert (await b.get("/ui/fleet", headers=cookie, allow_redirects=False)).status == 200
        await b.post("/ui/logout", headers={**cookie, **SAME})
        assert (await a.get("/ui/fleet", headers=cookie, allow_redirects=False)).status == 303
    finally:
        for c in clients:
            await c.close()


async def test_cookie_on_the_api_needs_a_same_origin_request(locked):
    h, _ = locked
    path = f"/api/v1/incidents/{await one_incident(h)}/ack"
    await login(h, ACTOR)
    for headers in ({}, {"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "same-site"},
                    {"Sec-Fetch-Site": "cross-site"}):
        assert (await h.client.get("/api/v1/gpus", headers=headers)).status in (401, 403), headers
        assert (await h.client.post(path, headers=headers)).status in (401, 403), headers
    origin = str(h.client.make_url("")).rstrip("/")
    assert (await h.client.post(path, headers={"Origin": origin})).status == 200


# ----- login: throttling, next=, Secure -----

async def test_wrong_tokens_are_throttled_per_client_with_retry_after(locked):
    h, _ = locked
    h.app[AUTH].hold_back = 0.0  # the edge would hold each 429 for its Retry-After
    statuses = [(await login(h, f"guess-{n:04d}-0123456789")).status for n in range(12)]
    assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429], statuses
    resp = await h.client.get("/api/v1/gpus", headers={"Authorization": "Bearer guess-0099-0123456789"})
    assert resp.status == 429 and 1 <= int(resp.headers["Retry-After"]) <= 6  # the API's tokens share the budget
    # A right token is taken while its client is throttled for wrong ones: another's guesses never lock it out
    assert (await login(h, READER)).status == 303
    resp = await h.client.get("/api/v1/gpus", headers={"Authorization": f"Bearer {READER}"})
    assert resp.status == 200


async def test_one_value_tried_from_many_clients_is_throttled(locked):
    h, _ = locked
    throttle = h.app[AUTH].throttle
    for n in range(5):
        throttle.failed(f"10.0.0.{n}", "the-same-guess-000000")
    assert throttle.retry_after("10.0.9.9", "the-same-guess-000000") > 0
    assert throttle.retry_after("10.0.9.9", "another-guess-0000000") == 0


@pytest.mark.parametrize("target", ["/%09/evil.example", "/\t/evil.example", "//evil.example", "/\\evil.example",
                                    "javascript:alert(1)", "https://evil.example/", "/%5Cevil.example", " //evil"])
async def test_login_never_redirects_off_the_site(locked, target):
    h, _ = locked
    page = await h.client.get("/ui/login", params={"next": target})
    assert "evil" not in await page.text() and "javascript" not in await page.text()
    resp = await login(h, READER, target)
    assert resp.status == 303 and resp.headers["Location"] == "/ui/incidents", resp.headers["Location"]


async def test_cookie_is_secure_behind_a_trusted_tls_proxy_only(locked, tmp_path):
    h, _ = locked
    resp = await h.client.post("/ui/login", data={"token": READER}, headers={"X-Forwarded-Proto": "https"},
                               allow_redirects=False)
    assert not resp.cookies["alertd_session"]["secure"]  # 127.0.0.1 is no configured proxy: not believed
    proxied = Harness(h.tmp_path, db=h.tmp_path / "proxied.sqlite3")
    doc = dict(h.cfg.raw)
    doc["api"] = {**doc["api"], "trusted_proxies": ["127.0.0.1"]}
    proxied.cfg = parse_config(doc, "test")
    await proxied.start()
    try:
        resp = await proxied.client.post("/ui/login", data={"token": READER}, headers={"X-Forwarded-Proto": "https"},
                                         allow_redirects=False)
        assert resp.cookies["alertd_session"]["secure"]
    finally:
        await proxied.stop()


async def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_budget(locked):
    h, _ = locked

    async def attempt(client: Harness, forwarded: str) -> int:
        resp = await client.client.post("/ui/login", data={"token": "wrong-guess-0123456789"},
                                        headers={"X-Forwarded-For": forwarded}, allow_redirects=False)
        return resp.status
    # not a configured proxy: X-Forwarded-For is the client's own claim and changes nothing
    assert [await attempt(h, f"203.0.113.{n}") for n in range(11)][-1] == 429
    proxied = Harness(h.tmp_path, db=h.tmp_path / "proxied.sqlite3")
    doc = dict(h.cfg.raw)
    doc["api"] = {**doc["api"], "trusted_proxies": ["127.0.0.1"]}
    proxied.cfg = parse_config(doc, "test")
    await proxied.start()
    try:
        proxied.app[AUTH].throttle.values.capacity = 1000  # this test is about the client budget only
        assert [await attempt(proxied, "198.51.100.7, 203.0.113.7") for _ in range(11)][-1] == 429
        assert await attempt(proxied, "198.51.100.7, 203.0.113.8") == 401  # another client behind the proxy
    finally:
        await proxied.stop()
