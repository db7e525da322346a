"""The auth model over a real socket: every endpoint x {no token, wrong token, each role}, rotation,
the trusted proxy header, ``?by=``, failure accounting, and the audit trail of API actions."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from alertd.config.settings import parse_config
from alertd.rules.ruleset import load_rules
from alertd.app.service import Service
from alertd.store.sqlite import SqliteStore
from testkit.served import served
from tests.integration.test_service_inprocess import EXAMPLE, HOOK, ROOT, wait_for

TOKENS = {
    "reader": ("read", "rd-7c1f9a0e5b2d48c3a6e1"),
    "oncall": ("act", "act-2b8e4f61d9a3c7051e8f"),
    "boss": ("admin", "adm-9d3a1c7e5f2b4086a1d4"),
}
ROTATED = "act-new-0f5e9c2a7b1d4e3869c2"  # oncall's second, valid at the same time
HOOK_TOKEN = "hook-4a1b7e9c2d8f5063b1a7"
ROLE_RANK = {"read": 0, "act": 1, "admin": 2}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def auth_doc(tmp_path: Path, proxy: dict | None = None) -> dict:
    token_file = tmp_path / "oncall.tokens"
    token_file.write_text(f"{TOKENS['oncall'][1]}\n{ROTATED}\n")
    tokens = [{"name": n, "role": r, "token": t} for n, (r, t) in TOKENS.items() if n != "oncall"]
    tokens.append({"name": "oncall", "role": "act", "token_file": str(token_file)})
    api: dict = {"tokens": tokens}
    if proxy:
        api["trusted_proxy"] = proxy
    return {"api": {"auth": api}, "receiver": {"auth": {"bearer_token": HOOK_TOKEN}}}


async def start(tmp_path: Path, doc: dict) -> TestClient:
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}, **doc}, "test")
    svc = Service(cfg, SqliteStore(tmp_path / "db.sqlite3"), load_rules(cfg.rule_paths))
    client = TestClient(TestServer(served(svc), host="127.0.0.1"))
    await client.start_server()
    return client


@pytest.fixture
async def client(tmp_path):
    c = await start(tmp_path, auth_doc(tmp_path))
    yield c
    await c.close()


# (method, path, role needed); {id} is an incident that exists
API = [
    ("GET", "/api/v1/incidents", "read"),
    ("GET", "/api/v1/incidents/{id}", "read"),
    ("POST", "/api/v1/incidents/{id}/ack", "act"),
    ("POST", "/api/v1/incidents/{id}/resolve", "act"),
    ("POST", "/-/reload", "admin"),
    ("GET", "/api/v1/audit", "admin"),
]
OPEN = [("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")]
CALLERS = ["none", "wrong", "reader", "oncall", "boss"]


async def open_incident(client: TestClient) -> str:
    assert (await client.post(HOOK, json=EXAMPLE, headers=bearer(HOOK_TOKEN))).status == 200

    async def one() -> list:
        resp = await client.get("/api/v1/incidents", headers=bearer(TOKENS["reader"][1]))
        return (await resp.json())["incidents"]
    return (await wait_for(one))[0]["id"]


def headers_for(caller: str) -> dict[str, str]:
    if caller == "none":
        return {}
    if caller == "wrong":
        return bearer("not-a-token-of-anyone-123")
    return bearer(TOKENS[caller][1])


@pytest.mark.parametrize("method,path,role", API, ids=[f"{m} {p}" for m, p, _ in API])
async def test_every_api_endpoint_against_every_caller(client, method, path, role):
    incident = await open_incident(client)
    for caller in CALLERS:
        resp = await client.request(method, path.format(id=incident), headers=headers_for(caller))
        body = await resp.json()
        if caller in ("none", "wrong"):
            assert resp.status == 401 and resp.headers["WWW-Authenticate"] == "Bearer", (caller, body)
        elif ROLE_RANK[TOKENS[caller][0]] < ROLE_RANK[role]:
            assert resp.status == 403 and f"needs {role}" in body["error"], (caller, body)
        else:
            assert resp.status in (200, 409), (caller, resp.status, body)  # 409: resolved by an earlier caller


async def test_receiver_has_its_own_credentials(client):
    for headers, status in (({}, 401), (bearer("wrong-token-for-the-hook"), 401),
                            (bearer(TOKENS["boss"][1]), 401), (bearer(HOOK_TOKEN), 200)):
        assert (await client.post(HOOK, json=EXAMPLE, headers=headers)).status == status
    for method, path in OPEN:
        assert (await client.request(method, path)).status == 200, path


async def test_both_tokens_of_a_rotation_are_valid_and_name_the_same_actor(client):
    incident = await open_incident(client)
    resp = await client.post(f"/api/v1/incidents/{incident}/ack", headers=bearer(ROTATED))
    assert resp.status == 200 and (await resp.json())["acknowledgedBy"] == "oncall"
    resp = await client.get("/api/v1/incidents", headers=bearer(TOKENS["oncall"][1]))
    assert resp.status == 200


async def test_by_is_honoured_for_admin_only_and_actions_are_audited(client):
    incident = await open_incident(client)
    resp = await client.post(f"/api/v1/incidents/{incident}/ack", params={"by": "mallory"},
                             headers=bearer(TOKENS["oncall"][1]))
    assert (await resp.json())["acknowledgedBy"] == "oncall"  # not mallory: act may not speak for others
    resp = await client.post(f"/api/v1/incidents/{incident}/resolve", params={"by": "alice"},
                             headers=bearer(TOKENS["boss"][1]))
    assert resp.status == 200
    assert (await client.post(f"/api/v1/incidents/{incident}/resolve", headers=bearer(TOKENS["boss"][1]))).status == 409
    assert (await client.post("/api/v1/incidents/INC-999999/ack", headers=bearer(TOKENS["boss"][1]))).status == 404
    assert (await client.post("/api/v1/incidents/INC-999999/silence", params={"duration": "1h"},
                              headers=bearer(TOKENS["boss"][1]))).status == 404
    assert (await client.post("/-/reload", headers=bearer(TOKENS["boss"][1]))).status == 200
    audit = (await (await client.get("/api/v1/audit", headers=bearer(TOKENS["boss"][1]))).json())["entries"]
    got = [(e["actor"], e["action"], e["target"], e["via"], e["outcome"]) for e in reversed(audit)]
    assert got == [
        ("oncall", "ack", incident, "api", "ok"),
        ("alice (boss)", "resolve", incident, "api", "ok"),  # the stated name beside the principal
        ("boss", "resolve", incident, "api", "refused: incident is resolved: nothing to resolve"),
        ("boss", "reload", "rules", "api", "ok"),
    ]
    detail = await (await client.get(f"/api/v1/incidents/{incident}", headers=bearer(TOKENS["reader"][1]))).json()
    assert [e.get("actor") for e in detail["timeline"] if e["kind"] == "resolved"] == ["alice (boss)"]


async def test_trusted_proxy_header_names_the_actor(tmp_path):
    proxy = {"header": "X-Forwarded-User", "from": ["127.0.0.1/32"], "users": {"ana@example.com": "act"}}
    c = await start(tmp_path, auth_doc(tmp_path, proxy))
    try:
        incident = await open_incident(c)
        assert (await c.get("/api/v1/incidents", headers={"X-Forwarded-User": "viewer@example.com"})).status == 200
        resp = await c.post(f"/api/v1/incidents/{incident}/ack", headers={"X-Forwarded-User": "viewer@example.com"})
        assert resp.status == 403  # default role: read
        resp = await c.post(f"/api/v1/incidents/{incident}/ack", headers={"X-Forwarded-User": "ana@example.com"})
        assert resp.status == 200 and (await resp.json())["acknowledgedBy"] == "ana@example.com"
    finally:
        await c.close()
    untrusted = {"header": "X-Forwarded-User", "from": ["10.0.0.0/8"]}
    c = await start(tmp_path / "b", auth_doc(tmp_path, untrusted))
    try:  # the test client connects from 127.0.0.1, not from the proxy's network: the header is not believed
        assert (await c.get("/api/v1/incidents", headers={"X-Forwarded-User": "boss"})).status == 401
    finally:
        await c.close()


async def test_failures_are_counted_and_logged_once_a_minute(client, caplog):
    caplog.set_level(logging.WARNING, logger="alertd.web.auth")
    for _ in range(5):
        assert (await client.get("/api/v1/incidents", headers=bearer("guess-guess-guess-1234"))).status == 401
    assert (await client.post("/-/reload", headers=bearer(TOKENS["reader"][1]))).status == 403
    assert (await client.post(HOOK, json=EXAMPLE)).status == 401
    lines = [r.getMessage() for r in caplog.records if "authentication failed" in r.getMessage()]
    assert len(lines) == 2, lines  # one for the API, one for the receiver, from this peer
    assert all("guess-guess" not in line for line in lines)
    metrics = await (await client.get("/metrics")).text()
    assert 'alertd_auth_failures_total{reason="invalid",surface="api"} 5.0' in metrics
    assert 'alertd_auth_failures_total{reason="role",surface="api"} 1.0' in metrics
    assert 'alertd_auth_failures_total{reason="missing",surface="receiver"} 1.0' in metrics


async def test_without_auth_on_loopback_everyone_is_admin(tmp_path):
    c = await start(tmp_path, {})
    try:
        incident = await open_incident(c)
        resp = await c.post(f"/api/v1/incidents/{incident}/ack", params={"by": "alice"})
        assert resp.status == 200 and (await resp.json())["acknowledgedBy"] == "alice (anonymous)"
    finally:
        await c.close()



async def test_alertd_audit_prints_the_trail_from_the_store(client, tmp_path, capsys):
    import asyncio
    import json

    from alertd.cli.main import main

    incident = await open_incident(client)
    await client.post(f"/api/v1/incidents/{incident}/ack", headers=bearer(TOKENS["oncall"][1]))
    config = tmp_path / "audit.yml"
    config.write_text(f"storage: {{sqlite_path: {tmp_path / 'db.sqlite3'}}}\n")
    assert await asyncio.to_thread(main, ["audit", "--config", str(config), "--json", "--since", "1h"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["actor"], r["action"], r["target"], r["via"]) for r in rows] == [("oncall", "ack", incident, "api")]


async def test_cli_encodes_its_parameters(client, capsys):
    import asyncio

    from alertd.cli.main import main

    await open_incident(client)
    url = str(client.make_url("")).rstrip("/")
    token = TOKENS["reader"][1]
    # a node name with &, = and a space is one parameter: no incident matches it (not a 400, not all incidents)
    assert await asyncio.to_thread(main, ["incidents", "list", "--url", url, "--token", token,
                                          "--node", "gpu-node-17&status=open x", "--json"]) == 0
    assert '"incidents": []' in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["incidents", "show", "INC 1/../x", "--url", url, "--token", token]) == 1
    assert "HTTP 404" in capsys.readouterr().err


async def test_a_stalled_body_gets_408_and_the_connection_is_closed(tmp_path):
    import asyncio
    import time

    c = await start(tmp_path, {"receiver": {"body_timeout": "1s"}})
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", c.port)
        writer.write(b"POST /api/v1/alerts/alertmanager HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 5000\r\n\r\n{\"version\": \"4\"")  # ... and nothing more
        await writer.drain()
        started = time.monotonic()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert 0.8 < time.monotonic() - started < 5
        rest = await asyncio.wait_for(reader.read(), 15)  # to EOF: the server closes (after lingering at most)
        assert b"did not arrive within 1 s" in rest, rest
        writer.close()
        metrics = await (await c.get("/metrics")).text()
        assert 'alertd_webhooks_rejected_total{reason="body_timeout"} 1.0' in metrics
    finally:
        await c.close()
