"""`alertd serve` reloads its rules when a rule file changes, as when the kubelet updates a ConfigMap volume."""
from __future__ import annotations

import time
from pathlib import Path

from testkit.alertd_proc import AlertdProcess, parse_metrics
from testkit.process import http

RELOADED = "alertd_rules_last_reload_success_timestamp_seconds"


def metrics(alertd: AlertdProcess) -> dict[str, float]:
    return parse_metrics(http("GET", alertd.url + "/metrics")[2].decode())


def wait_metric(alertd: AlertdProcess, name: str, accept, timeout: float = 20.0) -> float:
    deadline = time.monotonic() + timeout
    while True:
        value = metrics(alertd).get(name)
        if value is not None and accept(value):
            return value
        assert time.monotonic() < deadline, f"{name} = {value}"
        time.sleep(0.2)


def test_a_changed_site_rule_file_reloads_the_rules(tmp_path: Path) -> None:
    site = tmp_path / "rules.d"
    site.mkdir()
    cfg = {"rules": {"site": [str(site)], "watch_interval": "1s"}}
    alertd = AlertdProcess(tmp_path / "alertd", cfg, serve_args=["--receivers", "0"]).start()
    try:
        first = wait_metric(alertd, RELOADED, lambda v: v > 0)
        (site / "site-signals.yml").write_text("signals:\n  - kind: xid\n    match: ['alertname=\"SiteXid\"']\n")
        wait_metric(alertd, RELOADED, lambda v: v > first)
        (site / "site-signals.yml").write_text("signals:\n  - kind: nonsense\n")  # refused: the old rules stay
        wait_metric(alertd, "alertd_rules_last_reload_successful", lambda v: v == 0)
        assert "rule files changed" in alertd.log_path.read_text()
    finally:
        alertd.stop()
