"""The Alertmanager receiver refuses bad input precisely while valid traffic loses nothing.

A real ``alertd serve`` subprocess (receiver auth on, a body limit) takes every
kind of bad request -- malformed JSON, wrong types, missing fields, a wrong
version, oversized bodies with and without Content-Length, wrong credentials,
non-UTF-8 -- each answered with its status and a JSON error naming the field or
the problem, WHILE several concurrent clients post valid webhooks. Every valid
webhook that got 200 must then be in the store exactly once (SQLite opened
read-only next to the server) and, once processed, a member of an incident (read
API). Redelivery is idempotent. A store that cannot write answers 503 with
Retry-After, and an Alertmanager-style retry succeeds once space is back.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from testkit.alertd_proc import (AlertdProcess, inbox_key_counts, member_fingerprint_counts, open_readonly,
                                      stored_key_counts, untaken_bodies)
from testkit.webhooks import (
    UniqueWebhooks,
    bad_labels_webhook,
    big_webhook,
    dedup_keys,
    dumps,
    fingerprints,
    node_webhook,
)

TOKEN = "s3cret-receiver-token"
BASIC_USER, BASIC_PASSWORD = "alertmanager", "pa:ss w0rd"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
BASIC = {"Authorization": "Basic " + base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()}
MAX_BODY = 8 * 1024 * 1024
TIMEOUT = aiohttp.ClientTimeout(total=60)

# Every valid webhook acknowledged in this module, checked against the read API at the end.
ACKED: list[dict[str, Any]] = []


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> AlertdProcess:
    proc = AlertdProcess(tmp_path_factory.mktemp("receiver"), {
        "log": {"level": "warning"},
        "receiver": {"max_body_bytes": MAX_BODY,
                     "auth": {"bearer_token": TOKEN, "basic": {"username": BASIC_USER, "password": BASIC_PASSWORD}}},
    })
    proc.start()
    yield proc
    proc.stop()


class ValidTraffic:
    """Several clients posting unique valid webhooks, bounded in count and in time."""

    def __init__(self, server: AlertdProcess, run: str, *, clients: int = 4, per_client: int = 20,
                 max_seconds: float = 30.0):
        self.server, self.clients, self.per_client, self.max_seconds = server, clients, per_client, max_seconds
        self.gen = UniqueWebhooks(run=run, distinct_nodes=True, nodes_per_cluster=4)
        self.acked: list[dict[str, Any]] = []
        self.refused: list[tuple[int, str]] = []
        self._tasks: list[asyncio.Task] = []

    async def _client(self, n: int) -> None:
        deadline = time.monotonic() + self.max_seconds
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            for i in range(self.per_client):
                if time.monotonic() > deadline:
                    return
                doc = self.gen.next()
                headers = BEARER if (n + i) % 2 else BASIC  # what Alertmanager's http_config sends, both kinds
                async with session.post(self.server.receiver_url, data=dumps(doc),
                                        headers={**headers, "Content-Type": "application/json"}) as resp:
                    body = await resp.text()
                    if resp.status == 200:
                        answer = json.loads(body)
                        assert answer["alerts"] == 8, answer
                        self.acked.append(doc)
                    else:
                        self.refused.append((resp.status, body))
                await asyncio.sleep(0.005)

    async def __aenter__(self) -> "ValidTraffic":
        self._tasks = [asyncio.create_task(self._client(n)) for n in range(self.clients)]
        await asyncio.sleep(0.02)  # let the clients get going before the bad request goes out
        return self

    async def __aexit__(self, *exc) -> None:
        await asyncio.wait_for(asyncio.gather(*self._tasks), self.max_seconds + 30)
        ACKED.extend(self.acked)

    def assert_all_stored(self) -> None:
        assert not self.refused, f"valid webhooks were refused: {self.refused[:3]}"
        assert len(self.acked) == self.clients * self.per_client
        counts = stored_key_counts(self.server.db_path)
        missing = [k for doc in self.acked for k in dedup_keys(doc) if counts.get(k) != 1]
        assert not missing, f"{len(missing)} acknowledged alerts not stored exactly once, e.g. {missing[:3]}"


def stored_keys(server: AlertdProcess, keys: list[str]) -> list[str]:
    counts = stored_key_counts(server.db_path)
    return [k for k in keys if k in counts]


async def post(url: str, data: Any, headers: dict[str, str] | None = None,
               source: str | None = None) -> tuple[int, dict[str, str], Any]:
    """``source``: the loopback address to send from (the receiver throttles wrong credentials per client)."""
    connector = aiohttp.TCPConnector(local_addr=(source, 0)) if source else None
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        headers = {"Content-Type": "application/json", **(headers or {})}
        async with session.post(url, data=data, headers=headers) as resp:
            raw = await resp.read()
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw
            return resp.status, dict(resp.headers), body


# ----- bad payloads: 400 with a JSON error naming the field or the problem -----

def _doc(run: str) -> dict[str, Any]:
    return node_webhook("prod-bad", f"{run}-node", starts_at=datetime(2026, 1, 1, tzinfo=timezone.utc))


def _mutated(fn):
    def build(run: str) -> bytes:
        d = _doc(run)
        fn(d)
        return dumps(d)
    return build


def _raw(data: bytes):
    return lambda run: data


BAD_PAYLOADS = [
    # id, body builder, field expected in the answer (None: no field), words the error must contain
    ("malformed-json", _raw(b'{"version": "4", "status": "firing", "alerts": ['), None, "malformed JSON"),
    ("trailing-garbage", lambda run: dumps(_doc(run)) + b"}", None, "malformed JSON"),
    ("empty-body", _raw(b""), None, "malformed JSON"),
    ("not-an-object", _raw(b"[]"), "document", "object"),
    ("labels-not-strings", lambda run: dumps(bad_labels_webhook()), "alerts.0.labels.gpu", "string"),
    ("label-null", _mutated(lambda d: d["alerts"][3]["labels"].update(node=None)), "alerts.3.labels.node", "string"),
    ("annotations-not-strings", _mutated(lambda d: d["alerts"][1]["annotations"].update(summary=["x"])),
     "alerts.1.annotations.summary", "string"),
    ("alerts-not-a-list", _mutated(lambda d: d.update(alerts={"0": d["alerts"][0]})), "alerts", "array"),
    ("alert-not-an-object", _mutated(lambda d: d["alerts"].append("firing")), "alerts.8", "object"),
    ("missing-version", _mutated(lambda d: d.pop("version")), "document", "version"),
    ("missing-alerts", _mutated(lambda d: d.pop("alerts")), "document", "alerts"),
    ("alert-without-startsAt", _mutated(lambda d: d["alerts"][2].pop("startsAt")), "alerts.2", "startsAt"),
    ("alert-without-labels", _mutated(lambda d: d["alerts"][0].pop("labels")), "alerts.0", "labels"),
    ("wrong-version", _mutated(lambda d: d.update(version="3")), "version", "4"),
    ("version-as-number", _mutated(lambda d: d.update(version=4)), "version", ""),
    ("unknown-status", _mutated(lambda d: d["alerts"][0].update(status="pending")), "alerts.0.status", "pending"),
    ("startsAt-not-a-time", _mutated(lambda d: d["alerts"][0].update(startsAt="yesterday")), "alerts.0.startsAt", ""),
    ("startsAt-impossible-date", _mutated(lambda d: d["alerts"][5].update(startsAt="2026-13-45T25:61:00Z")),
     "alerts.5.startsAt", "timestamp"),
    ("endsAt-bad-offset",
     _mutated(lambda d: d["alerts"][0].update(status="resolved", endsAt="2026-01-01T00:05:00+25:00")),
     "alerts.0.endsAt", "timestamp"),
    ("fingerprint-not-hex", _mutated(lambda d: d["alerts"][0].update(fingerprint="not-hex!")),
     "alerts.0.fingerprint", ""),
    ("negative-truncatedAlerts", _mutated(lambda d: d.update(truncatedAlerts=-1)), "truncatedAlerts", ""),
    ("huge-truncatedAlerts", _mutated(lambda d: d.update(truncatedAlerts=10**400)), "truncatedAlerts", ""),
    ("non-utf8", lambda run: dumps(_doc(run)).replace(b"prod-bad", b"prod-\xff\xfe", 1), None, "UTF-8"),
    ("latin1-body", lambda run: json.dumps(_doc(run)).replace("prod-bad", "prod-b\u00e4d", 1).encode("latin-1"),
     None, "UTF-8"),
    ("lone-surrogate-escape", lambda run: dumps(_doc(run)).replace(b'"node":"', b'"node":"\\ud800', 1),
     "alerts.0.labels.node", "surrogate"),
    ("nul-escape", lambda run: dumps(_doc(run)).replace(b'"pci_bus_id":"', b'"pci_bus_id":"\\u0000', 1),
     "alerts.0.labels.pci_bus_id", "NUL"),
    ("nested-too-deep", _raw(b"[" * 100_000 + b"]" * 100_000), None, "malformed JSON"),
    ("integer-too-long", _raw(b'{"version":"4","status":"firing","alerts":[],"truncatedAlerts":' + b"9" * 5000 + b"}"),
     None, "malformed JSON"),
]


@pytest.mark.parametrize("build,field,words", [c[1:] for c in BAD_PAYLOADS], ids=[c[0] for c in BAD_PAYLOADS])
async def test_bad_payload_is_refused_with_400_naming_the_field(server, build, field, words, request):
    run = request.node.callspec.id
    body = build(run)
    async with ValidTraffic(server, f"ok-{run}") as traffic:
        for _ in range(3):  # refused the same way every time, in the middle of valid traffic
            status, headers, answer = await post(server.receiver_url, body, BEARER)
            assert status == 400, answer
            assert headers["Content-Type"].startswith("application/json")
            assert isinstance(answer, dict) and answer.get("error"), answer
            if field is None:
                assert "field" not in answer, answer
            else:
                assert answer.get("field") == field, answer
            assert words.lower() in answer["error"].lower(), answer
    traffic.assert_all_stored()
    with open_readonly(f"{server.db_path}-inbox") as conn:  # taken rows leave the log later, never before
        assert not conn.execute("SELECT count(*) FROM inbox_log WHERE body LIKE ?", (f"%{run}-node%",)).fetchone()[0]


async def test_unknown_fields_from_newer_alertmanagers_are_accepted(server):
    doc = node_webhook("prod-new", "newer-am-node", starts_at=datetime(2026, 2, 1, tzinfo=timezone.utc))
    doc.update(notification_reason="repeat", routeLabels={"team": "gpu"})
    doc["alerts"][0]["somethingNew"] = {"nested": True}
    status, _, answer = await post(server.receiver_url, dumps(doc), BEARER)
    assert (status, answer["alerts"]) == (200, 8), answer
    assert len(stored_keys(server, dedup_keys(doc))) == 8
    ACKED.append(doc)


# ----- size limit: 413, with and without Content-Length -----

def _padded_body(size: int, run: str) -> bytes:
    """A valid webhook of exactly ``size`` bytes (padded through an annotation)."""
    doc = big_webhook(8, run=run)
    doc["commonAnnotations"] = {"padding": ""}
    doc["commonAnnotations"]["padding"] = "x" * (size - len(dumps(doc)))
    body = dumps(doc)
    assert len(body) == size
    return body


async def test_body_over_the_limit_with_content_length_gets_413(server):
    body = _padded_body(MAX_BODY + 1, "oversized-cl")
    async with ValidTraffic(server, "ok-413-cl") as traffic:
        for _ in range(2):
            # The server may answer before it has read the body; a raw socket shows exactly what comes back.
            status, answer = await _post_raw(server.port, body, chunked=False)
            assert status == 413, answer
            assert str(MAX_BODY) in answer["error"], answer
    traffic.assert_all_stored()
    assert not stored_keys(server, dedup_keys(json.loads(body)))


async def test_body_over_the_limit_chunked_gets_413(server):
    body = _padded_body(MAX_BODY + 1, "oversized-chunked")

    async def chunks():
        for i in range(0, len(body), 256 * 1024):
            yield body[i:i + 256 * 1024]

    async with ValidTraffic(server, "ok-413-chunked") as traffic:
        status, headers, answer = await post(server.receiver_url, chunks(), BEARER)
        assert status == 413, answer
        assert isinstance(answer, dict) and str(MAX_BODY) in answer["error"], answer
        status, answer = await _post_raw(server.port, body, chunked=True)
        assert status == 413, answer
    traffic.assert_all_stored()
    assert not stored_keys(server, dedup_keys(json.loads(body)))


async def test_body_exactly_at_the_limit_is_accepted(server):
    body = _padded_body(MAX_BODY, "at-limit")
    for chunked in (False, True):
        status, answer = await _post_raw(server.port, body, chunked=chunked)
        assert status == 200, answer
        assert answer["alerts"] == 8, answer  # the second copy is dropped when the engine takes it
    ACKED.append(json.loads(body))


async def _post_raw(port: int, body: bytes, *, chunked: bool) -> tuple[int, Any]:
    """POST over a plain socket, tolerating a server that answers and closes before the body is sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = (f"POST /api/v1/alerts/alertmanager HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                + ("Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {len(body)}\r\n")
                + "Connection: close\r\n\r\n").encode()
        writer.write(head)

        async def send() -> None:
            try:
                for i in range(0, len(body), 64 * 1024):
                    part = body[i:i + 64 * 1024]
                    writer.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
                    await writer.drain()
                if chunked:
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
            except (ConnectionError, OSError):
                pass  # the server answered and closed: fine, the answer is what counts

        sender = asyncio.create_task(send())
        status, payload = await asyncio.wait_for(_read_response(reader), 30)
        sender.cancel()
    finally:
        writer.close()
    return status, json.loads(payload)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response (status line, headers, Content-Length or chunked body), without waiting for EOF."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(b":") for line in head.split(b"\r\n")[1:] if line)}
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            body += (await reader.readexactly(size + 2))[:-2]
        return status, body
    return status, await reader.readexactly(int(headers.get(b"content-length", b"0")))


