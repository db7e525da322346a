"""Reading a running Prometheus (HTTP API) and running its command-line tools."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any, Sequence

import pytest
import yaml

from testkit.process import http_get


def which(*names: str) -> str | None:
    """The first binary found on PATH, or None (tests skip, or fail under CI, on None)."""
    return next((path for path in map(shutil.which, names) if path), None)


def api(url: str, path: str, **params: Any) -> Any:
    """GET {url}/api/v1/{path}; the `data` of a successful answer."""
    query = ("?" + urllib.parse.urlencode(params)) if params else ""
    status, body = http_get(f"{url}/api/v1/{path}{query}")
    doc = json.loads(body) if status == 200 else {}
    if doc.get("status") != "success":
        raise RuntimeError(f"Prometheus API {path}: HTTP {status} {body[:200]!r}")
    return doc["data"]


def query(url: str, expr: str) -> list[dict[str, Any]]:
    return api(url, "query", query=expr)["result"]


def alerts(url: str) -> list[dict[str, Any]]:
    return api(url, "alerts")["alerts"]


def alerting_rules(text: str) -> list[dict[str, Any]]:
    """The alerting rules (not the recording rules) of a Prometheus rule file's text, in file order."""
    return [r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "alert" in r]


ALERTD_RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "alertd-alerts.yml"


def scrape_alertd(config: Path, targets: Sequence[str]) -> Path:
    """The Prometheus config at ``config`` (created, 1 s scrape and evaluation, when absent) also scrapes
    ``targets`` (host:port) as job `alertd` and evaluates the shipped alerts on alertd unchanged, as
    deploy/prometheus/prometheus.yml sets them up."""
    doc = yaml.safe_load(config.read_text()) if config.exists() else {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"}}
    doc.setdefault("scrape_configs", []).append({"job_name": "alertd", "static_configs": [{"targets": list(targets)}]})
    (config.parent / ALERTD_RULES.name).write_text(ALERTD_RULES.read_text())
    doc["rule_files"] = [*(doc.get("rule_files") or []), ALERTD_RULES.name]
    config.write_text(yaml.safe_dump(doc))
    return config


def run_tool(args: Sequence[str], cwd: str | Path | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run promtool or amtool, its output captured as text; a failing run fails the test with that output."""
    result = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"$ {' '.join(result.args)}\n{result.stdout}\n{result.stderr}"
    return result


def promtool_rules(rules: Path, tests: Path) -> tuple[str, str]:
    """``promtool check rules`` of a rule file and ``promtool test rules`` of its unit tests (run where the tests
    name their rule files from); both outputs, each run having succeeded."""
    assert PROMTOOL is not None, "promtool not installed"
    checked = run_tool([PROMTOOL, "check", "rules", str(rules)]).stdout
    return checked, run_tool([PROMTOOL, "test", "rules", str(tests)], cwd=tests.parent, timeout=120).stdout


PROMTOOL = which("promtool")
AMTOOL = which("amtool")
PROMETHEUS = which("prometheus")
# Without CI a missing binary skips; under CI it fails (testkit.missing.missing_service).
needs_promtool = pytest.mark.skipif(PROMTOOL is None and not os.environ.get("CI"), reason="promtool not installed")
needs_amtool = pytest.mark.skipif(AMTOOL is None and not os.environ.get("CI"), reason="amtool not installed")
needs_prometheus = pytest.mark.skipif(PROMETHEUS is None and not os.environ.get("CI"), reason="prometheus not installed")
