"""Several ``alertd serve`` replicas on one PostgreSQL database, two Alertmanagers clustered by gossip
over loopback delivering to every replica, and a storm of webhooks that keeps a ledger of what was
acknowledged. Used by the HA end-to-end tests and bench/ha.py-style runs.
"""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psycopg
import yaml

from testkit.alertd_proc import AlertdProcess
from testkit.process import free_ports, http
from testkit.services import RunningService, start_alertmanager
from testkit.webhooks import UniqueWebhooks, dedup_keys

TOKEN = "ha-webhook-token"
SLACK_TOKEN = "xoxb-ha"
INCIDENT_IN_MESSAGE = re.compile(r"alertd:(INC-\d+)")


def fresh_database(server_dsn: str) -> str:
    """A new, empty database on the session's PostgreSQL; its DSN."""
    name = f"ha_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server_dsn.rsplit("/", 1)[0] + "/" + name


def replica_config(dsn: str, rules_dir: Path, *, slack_url: str = "", pagerduty_url: str = "",
                   routing_key: str = "", alertmanagers: list[str] | None = None, **extra: Any) -> dict:
    notify: dict[str, Any] = {}
    if slack_url:
        notify["slack"] = {"token": SLACK_TOKEN, "base_url": slack_url, "debounce": "0s"}
    if pagerduty_url:
        notify["pagerduty"] = {"events_url": pagerduty_url,
                               "routing_keys": {"gpu-infra": routing_key, "gpu-infra-escalation": routing_key}}
    cfg: dict[str, Any] = {"storage": {"backend": "postgres", "postgres_dsn": dsn}, "rules": {"paths": [str(rules_dir)]},
                           "receiver": {"auth": {"bearer_token": TOKEN}}, "notify": notify}
    if alertmanagers:
        cfg["alertmanager"] = {"url": alertmanagers[0], "urls": alertmanagers}
    cfg.update(extra)
    return cfg


def role_of(replica: AlertdProcess) -> str:
    if not replica.alive():
        return "dead"
    status, _, body = http("GET", replica.url + "/readyz", timeout=2)
    return body.decode().strip().rpartition(" ")[2] if status == 200 else f"unready({status})"


def wait_for_leader(replicas: list[AlertdProcess], timeout: float = 30.0) -> AlertdProcess:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leaders = [r for r in replicas if r.alive() and role_of(r) == "leader"]
        if len(leaders) == 1:
            return leaders[0]
        time.sleep(0.05)
    raise AssertionError(f"no single leader after {timeout:.0f}s: {[role_of(r) for r in replicas]}")


def write_alertmanager_config(path: Path, alertd_urls: list[str], token_file: Path, *, group_interval: str = "1s") -> Path:
    """One receiver delivering to every alertd replica (each webhook_config is one destination)."""
    token_file.write_text(TOKEN)
    configs = [{"url": f"{u}/api/v1/alerts/alertmanager", "send_resolved": True, "max_alerts": 0,
                "http_config": {"authorization": {"type": "Bearer", "credentials_file": str(token_file)}}}
               for u in alertd_urls]
    path.write_text(yaml.safe_dump({
        "route": {"receiver": "alertd", "group_by": ["cluster", "node", "alertname"], "group_wait": "1s",
                  "group_interval": group_interval, "repeat_interval": "1h"},
        "receivers": [{"name": "alertd", "webhook_configs": configs}],
    }))
    return path


def start_alertmanager_pair(config: Path, workdir: Path) -> list[RunningService]:
    """Two Alertmanager peers gossiping over loopback (their notification log dedups between them)."""
    one, two = free_ports(2)
    first = start_alertmanager(config, workdir / "am1", cluster_port=one, peers=[two])
    second = start_alertmanager(config, workdir / "am2", cluster_port=two, peers=[one])
    return [first, second]