# ----- authentication: 401 -----

AUTH_CASES = [
    ("no-credentials", {}),
    ("wrong-bearer", {"Authorization": "Bearer not-the-token"}),
    ("bearer-prefix-only", {"Authorization": f"Bearer {TOKEN[:-1]}"}),
    ("empty-bearer", {"Authorization": "Bearer "}),
    ("wrong-basic-password", {"Authorization": "Basic " + base64.b64encode(f"{BASIC_USER}:nope".encode()).decode()}),
    ("wrong-basic-user", {"Authorization": "Basic " + base64.b64encode(f"root:{BASIC_PASSWORD}".encode()).decode()}),
    ("basic-not-base64", {"Authorization": "Basic %%%not-base64%%%"}),
    ("basic-not-utf8", {"Authorization": "Basic " + base64.b64encode(b"\xff\xfe:\xfd").decode()}),
    ("other-scheme", {"Authorization": f"Token {TOKEN}"}),
    ("token-in-wrong-header", {"X-Auth-Token": TOKEN}),
]


@pytest.mark.parametrize("case", range(len(AUTH_CASES)), ids=[c[0] for c in AUTH_CASES])
async def test_wrong_or_missing_credentials_get_401(server, case, request):
    """From another address than the valid traffic's, as a guesser's would be: wrong credentials cost their
    client's throttle (test_hostile_credentials.py), never Alertmanager's."""
    headers = AUTH_CASES[case][1]
    doc = _doc(f"auth-{request.node.callspec.id}")
    async with ValidTraffic(server, f"ok-auth-{request.node.callspec.id}", per_client=10) as traffic:
        for _ in range(3):
            status, resp_headers, answer = await post(server.receiver_url, dumps(doc), headers, f"127.0.2.{case + 1}")
            assert status == 401, answer
            assert resp_headers.get("WWW-Authenticate"), resp_headers
            assert isinstance(answer, dict) and "credentials" in answer["error"], answer
    traffic.assert_all_stored()
    assert not stored_keys(server, dedup_keys(doc))


