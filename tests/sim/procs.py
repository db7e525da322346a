"""Start and stop real Prometheus-family processes on loopback for tests.

Minimal on purpose: one subprocess per service, output to a log file in the
test's directory, readiness by polling an HTTP endpoint, and the log tail in
every failure message.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the usual small race applies)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def find_binary(*names: str) -> str | None:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


class ServiceProcess:
    """A subprocess with its output in `log_path`."""

    def __init__(self, name: str, args: Sequence[str], log_path: Path, cwd: Path | None = None) -> None:
        self.name = name
        self.args = list(args)
        self.log_path = log_path
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = None

    def start(self) -> ServiceProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.cwd,
        )
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM this process only, SIGKILL after timeout."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def wait_http_ok(self, url: str, timeout: float = 30.0, interval: float = 0.2) -> None:
        """Poll url until it answers 200; fail early if the process exits."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"{self.name} exited (rc={self.proc and self.proc.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
                    last = f"HTTP {r.status}"
            except (urllib.error.URLError, OSError) as e:
                last = str(e)
            time.sleep(interval)
        raise TimeoutError(f"{self.name} not ready at {url} after {timeout}s ({last}):\n{self.log_tail()}")

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Prometheus(ServiceProcess):
    def __init__(self, config_path: Path, workdir: Path, port: int, binary: str = "prometheus") -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        args = [
            binary,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ]
        super().__init__("prometheus", args, workdir / "prometheus.log", cwd=workdir)

    def api(self, path: str, **params: Any) -> Any:
        """GET /api/v1/<path>; returns `data`."""
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=5) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus API {path}: {body}")
        return body["data"]

    def alerts(self) -> list[dict[str, Any]]:
        return self.api("alerts")["alerts"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]


def start_prometheus(
    config_path: str | Path,
    workdir: str | Path,
    *,
    port: int | None = None,
    binary: str | None = None,
    ready_timeout: float = 30.0,
) -> Prometheus:
    """Start `prometheus` on 127.0.0.1 with its TSDB and log under workdir; wait for /-/ready."""
    binary = binary or find_binary("prometheus")
    if binary is None:
        raise FileNotFoundError("prometheus binary not found")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    prom = Prometheus(Path(config_path).resolve(), workdir, port or free_port(), binary)
    prom.start()
    try:
        prom.wait_http_ok(f"{prom.url}/-/ready", timeout=ready_timeout)
    except BaseException:
        prom.stop()
        raise
    return prom


def run_tool(args: Sequence[str], cwd: str | Path | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a CLI (promtool, amtool) and capture its output as text."""
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout)
