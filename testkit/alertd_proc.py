"""Run ``alertd serve`` as a real subprocess on a free loopback port.

``AlertdProcess`` writes a config file into its work directory, starts the
server with its own data directory, waits for ``/readyz``, and can stop it
gracefully (SIGTERM), ``kill -9`` it, and start it again on the same data
directory. The SQLite database can be opened read-only next to the running
server (WAL mode allows concurrent readers) to check what was stored.

Plain Python with no test-framework dependency: the benchmark uses it too.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import yaml

from testkit.process import free_port, http

REPO = Path(__file__).resolve().parents[1]
RECEIVER_PATH = "/api/v1/alerts/alertmanager"
_running: list["AlertdProcess"] = []


class AlertdStartError(RuntimeError):
    pass


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text format -> {'name{labels}': value} (comments skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out


class AlertdProcess:
    """One ``alertd serve`` subprocess; ``config`` is the YAML document (a dict) to run with."""

    def __init__(self, workdir: Path | str, config: dict[str, Any] | None = None, *,
                 cpus: str | None = None, python_args: Sequence[str] = (), env: dict[str, str] | None = None,
                 serve_args: Sequence[str] = (), nofile: int | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.config = dict(config or {})
        self.config_path = self.workdir / "alertd.yml"
        self.log_path = self.workdir / "alertd.log"
        self.cpus = cpus  # taskset CPU list, e.g. "0"
        self.python_args = list(python_args)  # e.g. ["-m", "cProfile", "-o", "prof.out"]
        self.env = env
        self.serve_args = list(serve_args)  # e.g. ["--receivers", "0"]
        self.nofile = nofile  # RLIMIT_NOFILE (soft and hard) for the server's processes, as `ulimit -n` sets it
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    # ----- addresses -----

    @property
    def address(self) -> str:
        """host:port, as a Prometheus scrape target names it."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def receiver_url(self) -> str:
        return self.url + RECEIVER_PATH

    @property
    def db_path(self) -> Path:
        return self.data_dir / "alertd.sqlite3"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # ----- lifecycle -----

    def command(self) -> list[str]:
        cmd = [sys.executable, *self.python_args, "-m", "alertd.cli.main", "serve", "--config", str(self.config_path),
               "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data_dir), *self.serve_args]
        limit = ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--"] if self.nofile else []
        return limit + (["taskset", "-c", self.cpus] if self.cpus else []) + cmd

    def start(self, timeout: float = 30.0) -> "AlertdProcess":
        """Start (or restart, on the same data dir) and wait for /readyz; retries a port clash."""
        for attempt in range(3):
            self.port = free_port()
            self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
            env = dict(os.environ if self.env is None else self.env)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
            self.starts += 1
            with open(self.log_path, "ab") as log:
                log.write(f"\n==== start #{self.starts}: {' '.join(self.command())}\n".encode())
                log.flush()
                self.proc = subprocess.Popen(self.command(), cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            if self not in _running:
                _running.append(self)
            try:
                self.wait_ready(timeout)
                return self
            except AlertdStartError:
                tail = self.log_tail(20)
                self.kill()
                if "address already in use" in tail and attempt < 2:
                    continue
                raise
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise AlertdStartError(f"alertd exited with status {self.proc.returncode}:\n{self.log_tail()}")
            if http("GET", self.url + "/readyz", timeout=2)[0] == 200:
                return
            time.sleep(0.05)
        raise AlertdStartError(f"alertd not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def kill9(self) -> None:
        """SIGKILL: no shutdown handler runs, nothing is flushed."""
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)  # the process group: taskset execs alertd in place
            self.proc.wait(10)

    kill = kill9

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM (graceful shutdown), SIGKILL if it does not exit in time; returns the exit status."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        return self.proc.returncode if self.proc is not None else 0

    def stop(self) -> None:
        self.terminate()
        if self in _running:
            _running.remove(self)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ----- HTTP -----

    def post(self, body: bytes | dict, headers: dict[str, str] | None = None, timeout: float = 30.0):
        """POST a webhook: (status, decoded JSON body or raw bytes, headers)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        status, hdrs, raw = http("POST", self.receiver_url, data,
                                 {"Content-Type": "application/json", **(headers or {})}, timeout)
        try:
            doc: Any = json.loads(raw)
        except ValueError:
            doc = raw
        return status, doc, hdrs

    def get_json(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        status, _, raw = http("GET", self.url + path, headers=headers)
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def metrics(self) -> dict[str, float]:
        status, _, raw = http("GET", self.url + "/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}")
        return parse_metrics(raw.decode())

    # ----- process facts -----

    def proc_status(self, field: str) -> int:
        """A /proc/<pid>/status field in kB (VmRSS, VmHWM)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise KeyError(field)

    # ----- the database, read-only -----

    def db(self) -> sqlite3.Connection:
        return open_readonly(self.db_path)

    def inbox_pending(self) -> int:
        """Webhooks in the inbox log the engine has not taken."""
        return len(untaken_bodies(self.db_path))

    def wait_drained(self, timeout: float = 60.0) -> None:
        """Until every stored alert went through the engine (no pending inbox rows)."""
        deadline = time.monotonic() + timeout
        pending = -1
        while time.monotonic() < deadline:
            pending = self.inbox_pending()
            if pending == 0:
                return
            time.sleep(0.1)
        raise TimeoutError(f"{pending} webhooks still pending after {timeout:.0f} s:\n{self.log_tail()}")


def serve_once(data_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    """``alertd serve`` on ``data_dir`` that is expected to refuse to start: its exit status and output."""
    return subprocess.run([sys.executable, "-m", "alertd.cli.main", "serve", "--data-dir", str(data_dir),
                           "--listen", f"127.0.0.1:{free_port()}", *extra],
                          cwd=data_dir.parent, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)


def one_line(done: subprocess.CompletedProcess) -> str:
    """The one stderr line of a refused start (exit 2, no traceback)."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def open_readonly(path: Path | str) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10, check_same_thread=False)
    conn.execute("PRAGMA query_only=1")
    return conn


def inbox_key_counts(conn: sqlite3.Connection) -> Counter:
    """How often each idempotency key the engine took is in the inbox (the unique index says at most once)."""
    return Counter(r[0] for r in conn.execute("SELECT dedup FROM inbox"))


def stored_key_counts(db_path: Path | str) -> Counter:
    """Every alert alertd holds, by idempotency key: taken by the engine, or in a webhook still in the log.

    The log is read first, then the engine's keys and mark in one snapshot: a webhook taken in between is
    counted once (by its keys), and one deleted from the log in between was taken before (so has its keys)."""
    logged = _log_rows(db_path)
    with open_readonly(db_path) as conn:
        conn.execute("BEGIN")
        keys = inbox_key_counts(conn)
        taken = _taken_mark(conn, db_path)
        conn.execute("COMMIT")
    keys.update(k for row_id, body in logged if row_id > taken for k in _keys_of(json.loads(body)))
    return keys


def _keys_of(doc: dict[str, Any]) -> list[str]:
    from testkit.webhooks import dedup_keys
    return dedup_keys(doc)


def _log_rows(db_path: Path | str) -> list[tuple[int, bytes]]:
    log_path = Path(f"{db_path}-inbox")
    if not log_path.exists():
        return []
    with open_readonly(log_path) as log:
        return [(r[0], bytes(r[1])) for r in log.execute("SELECT id, body FROM inbox_log ORDER BY id")]


def _taken_mark(conn: sqlite3.Connection, db_path: Path | str) -> int:
    """How far the engine took the log (meta inbox_taken), 0 when the log is not the one it names."""
    meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('inbox_log', 'inbox_taken')").fetchall())
    with open_readonly(f"{db_path}-inbox") as log:
        row = log.execute("SELECT value FROM log_meta WHERE key = 'id'").fetchone()
    return int(meta.get("inbox_taken") or 0) if row and meta.get("inbox_log") == row[0] else 0


def untaken_bodies(db_path: Path | str) -> list[bytes]:
    """Webhooks in the inbox log (``<db>-inbox``) past what the engine's last step took (meta inbox_taken)."""
    if not Path(f"{db_path}-inbox").exists() or not Path(db_path).exists():
        return []
    with open_readonly(db_path) as main:
        taken = _taken_mark(main, db_path)
    return [body for row_id, body in _log_rows(db_path) if row_id > taken]


def inbox_fingerprint_counts(conn: sqlite3.Connection) -> Counter:
    return Counter(r[0].split("|", 1)[0] for r in conn.execute("SELECT dedup FROM inbox"))


def member_fingerprint_counts(conn: sqlite3.Connection) -> Counter:
    """In how many incidents each fingerprint is a member."""
    return Counter(r[0] for r in conn.execute("SELECT fingerprint FROM members"))


@atexit.register
def _stop_all() -> None:
    for p in list(_running):
        try:
            p.kill9()
        except Exception:
            pass