async def test_credentials_are_checked_before_the_body_is_read(server):
    """An unauthenticated client cannot make alertd parse (or buffer) a large body."""
    status, answer = await _post_raw_unauth(server.port)
    assert status == 401, answer


async def _post_raw_unauth(port: int) -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write((f"POST /api/v1/alerts/alertmanager HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {MAX_BODY}\r\nConnection: close\r\n\r\n").encode())
        await writer.drain()
        status, payload = await asyncio.wait_for(_read_response(reader), 10)  # without a byte of the body sent
    finally:
        writer.close()
    return status, json.loads(payload)


# ----- a huge notification is accepted whole -----

async def test_ten_thousand_alert_payload_is_accepted_and_stored(server):
    doc = big_webhook(10_000, run="huge")
    body = dumps(doc)
    assert len(body) <= MAX_BODY
    async with ValidTraffic(server, "ok-huge") as traffic:
        started = time.monotonic()
        status, _, answer = await post(server.receiver_url, body, BASIC)
        took = time.monotonic() - started
        assert status == 200, answer
        assert answer["alerts"] == 10_000, answer
    traffic.assert_all_stored()
    assert len(stored_keys(server, dedup_keys(doc))) == 10_000
    assert took < 30, f"a 10,000-alert webhook took {took:.1f} s to acknowledge"
    ACKED.append(doc)


