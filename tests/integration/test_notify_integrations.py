"""The two integrations added through the registry alone: the signed webhook and Opsgenie.

Real routing, store (SQLite), outbox stages and HTTP; a webhook receiver that checks the
signature, and the strict Opsgenie test server (testkit/opsgenie_server.py).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from aiohttp import web

from alertd.config.settings import parse_config
from alertd.engine.pipeline import Engine
from alertd.core.service_metrics import Metrics
from alertd.core.model import Alert, iso
from alertd.notify.outbox import OutboxWorker
from alertd.app.notifiers import build_notifiers, build_router, check_keys
from alertd.rules.ruleset import load_rules
from alertd.store.base import Step
from alertd.store.sqlite import SqliteStore
from testkit.notify_harness import rules_dir, xid_alert
from testkit.opsgenie_server import OpsgenieTestServer
from testkit.storm import node_alerts, resolved
from testkit.process import free_port

SECRET = "whsec-0123456789abcdef"
ROUTING = """
routing:
  receivers:
    - name: oncall
      webhook: {endpoint: "${tickets}"}
      opsgenie: {api_key: "${gpu-team}"}
  routes:
    - match: ['severity="critical"']
      receiver: oncall
  group_wait: 0s
"""


class SignedReceiver:
    """A ticketing endpoint: refuses unsigned, badly signed or stale requests, keeps what it accepted."""

    def __init__(self) -> None:
        self.accepted: list[tuple[dict[str, str], dict]] = []
        self.refused = 0
        self.fail_next: list[int] = []

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        ts = request.headers.get("X-Alertd-Timestamp", "")
        want = "sha256=" + hmac.new(SECRET.encode(), ts.encode() + b"." + raw, hashlib.sha256).hexdigest()
        if (request.content_type != "application/json" or not ts.isdigit() or abs(time.time() - int(ts)) > 300
                or not hmac.compare_digest(want, request.headers.get("X-Alertd-Signature", ""))):
            self.refused += 1
            return web.Response(status=401)
        if self.fail_next:
            return web.Response(status=self.fail_next.pop(0), headers={"Retry-After": "0"})
        self.accepted.append((dict(request.headers), json.loads(raw)))
        return web.json_response({"ok": True})


@pytest.fixture
async def endpoints():
    receiver, opsgenie = SignedReceiver(), OpsgenieTestServer()
    app = web.Application()
    app.router.add_post("/hooks/alertd", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await opsgenie.start()
    yield f"http://127.0.0.1:{port}/hooks/alertd", receiver, opsgenie
    await opsgenie.stop()
    await runner.cleanup()


class Pipeline:
    """The engine, the router, the store and the outbox worker with the webhook and Opsgenie notifiers, on an
    injected clock: each step routes what the engine changed, commits it and drains the outbox."""

    def __init__(self, tmp_path, url: str, opsgenie: OpsgenieTestServer):
        self.cfg = parse_config({"notify": {
            "webhook": {"endpoints": {"tickets": {"url": url, "secret": SECRET}}},
            "opsgenie": {"api_url": opsgenie.url, "api_keys": {"gpu-team": OpsgenieTestServer.KEY}},
        }}, "test")
        self.rules = load_rules([rules_dir(tmp_path, ROUTING)])
        self.store = SqliteStore(tmp_path / "alertd.sqlite3")
        self.clock = [datetime.now(timezone.utc)]
        self.notifiers = build_notifiers(self.cfg, self.store, lambda: self.clock[0])
        self.worker = OutboxWorker(self.store, self.notifiers, Metrics(), lambda: self.clock[0])
        self.eng, self.router = Engine(self.rules), build_router(self.cfg, self.rules)

    async def step(self, changes) -> None:
        items, memory = self.router.route_step(changes, self.clock[0])
        await self.store.commit_step(Step(changes=changes, outbox=items, next_seq=self.eng.state.next_seq,
                                          memory=memory))
        self.clock[0] += timedelta(seconds=5)  # past the debounce
        await self.worker.drain()

    async def alerts(self, *docs: dict) -> None:
        await self.step(self.eng.ingest([Alert.from_wire({**d, "receivedAt": None}) for d in docs], self.clock[0]))

    async def close(self) -> None:
        for n in self.notifiers.values():
            await n.close()
        await self.store.close()


async def test_webhook_and_opsgenie_follow_an_incident_from_open_to_resolved(tmp_path, endpoints):
    url, receiver, opsgenie = endpoints
    p = Pipeline(tmp_path, url, opsgenie)
    assert check_keys(p.cfg, p.rules.routing) == []
    await p.store.open()
    try:
        await p.alerts(xid_alert("gpu-node-3", 1))
        inc_id = next(iter(p.eng.state.incidents))
        (headers, first), = receiver.accepted
        assert first["intent"] == "show" and first["incident"]["id"] == inc_id and first["kinds"] == ["opened"]
        assert first["incident"]["status"] == "open" and first["incident"]["xids"] == [79]
        assert headers["X-Alertd-Delivery"].startswith(f"{inc_id}/")
        (action, create), = opsgenie.requests
        assert action == "create" and create["alias"] == inc_id and create["priority"] == "P1"
        assert create["message"].startswith("[CRITICAL] Xid 79") and len(create["message"]) <= 130

        # another GPU joins: the ticket hears of it (show + timeline), Opsgenie does not (nothing new to page)
        receiver.fail_next = [503]  # retried by the outbox
        await p.alerts(xid_alert("gpu-node-3", 2))
        p.clock[0] += timedelta(minutes=10)
        await p.worker.drain()
        assert not receiver.fail_next and sorted(b["intent"] for _, b in receiver.accepted[1:]) == ["show", "timeline"]
        assert len(opsgenie.requests) == 1

        await p.step(p.eng.correlator.acknowledge(inc_id, "ana", p.clock[0]))
        await p.step(p.eng.correlator.resolve(inc_id, "ana", p.clock[0]))
        assert [a for a, _ in opsgenie.requests] == ["create", "acknowledge", "close"]
        assert opsgenie.alerts[inc_id]["status"] == "closed" and opsgenie.rejected == []
        assert receiver.accepted[-1][1]["incident"]["status"] == "resolved" and receiver.refused == 0
    finally:
        await p.close()


async def test_opsgenie_hears_of_a_failed_repair_on_its_open_alert(tmp_path, endpoints):
    """A create with an open alert's alias only counts up in Opsgenie: the failed repair (the fault back
    after the uncordon) closes the alert and creates it again, saying why."""
    url, _, opsgenie = endpoints
    p = Pipeline(tmp_path, url, opsgenie)
    await p.store.open()
    try:
        t0 = p.clock[0]
        xid = xid_alert("gpu-node-4", 1, starts=t0 - timedelta(minutes=60))
        cordon = node_alerts("gpu-node-4", 1, t0 - timedelta(minutes=52), cluster="prod")[2]
        await p.alerts(xid)
        await p.alerts(cordon, resolved(xid, t0 - timedelta(minutes=55)))
        await p.alerts(resolved(cordon, t0 - timedelta(minutes=5)))
        assert [a for a, _ in opsgenie.requests] == ["create"]
        await p.alerts(dict(xid, startsAt=iso(t0 - timedelta(minutes=1))))
        assert [a for a, _ in opsgenie.requests] == ["create", "close", "create"], opsgenie.requests
        assert "repair failed" in json.dumps(opsgenie.requests[2][1]) and opsgenie.rejected == []
    finally:
        await p.close()


def test_rules_naming_undefined_endpoints_and_keys_are_reported(tmp_path):
    cfg = parse_config({"notify": {"webhook": {"endpoints": {"other": {"url": "http://x.example/", "secret": SECRET}}},
                                   "opsgenie": {"api_keys": {"someone-else": "k"}}}}, "test")
    rules = load_rules([rules_dir(tmp_path, ROUTING)])
    assert check_keys(cfg, rules.routing) == ["gpu-team", "tickets"]
    with pytest.raises(Exception, match="secret"):
        parse_config({"notify": {"webhook": {"endpoints": {"t": {"url": "http://x.example/"}}}}}, "test")
