"""A whole alertd service in-process, wired to the Slack and PagerDuty test servers.

Shared by the test_notify_* modules; their fixtures (slack, harness, pd, paging)
are in tests/integration/conftest.py.
"""
from __future__ import annotations

import asyncio
import json
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp.test_utils import TestClient, TestServer

from alertd.config.settings import parse_config
from alertd.app.assemble import build_service
from alertd.enrich import Enricher
from alertd.rules.ruleset import load_rules
from alertd.store.sqlite import SqliteStore
from testkit.served import served
from alertd.web.slack_actions import ACTIONS
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.slack_server import SlackTestServer
from testkit.webhooks import gpu_alert, webhook

ROOT = Path(__file__).resolve().parents[1]
HOOK = "/api/v1/alerts/alertmanager"
SECRET = "e3b0c44298fc1c149afbf4c8996fb924"
TOKEN = "xoxb-test"

# Single-incident notification tests post at once; the storm tests set their own group_wait.
ROUTING = """
routing:
  group_wait: 0s
  receivers:
    - name: oncall
      slack: "#gpu-oncall"
      pagerduty: {routing_key: "${infra}"}
    - name: alerts
      slack: "#gpu-alerts"
  routes:
    - name: page
      match: ['severity="critical"']
      receiver: oncall
  default_receiver: alerts
"""


def one_channel(channel: str) -> str:
    """A routing section that sends every incident to one Slack channel at once."""
    return f"""
routing:
  group_wait: 0s
  receivers:
    - name: oncall
      slack: "{channel}"
  default_receiver: oncall
"""


def rules_dir(tmp_path: Path, routing: str) -> Path:
    d = tmp_path / "rules"
    d.mkdir(exist_ok=True)
    for name in ("xid-catalog.yml", "signals.yml", "correlation.yml", "history.yml"):
        shutil.copy(ROOT / "rules" / name, d / name)
    (d / "routing.yml").write_text(routing)
    return d


def xid_alert(node: str, gpu: int = 0, code: int = 79, *, cluster: str = "prod", starts: datetime | None = None,
              status: str = "firing") -> dict[str, Any]:
    starts = starts or datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=1)
    return gpu_alert(cluster, node, gpu, 0, starts_at=starts, status=status,
                     extra={"xid": str(code), "severity": "critical"})


def hook(*alerts: dict, node: str = "n1", cluster: str = "prod") -> dict:
    return webhook(list(alerts), cluster=cluster, node=node)


async def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


class Harness:
    """alertd in-process (real socket, SQLite, outbox, notifiers) wired to test servers."""

    def __init__(self, tmp_path: Path, *, slack: SlackTestServer | None = None, pagerduty_url: str = "",
                 routing_keys: dict[str, str] | None = None, alertmanager_url: str = "", debounce: str = "0s",
                 routing: str = ROUTING, per_channel: float = 20.0, slack_extra: dict | None = None,
                 db: Path | None = None):
        self.tmp_path = tmp_path
        self.slack = slack
        doc: dict[str, Any] = {"rules": {"paths": [str(rules_dir(tmp_path, routing))]},
                               "runbook_base_url": "https://runbooks.example/", "notify": {}}
        if slack is not None:
            doc["notify"]["slack"] = {"token": TOKEN, "base_url": slack.base_url, "signing_secret": SECRET,
                                      "debounce": debounce, "rate": {"per_channel": per_channel}, **(slack_extra or {})}
        if pagerduty_url:
            doc["notify"]["pagerduty"] = {"events_url": pagerduty_url, "routing_keys": routing_keys or {}}
        if alertmanager_url:
            doc["alertmanager"] = {"url": alertmanager_url}
        self.cfg = parse_config(doc, "test")
        self.db = db or tmp_path / "alertd.sqlite3"
        self.client: TestClient | None = None

    async def start(self) -> "Harness":
        self.store = SqliteStore(self.db)
        self.rules = load_rules(self.cfg.rule_paths)
        enricher = Enricher.from_settings(self.cfg.enrich)
        self.svc = build_service(self.cfg, self.store, self.rules, enricher=enricher)
        if enricher is not None:
            enricher.bind(self.svc)
        self.notifiers, self.router = self.svc.notifiers, self.svc.router
        self.app = served(self.svc)
        self.client = TestClient(TestServer(self.app, host="127.0.0.1"))
        await self.client.start_server()
        return self

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
            self.client = None

    async def post(self, doc: dict) -> None:
        resp = await self.client.post(HOOK, json=doc)
        assert resp.status == 200, await resp.text()

    async def incidents(self, **query) -> list[dict]:
        resp = await self.client.get("/api/v1/incidents", params=query)
        return (await resp.json())["incidents"]

    async def incident(self, incident_id: str) -> dict:
        return await (await self.client.get(f"/api/v1/incidents/{incident_id}")).json()

    async def one_incident(self) -> dict:
        rows = await wait_for(self.incidents)
        assert len(rows) == 1, rows
        return rows[0]

    # ----- Slack buttons -----

    @staticmethod
    def action_body(action_id: str, incident_id: str, *, user: tuple[str, str] = ("U0ANA", "ana")) -> bytes:
        payload = {
            "type": "block_actions",
            "user": {"id": user[0], "username": user[1], "name": user[1], "team_id": "T0ALERTD01"},
            "api_app_id": "A0ALERTD01",
            "team": {"id": "T0ALERTD01", "domain": "alertd-test"},
            "container": {"type": "message", "message_ts": "1.000001", "channel_id": "C0X"},
            "channel": {"id": "C0X", "name": "gpu-oncall"},
            "trigger_id": "1.2.3",
            "actions": [{"type": "button", "action_id": action_id, "block_id": f"alertd:{incident_id}",
                         "value": incident_id, "action_ts": "1.000002", "text": {"type": "plain_text", "text": "x"}}],
        }
        return urlencode({"payload": json.dumps(payload)}).encode()

    @staticmethod
    def signed(body: bytes, timestamp: int | None = None, secret: str = SECRET) -> dict[str, str]:
        import hashlib
        import hmac

        ts = str(int(time.time()) if timestamp is None else timestamp)
        sig = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + sig,
                "Content-Type": "application/x-www-form-urlencoded"}

    async def click(self, action_id: str, incident_id: str, **kw) -> int:
        body = self.action_body(action_id, incident_id, **kw)
        resp = await self.client.post("/api/v1/slack/actions", data=body, headers=self.signed(body))
        return resp.status

    async def actions_idle(self) -> None:
        await self.app[ACTIONS].wait_idle()


def posts(slack: SlackTestServer, channel: str | None = None, *, top: bool | None = None):
    out = []
    for c in slack.calls_of("chat.postMessage"):
        if channel and c.params.get("channel") not in (channel, slack.channel_id(channel)):
            continue
        if top is True and c.params.get("thread_ts"):
            continue
        if top is False and not c.params.get("thread_ts"):
            continue
        out.append(c)
    return out


def top_messages(slack: SlackTestServer, channel: str) -> list[dict]:
    return [m for m in (slack.messages.get(channel) or {}).values() if "thread_ts" not in m]



ESCALATION_KEY = "ESCALAT10NKEYALERTDTEST000000000"
ROUTING_ESC = ROUTING.replace('''      receiver: oncall
''', '''      receiver: oncall
      escalate: {after: 1500ms, routing_key: "${infra-escalation}"}
''')


def keys() -> dict[str, str]:
    return {"infra": PagerDutyTestServer.ROUTING_KEY, "infra-escalation": ESCALATION_KEY}