# ----- redelivery: retries and HA peers create no duplicates -----

async def test_redelivery_and_ha_peer_copies_are_dropped_as_duplicates(server):
    doc = node_webhook("prod-redeliver", "redeliver-node", starts_at=datetime.now(timezone.utc) - timedelta(minutes=3),
                       kind=0)
    status, _, first = await post(server.receiver_url, dumps(doc), BEARER)
    assert (status, first["alerts"]) == (200, 8), first
    server.wait_drained(30)
    incident = await _incident_of(server, doc)
    members_before = incident["memberCount"]
    assert members_before == 8 and {m["fingerprint"] for m in incident["members"]} == set(fingerprints(doc))

    peer = json.loads(dumps(doc))  # what the second Alertmanager of an HA pair sends
    peer["externalURL"] = "http://alertmanager-1.prod-redeliver.example:9093"
    peer["receiver"] = "alertd-peer"
    peer["notification_reason"] = "repeat"
    for body, headers in ((dumps(doc), BEARER), (dumps(doc), BASIC), (dumps(peer), BEARER)):
        status, _, again = await post(server.receiver_url, body, headers)
        assert (status, again["alerts"]) == (200, 8), again
    # The same notification, concurrently (a retry racing the original).
    server.wait_drained(30)
    dropped = server.metrics().get("alertd_alerts_duplicate_total", 0.0)
    answers = await asyncio.gather(*(post(server.receiver_url, dumps(doc), BEARER) for _ in range(8)))
    assert all(a[0] == 200 and a[2]["alerts"] == 8 for a in answers), answers

    server.wait_drained(30)
    with open_readonly(server.db_path) as conn:
        counts = inbox_key_counts(conn)
    assert all(counts[k] == 1 for k in dedup_keys(doc))
    assert server.metrics()["alertd_alerts_duplicate_total"] - dropped == 8 * 8  # each concurrent copy dropped
    after = await _incident_of(server, doc)
    assert after["id"] == incident["id"]
    assert after["memberCount"] == members_before
    assert sorted(m["fingerprint"] for m in after["members"]) == sorted(fingerprints(doc))
    joined = [fp for e in after["timeline"] if e["kind"] in ("opened", "alert_joined")
              for fp in e.get("data", {}).get("fingerprints") or [e["data"]["fingerprint"]]]
    assert sorted(joined) == sorted(fingerprints(doc)), after["timeline"]  # each alert joined once
    ACKED.append(doc)


