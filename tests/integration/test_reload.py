"""Hot reload of a running ``alertd serve``: SIGHUP and POST /-/reload.

A broken rule file is refused with its file:line in the log and in the
answer, /metrics says alertd_rules_last_reload_successful 0, and webhooks keep
being processed with the last good rules. Once fixed, a reload succeeds and
the new rules apply. Also records the traffic with --record and replays it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from testkit.process import free_port, http_get, http_json

ROOT = Path(__file__).resolve().parents[2]

SITE_SIGNALS = """\
# A site rule: fan failures are thermal problems of the node.
signals:
  - kind: thermal
    match: ['alertname="GPUFanFailure"']
    severity: warning
    category: hardware
    runbook: thermal
"""


def _until(what: str, check: Callable[[], object], timeout: float = 20.0, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


class Alertd:
    def __init__(self, proc: subprocess.Popen, url: str, log: Path):
        self.proc, self.url, self.log = proc, url, log

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def reload_metric(self) -> float | None:
        status, body = http_get(self.url + "/metrics")
        m = re.search(rb"^alertd_rules_last_reload_successful (\S+)$", body, re.M) if status == 200 else None
        return float(m.group(1)) if m else None

    def send(self, alertname: str, node: str, starts: str) -> None:
        alert = {"status": "firing", "labels": {"alertname": alertname, "cluster": "test", "node": node, "severity": "warning"},
                 "annotations": {"summary": f"{alertname} on {node}"}, "startsAt": starts,
                 "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": hashlib.sha256(f"{alertname}/{node}".encode()).hexdigest()[:16]}
        body = {"version": "4", "status": "firing", "receiver": "alertd", "groupKey": "{}:{}", "truncatedAlerts": 0,
                "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "externalURL": "", "alerts": [alert]}
        status, answer = http_json("POST", self.url + "/api/v1/alerts/alertmanager", body)
        assert status == 200, answer

    def incident_for(self, node: str) -> dict:
        def found():
            status, data = http_json("GET", f"{self.url}/api/v1/incidents?node={node}")
            return data["incidents"][0] if status == 200 and data["incidents"] else None

        return _until(f"an incident on {node}", found, log=self.log)


@pytest.fixture
def alertd(tmp_path: Path):
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules, ignore=shutil.ignore_patterns("tests"))
    port = free_port()
    config = tmp_path / "alertd.yml"
    config.write_text(f"rules:\n  paths: [{rules}]\nprocessing:\n  tick_interval: 1s\n")
    log = tmp_path / "alertd.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "alertd.cli.main", "serve", "--config", str(config), "--listen", f"127.0.0.1:{port}",
             "--data-dir", str(tmp_path / "data"), "--record", str(tmp_path / "recorded.jsonl")],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, env=env)
    svc = Alertd(proc, f"http://127.0.0.1:{port}", log)
    def ready() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"alertd exited with {proc.returncode}:\n{svc.log_text()}")
        return http_get(svc.url + "/readyz")[0] == 200

    try:
        _until("alertd to be ready", ready, log=log)
        yield svc, rules
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def test_a_broken_rule_file_is_refused_and_the_old_rules_keep_running(alertd, tmp_path):
    svc, rules = alertd
    correlation = rules / "correlation.yml"
    good = correlation.read_text()
    assert svc.reload_metric() == 1

    # The old rules do not know GPUFanFailure: it is an "other" incident.
    svc.send("GPUFanFailure", "n1", "2026-01-01T00:00:00Z")
    assert svc.incident_for("n1")["key"] == "other|alertname=GPUFanFailure|cluster=test|node=n1"

    # A new site rule would classify it, but the same reload carries a broken correlation.yml.
    (rules / "site-signals.yml").write_text(SITE_SIGNALS)
    broken = good.replace("hold_down: 5m", "hold_down: 5 minutes", 1)
    assert broken != good
    correlation.write_text(broken)
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "hold_down: 5 minutes" in text)
    where = f"{correlation}:{line}:"

    svc.proc.send_signal(signal.SIGHUP)
    _until("the failed reload in the log", lambda: where in svc.log_text(), log=svc.log)
    assert "rule reload failed, keeping the running rules" in svc.log_text()
    assert svc.reload_metric() == 0

    status, answer = http_json("POST", svc.url + "/-/reload")
    assert status == 500
    assert where in answer["error"] and "hold_down" in answer["error"], answer
    assert svc.reload_metric() == 0

    # Still running, still on the old rules.
    svc.send("GPUFanFailure", "n2", "2026-01-01T00:01:00Z")
    assert svc.incident_for("n2")["key"] == "other|alertname=GPUFanFailure|cluster=test|node=n2"

    # Fixed: SIGHUP succeeds and the new rules apply.
    correlation.write_text(good)
    svc.proc.send_signal(signal.SIGHUP)
    _until("a successful reload", lambda: svc.reload_metric() == 1, log=svc.log)
    assert "rules reloaded from" in svc.log_text()
    svc.send("GPUFanFailure", "n3", "2026-01-01T00:02:00Z")
    inc = svc.incident_for("n3")
    assert inc["key"] == "node|cluster=test|node=n3"
    assert inc["signals"] == ["thermal"]

    # POST /-/reload on good rules answers 200.
    status, answer = http_json("POST", svc.url + "/-/reload")
    assert (status, answer) == (200, {"status": "reloaded"})
    assert svc.reload_metric() == 1
    assert svc.proc.poll() is None


def test_recorded_traffic_replays_to_the_same_incidents(alertd, tmp_path):
    svc, rules = alertd
    svc.send("GPUFanFailure", "n1", "2026-01-01T00:00:00Z")
    svc.send("KubeNodeCordoned", "n2", "2026-01-01T00:00:05Z")
    live = {svc.incident_for(n)["key"] for n in ("n1", "n2")}

    svc.proc.send_signal(signal.SIGTERM)
    svc.proc.wait(15)
    lines = (tmp_path / "recorded.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["body"]["alerts"][0]["labels"]["alertname"] == "GPUFanFailure" and first["received_at"].endswith("Z")

    out = subprocess.run([sys.executable, "-m", "alertd.cli.main", "replay", str(tmp_path / "recorded.jsonl"),
                          "--rules", str(rules), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    replayed = {inc["key"] for inc in json.loads(out.stdout)["incidents"]}
    assert replayed == live
