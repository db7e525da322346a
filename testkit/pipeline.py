"""Helpers shared by the end-to-end tests: waiting, alertd rules and Alertmanager config, reading results."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from testkit.alertd_proc import AlertdProcess
from testkit.slack_server import SlackTestServer

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "e2e-webhook-token"


def wait(what: str, probe: Callable[[], Any], timeout: float = 90.0, every: float = 0.5,
         detail: Callable[[], Any] | None = None) -> Any:
    """Until ``probe`` returns something true (returned); else an AssertionError naming ``what``, the last
    value, and ``detail()`` (what else to show, e.g. counters or a log tail)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except RuntimeError:  # a test server's record changed size while we read it: read again
            last = None
        if last:
            return last
        time.sleep(every)
    more = f"\n{detail()}" if detail is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}{more}")


def stop_started(*services: Any) -> None:
    """Stop, in order, what a test started (None: not started before it failed)."""
    for svc in services:
        if svc is not None:
            svc.stop()


def write_rules(dst: Path, hold_down: str, pending: str | None = None) -> Path:
    """The shipped rules with another hold-down and, when given, another ``correlation.storm.pending``."""
    shutil.copytree(ROOT / "rules", dst, ignore=shutil.ignore_patterns("tests"))
    corr = yaml.safe_load((dst / "correlation.yml").read_text())
    corr["correlation"]["hold_down"] = hold_down
    if pending is not None:
        corr["correlation"]["storm"]["pending"] = pending
    (dst / "correlation.yml").write_text(yaml.safe_dump(corr))
    return dst


def write_alertmanager_config(path: Path, alertd_url: str, token_file: Path, *,
                              group_by: tuple[str, ...] = ("cluster", "node", "alertname"),
                              group_wait: str = "1s", group_interval: str = "1s") -> Path:
    token_file.write_text(TOKEN)
    receiver = {"name": "alertd", "webhook_configs": [{
        "url": f"{alertd_url}/api/v1/alerts/alertmanager", "send_resolved": True, "max_alerts": 0,
        "http_config": {"authorization": {"type": "Bearer", "credentials_file": str(token_file)}},
    }]}
    path.write_text(yaml.safe_dump({
        "route": {"receiver": "alertd", "group_by": list(group_by), "group_wait": group_wait,
                  "group_interval": group_interval, "repeat_interval": "1h",
                  "routes": [{"matchers": ['alertname="Watchdog"'], "receiver": "alertd", "repeat_interval": "5s"}]},
        "receivers": [receiver],
    }))
    return path


def incidents(alertd: AlertdProcess, **query: str) -> list[dict]:
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    status, data = alertd.get_json("/api/v1/incidents" + (f"?{qs}" if qs else ""))
    assert status == 200, data
    return data["incidents"]


def by_node(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["node"], []).append(row)
    return out


def top_level_messages(slack: SlackTestServer) -> list[dict]:
    return [m for channel in list(slack.messages.values()) for m in list(channel.values()) if not m.get("thread_ts")]


def sink_config(tmp: Path, slack_url: str, slack_token: str, pagerduty_url: str, routing_key: str,
                **extra: Any) -> dict[str, Any]:
    """``alertd serve``'s config for an end-to-end run: the shipped rules (hold-down 4 s), the receiver's
    bearer token, Slack and PagerDuty at their test servers (both of the shipped routes' keys on one)."""
    return {
        "rules": {"paths": [str(write_rules(tmp / "alertd-rules", hold_down="4s"))]},
        "receiver": {"auth": {"bearer_token": TOKEN}},
        "notify": {
            "slack": {"token": slack_token, "base_url": slack_url, "debounce": "0s"},
            "pagerduty": {"events_url": pagerduty_url, "routing_keys": {
                "gpu-infra": routing_key, "gpu-infra-escalation": routing_key}},
        },
        **extra,
    }
