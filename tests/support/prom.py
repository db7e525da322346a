"""Reading a running Prometheus (HTTP API) and running its command-line tools."""
from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any, Sequence

from tests.support.process import http_get


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


def run_tool(args: Sequence[str], cwd: str | Path | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run promtool or amtool and capture its output as text."""
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout)
