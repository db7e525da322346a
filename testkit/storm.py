"""The multi-signal storm through a real ``alertd serve``, against the Slack and PagerDuty test servers.

N nodes each lose a GPU within a couple of seconds; each node's Alertmanager
group arrives as ONE webhook with the shipped alert names: ``GPUXidError``
(Xid 79), ``DCGMExporterDown`` and ``KubeNodeCordoned``, with the labels and
severities deploy/prometheus/gpu-alerts.yml gives them, the alerts of a group
in varying order. Optionally Slack answers 5xx and PagerDuty refuses
connections for the first seconds (an outage). :func:`run_storm` drives it and
returns what Slack and PagerDuty received; the test asserts on it and
bench/storm.py prints it.

Plain Python with no test-framework dependency: the benchmark uses it too.
"""
from __future__ import annotations

import random
import shutil
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from alertd.core.model import iso as stored_time
from testkit.alertd_proc import REPO, AlertdProcess, open_readonly
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.slack_server import SlackTestServer
from testkit.webhooks import FIRING_END, fingerprint, gpu_alert, iso, webhook

SLACK_TOKEN = "xoxb-storm-test"
ESCALATION_KEY = "ESCALAT10NKEYALERTDSTORM00000000"
CLUSTER = "prod-a"
HELD = timedelta(minutes=1)  # an item due later than this is held on purpose, not waiting for a retry


def _alert(labels: dict[str, str], summary: str, starts: datetime, generator: str) -> dict[str, Any]:
    return {"status": "firing", "labels": labels, "annotations": {"summary": summary, "description": summary},
            "startsAt": iso(starts), "endsAt": FIRING_END, "generatorURL": generator,
            "fingerprint": fingerprint(labels)}


def node_alerts(node: str, index: int, starts: datetime, cluster: str = CLUSTER) -> list[dict[str, Any]]:
    """One node losing GPU ``index % 8``: the Xid, its exporter going down, the operator's cordon."""
    prom = f"http://prometheus.{cluster}.example:9090/graph?g0.expr="
    xid = gpu_alert(cluster, node, index % 8, 0, starts_at=starts, node_index=index,
                    extra={"alertname": "GPUXidError", "xid": "79", "severity": "warning"})
    xid["annotations"]["summary"] = f"Xid 79 on {node} GPU {index % 8}"
    exporter = _alert({"alertname": "DCGMExporterDown", "severity": "warning", "cluster": cluster, "node": node,
                       "job": "dcgm-exporter", "namespace": "gpu-operator", "instance": f"10.0.{index // 250}.{index % 250}:9400"},
                      f"dcgm-exporter on {node} is down", starts + timedelta(seconds=1), prom + "up%7Bjob%3D%22dcgm-exporter%22%7D+%3D%3D+0")
    cordon = _alert({"alertname": "KubeNodeCordoned", "severity": "info", "cluster": cluster, "node": node,
                     "job": "kube-state-metrics", "namespace": "monitoring"},
                    f"Node {node} is cordoned", starts + timedelta(seconds=2), prom + "kube_node_spec_unschedulable+%3D%3D+1")
    return [xid, exporter, cordon]


def resolved(alert: dict[str, Any], ends: datetime) -> dict[str, Any]:
    return dict(alert, status="resolved", endsAt=iso(ends))


def write_rules(dst: Path, hold_down: str) -> Path:
    """The shipped rules with a short hold-down, so a test sees the storm resolve."""
    shutil.copytree(REPO / "rules", dst, ignore=shutil.ignore_patterns("tests"))
    corr = dst / "correlation.yml"
    text = corr.read_text()
    assert "  hold_down: 5m\n" in text
    corr.write_text(text.replace("  hold_down: 5m\n", f"  hold_down: {hold_down}\n"))
    return dst


@dataclass
class StormResult:
    nodes: list[str]
    top_posts: dict[str, list[dict]] = field(default_factory=dict)  # channel id -> top-level messages
    replies: dict[str, list[dict]] = field(default_factory=dict)  # top-level ts -> its thread replies
    triggers: dict[str, list[dict]] = field(default_factory=dict)  # routing key -> trigger events
    pd_events: list[dict] = field(default_factory=list)
    fleet_post_s: float | None = None  # first webhook -> the fleet incident's first top-level post
    fleet_page_s: float | None = None  # first webhook -> its page
    complete_s: float | None = None  # first webhook -> every node named and nothing due in the outbox
    slack_failures: int = 0  # calls answered 5xx during the outage
    pd_attempts: int = 0  # requests PagerDuty received (refused ones never arrive)
    incidents: list[dict] = field(default_factory=list)
    outbox: dict[str, int] = field(default_factory=dict)

    def names_every_node(self, message: dict) -> bool:
        text = _all_text(message) + "".join(_all_text(r) for r in self.replies.get(message["ts"], []))
        return all(n in text for n in self.nodes)


