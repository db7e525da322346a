"""Reconciliation with a real Alertmanager.

* alertd is down while an alert resolves, and the resolve never reaches it (when alertd comes back
  it listens elsewhere, so Alertmanager's retries go nowhere: to alertd, Alertmanager gave up).
  After the restart the incident resolves, marked "resolved: Alertmanager no longer holds its alerts" in the timeline; an
  alert that still fires stays open.
* A webhook with truncatedAlerts > 0 (max_alerts: 2 for a group of 5) makes alertd read the
  group's full set from Alertmanager: the incident ends up with all 5 alerts.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from testkit.alertd_proc import AlertdProcess
from tests.support.fixtures import require
from testkit.pipeline import incidents, wait, write_rules
from testkit.process import http
from testkit.services import RunningService, start_alertmanager

pytestmark = pytest.mark.e2e
STARTS = (datetime.now(timezone.utc) - timedelta(minutes=5)).replace(microsecond=0)


def xid(node: str, gpu: int) -> dict:
    return {"alertname": "GPUXidError", "cluster": "prod-a", "node": node, "gpu": str(gpu), "xid": "79",
            "severity": "critical", "UUID": f"GPU-{node}-{gpu}"}


def am_post(am: RunningService, labels: list[dict], *, resolved: bool = False) -> None:
    now = datetime.now(timezone.utc)
    ends = now - timedelta(seconds=1) if resolved else now + timedelta(hours=1)
    body = [{"labels": lbl, "annotations": {"summary": "GPU has fallen off the bus"}, "startsAt": STARTS.isoformat(),
             "endsAt": ends.isoformat(), "generatorURL": "http://prometheus:9090/graph?g0.expr=xid"} for lbl in labels]
    status, _, text = http("POST", am.url + "/api/v2/alerts", json.dumps(body).encode(), {"Content-Type": "application/json"})
    assert status == 200, text


def point_alertmanager(am: RunningService, config: Path, alertd_url: str, max_alerts: int = 0) -> None:
    """Rewrite the config to deliver to ``alertd_url`` and reload it (POST /-/reload)."""
    config.write_text(yaml.safe_dump({
        "route": {"receiver": "alertd", "group_by": ["node"], "group_wait": "1s", "group_interval": "1s",
                  "repeat_interval": "1h"},
        "receivers": [{"name": "alertd", "webhook_configs": [{
            "url": f"{alertd_url}/api/v1/alerts/alertmanager", "send_resolved": True, "max_alerts": max_alerts}]}],
    }))
    status, _, text = http("POST", am.url + "/-/reload")
    assert status == 200, text


def start_pair(tmp_path: Path, max_alerts: int = 0) -> tuple[RunningService, AlertdProcess, Path]:
    config = tmp_path / "am.yml"
    config.write_text("route:\n  receiver: none\nreceivers:\n  - name: none\n")
    am = require(start_alertmanager, config, tmp_path / "am")
    alertd = AlertdProcess(tmp_path / "alertd", {"alertmanager": {
        "urls": [am.url], "reconcile_interval": "2s", "reconcile_min_uptime": "1s"},
        "rules": {"paths": [str(write_rules(tmp_path / "rules", hold_down="2s"))]}, "log": {"level": "info"}}).start()
    point_alertmanager(am, config, alertd.url, max_alerts)
    return am, alertd, config


def test_resolve_lost_while_alertd_was_down_is_reconciled(tmp_path: Path) -> None:
    am, alertd, _ = start_pair(tmp_path)
    try:
        am_post(am, [xid("gpu-node-1", 3), xid("gpu-node-2", 0)])
        open_by_node = wait("both incidents open", lambda: {r["node"]: r for r in incidents(alertd, status="open")}
                            if len(incidents(alertd, status="open")) == 2 else None, 30)
        alertd.stop()
        am_post(am, [xid("gpu-node-1", 3)], resolved=True)  # delivered to nobody
        wait("Alertmanager no longer listing node-1's alert",
             lambda: all(a["labels"]["node"] != "gpu-node-1" for a in json.loads(http("GET", am.url + "/api/v2/alerts")[2])),
             20)
        alertd.start()  # on a new port: Alertmanager's retries for the resolve never arrive
        gone = open_by_node["gpu-node-1"]["id"]
        wait("the incident resolved by reconciliation", lambda: alertd.get_json(f"/api/v1/incidents/{gone}")[1]
             .get("status") == "resolved", 60)
        timeline = alertd.get_json(f"/api/v1/incidents/{gone}")[1]["timeline"]
        assert any(e.get("text", "").startswith("resolved: Alertmanager no longer holds its alerts")
                   for e in timeline), timeline
        kept = open_by_node["gpu-node-2"]["id"]
        assert alertd.get_json(f"/api/v1/incidents/{kept}")[1]["status"] == "open"  # Alertmanager still has it
    finally:
        alertd.stop()
        am.stop()


def test_truncated_webhook_fetches_the_whole_group(tmp_path: Path) -> None:
    am, alertd, _ = start_pair(tmp_path, max_alerts=2)
    try:
        am_post(am, [xid("gpu-node-7", g) for g in range(5)])
        row = wait("the incident with all five GPUs' alerts", lambda: next(
            (r for r in incidents(alertd, status="open") if r.get("memberCount") == 5), None), 30)
        assert row["node"] == "gpu-node-7"
        assert alertd.metrics().get("alertd_alerts_truncated_total", 0) >= 3
    finally:
        alertd.stop()
        am.stop()