async def _incident_of(server: AlertdProcess, doc: dict[str, Any]) -> dict[str, Any]:
    node = doc["alerts"][0]["labels"]["node"]
    status, listing = server.get_json(f"/api/v1/incidents?node={node}")
    assert status == 200, listing
    assert len(listing["incidents"]) == 1, listing
    status, incident = server.get_json(f"/api/v1/incidents/{listing['incidents'][0]['id']}")
    assert status == 200, incident
    return incident


# ----- everything acknowledged above made it through the engine -----

def test_every_acknowledged_alert_is_an_incident_member(server):
    assert len(ACKED) > 500, "the tests above should have acknowledged plenty of valid traffic"
    server.wait_drained(120)
    wanted = {fp for doc in ACKED for fp in fingerprints(doc)}
    with server.db() as conn:
        found = member_fingerprint_counts(conn)
    missing = wanted - set(found)
    assert not missing, f"{len(missing)} acknowledged alerts are in no incident, e.g. {sorted(missing)[:3]}"
    twice = [fp for fp in wanted if found[fp] != 1]
    assert not twice, f"alerts in more than one incident: {twice[:3]}"

    # The read API shows the same, node by node (a sample: there are more incidents than one page holds).
    sample = random.Random(7).sample(ACKED, 40)
    for doc in sample:
        node = doc["alerts"][0]["labels"]["node"]
        status, listing = server.get_json(f"/api/v1/incidents?node={node}")
        assert status == 200, listing
        seen: list[str] = []
        for summary in listing["incidents"]:
            status, incident = server.get_json(f"/api/v1/incidents/{summary['id']}")
            assert status == 200, incident
            seen += [m["fingerprint"] for m in incident["members"]]
        node_fps = [fp for fp in fingerprints(doc)]
        assert sorted(fp for fp in seen if fp in set(node_fps)) == sorted(node_fps), node

    assert server.alive()
    metrics = server.metrics()
    for reason in ("json", "schema", "too_large", "unauthorized"):
        assert metrics.get(f'alertd_webhooks_rejected_total{{reason="{reason}"}}', 0) > 0, reason
    assert "Traceback" not in Path(server.log_path).read_text(errors="replace"), server.log_tail(60)