def _all_text(message: dict) -> str:
    import json
    return (message.get("text") or "") + json.dumps(message.get("blocks") or [])


class StormRun:
    """One alertd process wired to the two test servers (already started, e.g. by serving_in_thread)."""

    def __init__(self, workdir: Path, slack: SlackTestServer, pd: PagerDutyTestServer, *, group_wait: str = "",
                 max_backoff: str = "3s", hold_down: str = "3s", log_level: str = "warning"):
        self.slack, self.pd = slack, pd
        rules = write_rules(workdir / "rules", hold_down)
        if group_wait:
            routing = rules / "routing.yml"
            routing.write_text(routing.read_text().replace("  group_wait: 2s\n", f"  group_wait: {group_wait}\n"))
        self.alertd = AlertdProcess(workdir / "alertd", {
            "log": {"level": log_level},
            "rules": {"paths": [str(rules)]},
            "notify": {
                "slack": {"token": SLACK_TOKEN, "base_url": slack.url},
                "pagerduty": {"events_url": pd.url, "routing_keys": {
                    "gpu-infra": PagerDutyTestServer.ROUTING_KEY, "gpu-infra-escalation": ESCALATION_KEY}},
                "retry": {"max_backoff": max_backoff, "max_attempts": 100},
            },
        })

    def __enter__(self) -> "StormRun":
        self.alertd.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.alertd.stop()

    # ----- driving -----

    def send(self, bodies: list[tuple[float, dict]], t0: float) -> threading.Thread:
        """POST each webhook at t0 + its offset (seconds), in a thread; every answer must be 200."""
        errors: list[str] = []

        def run() -> None:
            for offset, body in bodies:
                time.sleep(max(0.0, t0 + offset - time.monotonic()))
                status, doc, _ = self.alertd.post(body)
                if status != 200:
                    errors.append(f"{status} {doc}")

        thread = threading.Thread(target=run, name="storm-sender", daemon=True)
        thread.errors = errors  # type: ignore[attr-defined]
        thread.start()
        return thread

    def outbox_due(self) -> int:
        """Pending deliveries, but for those held for minutes (an escalation, a node incident's own post
        while its fleet speaks for it) and the items queued behind them: the outbox delivers in order per
        incident and target, so these wait by design. Retries (due within seconds: max_backoff) count.
        Counting the held ones kept a storm's wait running to its timeout after everything was delivered."""
        later = stored_time(datetime.now(timezone.utc) + HELD)  # the store's own text form: compared as text
        try:
            with open_readonly(self.alertd.db_path) as conn:
                return conn.execute(
                    "SELECT count(*) FROM outbox o WHERE state = 'pending' AND due_at <= ? AND NOT EXISTS ("
                    " SELECT 1 FROM outbox e WHERE e.incident_id = o.incident_id AND e.target = o.target"
                    " AND e.state = 'pending' AND e.due_at > ? AND e.id < o.id)", (later, later)).fetchone()[0]
        except sqlite3.Error:
            return -1

    def outbox_states(self) -> dict[str, int]:
        with open_readonly(self.alertd.db_path) as conn:
            return dict(conn.execute("SELECT state, count(*) FROM outbox GROUP BY state").fetchall())

    def incidents(self, **query: str) -> list[dict]:
        path = "/api/v1/incidents?limit=1000" + "".join(f"&{k}={v}" for k, v in query.items())
        status, doc = self.alertd.get_json(path)
        assert status == 200, doc
        return doc["incidents"]

    def fleet_messages(self) -> list[dict]:
        return [m for msgs in list(self.slack.messages.values()) for m in list(msgs.values())
                if "thread_ts" not in m and "nodes in" in (m.get("text") or "")]

    def collect(self, result: StormResult) -> StormResult:
        result.top_posts = {cid: sorted((m for m in list(msgs.values()) if "thread_ts" not in m), key=lambda m: m["ts"])
                            for cid, msgs in list(self.slack.messages.items())}
        result.replies = {}
        for msgs in list(self.slack.messages.values()):
            for m in list(msgs.values()):
                if "thread_ts" in m:
                    result.replies.setdefault(m["thread_ts"], []).append(m)
        result.pd_events = list(self.pd.events)
        result.triggers = {}
        for e in result.pd_events:
            if e["event_action"] == "trigger":
                result.triggers.setdefault(e["routing_key"], []).append(e)
        result.slack_failures = sum(1 for c in self.slack.calls if c.method == "chat.postMessage") - sum(
            len(msgs) for msgs in self.slack.messages.values())
        result.pd_attempts = len(self.pd.requests)
        result.incidents = self.incidents()
        result.outbox = self.outbox_states()
        return result

    def storm(self, nodes: int = 20, spread: float = 2.0, outage: float = 0.0, seed: int = 1,
              timeout: float = 90.0) -> StormResult:
        """Fire the storm; return once every node is named in a fleet post, PagerDuty was paged and
        nothing is left to deliver (then one debounce more, so a late post would be seen)."""
        rng = random.Random(seed)
        names = [f"gpu-node-{i:02d}" for i in range(nodes)]
        starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=30)
        bodies = []
        for i, node in enumerate(names):
            alerts = node_alerts(node, i, starts)
            rng.shuffle(alerts)
            bodies.append((spread * i / max(1, nodes - 1), webhook(alerts, cluster=CLUSTER, node=node)))
        result = StormResult(nodes=names)
        if outage:
            self.slack.down_for(outage)
            self.pd.submit(self.pd.refuse_for(outage))
        t0_wall, t0 = time.time(), time.monotonic()
        sender = self.send(bodies, t0)
        deadline = t0 + timeout
        quiet_since = None
        while time.monotonic() < deadline:
            fleet = [m for m in self.fleet_messages() if all(n in _all_text(m) for n in names)]
            if result.fleet_post_s is None and self.fleet_messages():
                result.fleet_post_s = min(float(m["ts"]) for m in self.fleet_messages()) - t0_wall
            if result.fleet_page_s is None and any(e["event_action"] == "trigger" for e in list(self.pd.events)):
                result.fleet_page_s = time.monotonic() - t0
            done = fleet and result.fleet_page_s is not None and not sender.is_alive() and self.outbox_due() == 0
            if done and result.complete_s is None:
                result.complete_s = time.monotonic() - t0
            if done:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 2.5:  # past the Slack debounce: nothing late comes
                    break
            else:
                quiet_since = None
            time.sleep(0.02)
        sender.join(5)
        assert not sender.errors, sender.errors  # type: ignore[attr-defined]
        self._bodies = bodies
        return self.collect(result)

    def single(self, node: str = "lone-node", timeout: float = 30.0) -> tuple[float, float]:
        """One node failing alone: seconds from its webhook to its Slack post and to its page."""
        body = webhook(node_alerts(node, 0, datetime.now(timezone.utc).replace(microsecond=0)), cluster=CLUSTER, node=node)
        posted = sum(len(m) for m in self.slack.messages.values())
        paged = len(self.pd.events)
        t0 = time.monotonic()
        status, doc, _ = self.alertd.post(body)
        assert status == 200, doc
        post_s = page_s = None
        while time.monotonic() - t0 < timeout and (post_s is None or page_s is None):
            if post_s is None and sum(len(m) for m in list(self.slack.messages.values())) > posted:
                post_s = time.monotonic() - t0
            if page_s is None and len(self.pd.events) > paged:
                page_s = time.monotonic() - t0
            time.sleep(0.005)
        assert post_s is not None and page_s is not None, "the lone node was never posted and paged"
        return post_s, page_s

    def resolve_all(self, timeout: float = 60.0) -> StormResult:
        """Every alert resolves; wait until every incident is resolved and delivered."""
        now = datetime.now(timezone.utc)
        for _, body in self._bodies:
            alerts = [resolved(a, now) for a in body["alerts"]]
            status, doc, _ = self.alertd.post(dict(body, alerts=alerts, status="resolved"))
            assert status == 200, doc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.incidents(status="open") and self.outbox_due() == 0:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        return self.collect(StormResult(nodes=[n["groupLabels"]["node"] for _, n in self._bodies]))