def alert_all(prometheus_config: Path, alertmanagers: list[RunningService]) -> Path:
    """Prometheus sends every alert to every Alertmanager of the HA pair (as their docs require)."""
    doc = yaml.safe_load(prometheus_config.read_text())
    doc["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [a.url.split("//", 1)[1] for a in alertmanagers]
    prometheus_config.write_text(yaml.safe_dump(doc))
    return prometheus_config


def alertmanager_peers(am: RunningService) -> int:
    _, _, body = http("GET", am.url + "/api/v2/status")
    return len(json.loads(body).get("cluster", {}).get("peers") or [])


@dataclass
class Storm:
    """Posts unique webhooks to the live replicas in turn, like Alertmanagers behind a load balancer:
    a refused or failed post is retried on the next replica. ``acked`` holds what got a 2xx. It runs for
    ``seconds`` at most; ``stop`` ends it sooner, once a test has seen what it needed under load."""

    replicas: list[AlertdProcess]
    rate: float = 80.0
    seconds: float = 10.0
    gen: UniqueWebhooks = field(default_factory=lambda: UniqueWebhooks(run="storm", distinct_nodes=True,
                                                                        nodes_per_cluster=4, seed=3))
    acked: list[dict] = field(default_factory=list)
    refused: int = 0
    statuses: Counter = field(default_factory=Counter)  # every answer's status (0: no answer)
    retry_after: set = field(default_factory=set)  # Retry-After values seen on 503s
    slowest: float = 0.0  # seconds: the longest wait for an answer
    on_tick: Callable[[float], None] | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        start, i, turn = time.monotonic(), 0, 0
        while time.monotonic() - start < self.seconds and not self.stop.is_set():
            doc = self.gen.next()
            for _ in range(3 * len(self.replicas)):  # bounded retries
                replica = self.replicas[turn % len(self.replicas)]
                turn += 1
                if not replica.alive():
                    continue
                sent = time.monotonic()
                try:
                    status, _, headers = replica.post(doc, {"Authorization": f"Bearer {TOKEN}"}, timeout=5)
                except OSError:
                    status, headers = 0, {}
                self.slowest = max(self.slowest, time.monotonic() - sent)
                self.statuses[status] += 1
                if status == 503:
                    self.retry_after.add(dict(headers).get("Retry-After"))
                if 200 <= status < 300:
                    self.acked.append(doc)
                    break
                self.refused += 1
                time.sleep(0.05)
            i += 1
            if self.on_tick:
                self.on_tick(time.monotonic() - start)
            self.stop.wait(max(0.0, start + i / self.rate - time.monotonic()))

    def in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="storm", daemon=True)
        thread.start()
        return thread

    def acked_keys(self) -> list[str]:
        return [k for doc in self.acked for k in dedup_keys(doc)]


def inbox_state(dsn: str) -> dict[str, int]:
    """dedup key -> processed flag, for every alert the engine took (inbox keys)."""
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        return dict(conn.execute("SELECT dedup, processed FROM inbox").fetchall())


def pending(dsn: str) -> int:
    """Webhooks in the inbox log the engine has not taken (each taken row is deleted in its step)."""
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute("SELECT count(*) FROM inbox_log").fetchone()
        return int(row[0]) if row else 0


def slack_messages_per_incident(slack: Any) -> Counter:
    """(channel, incident id) -> top-level Slack messages about it: its message metadata names it, which every
    incident message carries, with or without buttons (no signing secret: no buttons)."""
    return Counter((ch, inc) for ch, msgs in list(slack.messages.items()) for top in list(msgs.values())
                   if not top.get("thread_ts") and (inc := _incident_of(top)))


def _incident_of(message: dict[str, Any]) -> str:
    payload = (message.get("metadata") or {}).get("event_payload") or {}
    if isinstance(payload.get("incident"), str):
        return payload["incident"]
    found = INCIDENT_IN_MESSAGE.findall(json.dumps(message))
    return found[0] if found else ""


def check_pages(pagerduty: Any, rows: list[dict], critical: list[str]) -> None:
    """One page per paged incident: every critical one, and errors outside the routing's night and weekend
    mute windows (rules/routing.yml), nothing else."""
    assert all(len(alerts) == 1 for alerts in pagerduty.alerts.values()), \
        {k: len(a) for k, a in pagerduty.alerts.items() if len(a) > 1}
    severity = {r["id"]: r["severity"] for r in rows}
    paged = {k.rpartition(":")[2] for k in pagerduty.alerts}
    assert set(critical) <= paged and all(severity.get(i) in ("critical", "error") for i in paged), \
        {i: severity.get(i) for i in paged}
