"""What a web page the operator visits can make a browser do to alertd (alertd/web/guard.py), over a real
socket: cross-origin writes (text/plain and form bodies, a foreign Origin or Sec-Fetch-Site), DNS rebinding
(a foreign Host), and bodies too large for their route, refused before they are read."""
from __future__ import annotations

import asyncio
import json

import pytest

from tests.integration.test_auth import HOOK_TOKEN, TOKENS, auth_doc, bearer, start
from tests.integration.test_service_inprocess import EXAMPLE, HOOK

EVIL = "http://evil.example"


@pytest.fixture
async def open_api(tmp_path):
    """The loopback default: no credentials anywhere, every caller is admin."""
    c = await start(tmp_path, {})
    yield c
    await c.close()


async def incident_id(c) -> str:
    assert (await c.post(HOOK, json=EXAMPLE)).status == 200
    for _ in range(100):
        rows = (await (await c.get("/api/v1/incidents")).json())["incidents"]
        if rows:
            return str(rows[0]["id"])
        await asyncio.sleep(0.05)
    raise AssertionError("no incident")


def own_origin(c) -> str:
    return str(c.make_url("")).rstrip("/")


async def test_cross_origin_writes_are_refused_on_the_open_loopback_default(open_api):
    c = open_api
    inc = await incident_id(c)
    attempts = [  # what a page on another site can send without a CORS preflight
        ("/-/reload", {"Origin": EVIL, "Content-Type": "text/plain"}, b"{}"),
        (f"/api/v1/incidents/{inc}/resolve", {"Origin": EVIL}, b""),
        (f"/api/v1/incidents/{inc}/ack", {"Origin": "null"}, b""),
        (f"/api/v1/incidents/{inc}/silence?duration=1h", {"Sec-Fetch-Site": "cross-site"}, b""),
        (f"/api/v1/incidents/{inc}/ack", {"Sec-Fetch-Site": "same-site"}, b""),  # another port of localhost
        (HOOK, {"Origin": EVIL, "Content-Type": "text/plain"}, json.dumps(EXAMPLE).encode()),
        (f"/ui/incidents/{inc}/action", {"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded"},
         b"action=resolve"),
    ]
    for path, headers, body in attempts:
        resp = await c.post(path, data=body, headers=headers)
        assert resp.status == 403 and "cross-site" in (await resp.json())["error"], (path, headers, resp.status)
    doc = await (await c.get(f"/api/v1/incidents/{inc}")).json()
    assert doc["status"] == "open" and not doc.get("acknowledgedBy")
    # alertd's own pages and programs (no Origin, no Sec-Fetch-Site) still act
    resp = await c.post(f"/api/v1/incidents/{inc}/ack", headers={"Origin": own_origin(c), "Sec-Fetch-Site": "same-origin"})
    assert resp.status == 200, await resp.text()
    assert (await c.post(f"/api/v1/incidents/{inc}/resolve")).status == 200


async def test_json_routes_refuse_the_bodies_a_page_can_send_without_preflight(open_api):
    c = open_api
    inc = await incident_id(c)
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                 "text/plain; charset=utf-8"):
        for path in (HOOK, "/-/reload", f"/api/v1/incidents/{inc}/resolve"):
            resp = await c.post(path, data=json.dumps(EXAMPLE).encode(), headers={"Content-Type": kind})
            assert resp.status == 415 and "application/json" in (await resp.json())["error"], (path, kind)
    # form routes take urlencoded forms only
    resp = await c.post("/ui/logout", data=b"{}", headers={"Content-Type": "text/plain"})
    assert resp.status == 415
    assert (await (await c.get(f"/api/v1/incidents/{inc}")).json())["status"] == "open"
    assert (await c.post(HOOK, json=EXAMPLE)).status == 200  # JSON is fine


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "rebind.127.0.0.1.nip.io", "attacker.example.com:9095",
                                  "10.1.2.3"])
async def test_dns_rebinding_a_foreign_host_is_refused_also_on_reads(open_api, host):
    c = open_api
    for method, path in (("GET", "/api/v1/incidents"), ("GET", "/ui/incidents"), ("POST", HOOK),
                         ("GET", "/api/v1/audit")):
        resp = await c.request(method, path, headers={"Host": host}, json=EXAMPLE if method == "POST" else None)
        assert resp.status == 421 and "allowed_hosts" in (await resp.json())["error"], (host, path, resp.status)


async def test_loopback_names_and_configured_hosts_are_answered(tmp_path):
    c = await start(tmp_path, {"api": {"allowed_hosts": ["alertd.lab.example"]},
                               "external_url": "https://alertd.example.com/"})
    try:
        for host in ("127.0.0.1:9095", "localhost", "LOCALHOST:9095", "[::1]:9095", "127.0.0.2", "alertd.lab.example",
                     "alertd.example.com", "grafana.localhost:9095"):
            assert (await c.get("/api/v1/incidents", headers={"Host": host})).status == 200, host
        resp = await c.post(HOOK, json=EXAMPLE, headers={"Host": "alertd.example.com", "Origin": "https://alertd.example.com"})
        assert resp.status == 200  # external_url's origin is alertd's own (behind a proxy that rewrites Host)
    finally:
        await c.close()


async def test_with_every_surface_locked_any_host_is_answered(tmp_path):
    """A Kubernetes Service name, a pod IP: with credentials everywhere rebinding gains nothing."""
    c = await start(tmp_path, auth_doc(tmp_path))
    try:
        resp = await c.get("/api/v1/incidents", headers={"Host": "alertd.monitoring.svc:9095", **bearer(TOKENS["reader"][1])})
        assert resp.status == 200
        resp = await c.post(HOOK, json=EXAMPLE, headers={"Host": "10.0.3.7:9095", **bearer(HOOK_TOKEN)})
        assert resp.status == 200
    finally:
        await c.close()


@pytest.mark.parametrize("path", ["/ui/login", "/ui/incidents/INC-1/action", "/-/reload", "/api/v1/incidents/INC-1/ack",
                                  "/api/v1/slack/actions"])
async def test_small_routes_refuse_a_large_body_before_reading_it(open_api, path):
    c = open_api
    reader, writer = await asyncio.open_connection("127.0.0.1", c.port)
    try:  # headers only: the answer must come without a byte of the body
        writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                     f"Content-Length: {10 * 1024 * 1024}\r\n\r\n".encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 413") and b"Connection: close" in head, head
    finally:
        writer.close()


async def test_a_chunked_body_stops_being_read_past_the_route_limit(open_api):
    c = open_api

    async def endless():
        for _ in range(256):  # 2 MiB offered (under the old app-wide 10 MiB); reading must stop after 64 KiB
            yield b"token=" + b"x" * 8186
    resp = await c.post("/ui/login", data=endless(), headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert resp.status == 413