# ----- the store cannot write: 503 with Retry-After, then a retry succeeds -----

SQLITE_DEFAULT_MAX_PAGES = 1_073_741_823  # PRAGMA max_page_count cannot be lowered below the current size,
# and 0 leaves the cap unchanged: "free the disk" means raising the cap back to SQLite's default.


@pytest.fixture
async def inproc(tmp_path):
    """alertd in-process on a real loopback socket, with its SqliteStore at hand to fill the 'disk'."""
    from aiohttp.test_utils import TestServer

    from alertd.config.settings import Config
    from alertd.rules.ruleset import load_rules
    from alertd.app.service import Service
    from alertd.store.sqlite import SqliteStore
    from testkit.served import served

    cfg = Config(data_dir=tmp_path)
    store = SqliteStore(tmp_path / "alertd.sqlite3")
    svc = Service(cfg, store, load_rules(cfg.rule_paths))
    server = TestServer(served(svc), host="127.0.0.1", port=0)
    await server.start_server()
    server.store, server.db_path = store, tmp_path / "alertd.sqlite3"
    yield server
    await server.close()


async def _fill_disk(store, pages: int = 1) -> None:
    await asyncio.get_running_loop().run_in_executor(None, store.db.set_max_pages, pages)


async def _drained(server, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        pending = len(untaken_bodies(server.db_path))
        if pending == 0:
            return
        assert time.monotonic() < deadline, f"{pending} webhooks still pending"
        await asyncio.sleep(0.05)


async def _posts(server, docs: list[dict[str, Any]]) -> list[tuple[int, dict[str, str], Any]]:
    url = str(server.make_url("/api/v1/alerts/alertmanager"))
    return list(await asyncio.gather(*(post(url, dumps(d)) for d in docs)))


async def test_full_store_answers_503_with_retry_after_and_a_retry_is_stored(inproc):
    gen = UniqueWebhooks(run="disk-full", distinct_nodes=True, nodes_per_cluster=4)
    before = [gen.next() for _ in range(4)]
    assert all(a[0] == 200 for a in await _posts(inproc, before))

    await _fill_disk(inproc.store)  # capped at the current size: no page can be added
    refused_docs = [gen.next() for _ in range(6)]
    answers = await _posts(inproc, refused_docs)  # concurrent: one group commit, one shared fate
    for status, headers, answer in answers:
        assert status == 503, answer
        assert int(headers["Retry-After"]) > 0
        assert "retry" in answer["error"], answer
    counts = stored_key_counts(inproc.db_path)
    assert not [k for d in refused_docs for k in dedup_keys(d) if k in counts], "a refused webhook was partly stored"
    assert all(counts[k] == 1 for d in before for k in dedup_keys(d))

    # Alertmanager retries a 5xx with backoff: the same notifications again, still full, still 503.
    assert all(a[0] == 503 for a in await _posts(inproc, refused_docs[:2]))

    await _fill_disk(inproc.store, SQLITE_DEFAULT_MAX_PAGES)  # space is back
    answers = await _posts(inproc, refused_docs)
    assert [(a[0], a[2]["alerts"]) for a in answers] == [(200, 8)] * len(refused_docs)
    answers = await _posts(inproc, refused_docs)  # and a late duplicate retry changes nothing (checked below)
    assert [(a[0], a[2]["alerts"]) for a in answers] == [(200, 8)] * len(refused_docs)

    await _drained(inproc)
    with open_readonly(inproc.db_path) as conn:
        members = member_fingerprint_counts(conn)
    assert all(members[fp] == 1 for d in before + refused_docs for fp in fingerprints(d))
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async with session.get(inproc.make_url("/readyz")) as resp:
            assert resp.status == 200, await resp.text()
        async with session.get(inproc.make_url("/metrics")) as resp:
            text = await resp.text()
    assert 'alertd_webhooks_rejected_total{reason="store_unavailable"} 8.0' in text


async def test_readyz_reports_a_store_that_refuses_writes(inproc):
    gen = UniqueWebhooks(run="readyz-full", distinct_nodes=True, nodes_per_cluster=4)
    assert (await _posts(inproc, [gen.next()]))[0][0] == 200
    await _drained(inproc)  # so no engine step is left to fail: only the receiver meets the full store
    await _fill_disk(inproc.store)
    assert (await _posts(inproc, [gen.next()]))[0][0] == 503
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        async with session.get(inproc.make_url("/readyz")) as resp:
            assert resp.status == 503, await resp.text()
