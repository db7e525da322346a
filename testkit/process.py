"""Process plumbing for the real-service test helpers in services.py.

Runs a service in its own process group (optionally as an unprivileged user),
waits until it answers, stops it with its stop signal then SIGKILL, and stops
whatever is still running at interpreter exit.
"""

from __future__ import annotations

import atexit
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

INSTALL_COMMAND = "bash scripts/install-test-deps.sh"
SERVICE_USER = os.environ.get("ALERTD_TEST_USER") or "alertd-test"

# Loopback only: never route test traffic through a proxy from the environment.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ServiceUnavailable(RuntimeError):
    """The service's binary or distribution is not installed here."""


class ServiceStartError(RuntimeError):
    """The service is installed but did not become ready."""


class PortInUse(ServiceStartError):
    pass


_running: list["RunningService"] = []


@dataclass(eq=False)
class RunningService:
    name: str
    proc: subprocess.Popen
    port: int
    log_path: Path
    url: str = ""
    dsn: str = ""
    stop_signal: int = signal.SIGTERM
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 50) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the service: its stop signal, then SIGKILL; idempotent."""
        if self in _running:
            _running.remove(self)
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, self.stop_signal)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # Children that outlived the leader (backends, a server JVM).
        _signal_group(self.proc.pid, signal.SIGKILL)
        while self.cleanups:
            try:
                self.cleanups.pop()()
            except Exception:  # cleanup is best effort; the process is gone
                pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def stop_all() -> None:
    """Stop every service started by this process that is still running."""
    for svc in list(_running):
        svc.stop()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class ReservedPort:
    """A port on 127.0.0.1 held for a service that starts later, when another's configuration must name it
    first. A socket bound with SO_REUSEADDR but not listening keeps the kernel from handing the port out (to a
    bind to port 0, or as a connection's local end) meanwhile, and still lets the service listen on it: Go's
    servers (Prometheus, Alertmanager) bind with SO_REUSEADDR. release() once the service listens."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def release(self) -> None:
        self._sock.close()


def http(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
         timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """One request on loopback without proxies: (status, headers, body); status 0 when nothing answered."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _http.open(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()
    except (OSError, ValueError):
        return 0, {}, b""


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET on loopback without proxies; returns (status, body), status 0 if unreachable."""
    status, _, body = http("GET", url, timeout=timeout)
    return status, body


def http_json(method: str, url: str, payload=None, timeout: float = 30.0) -> tuple[int, object]:
    """A JSON request without proxies; returns (status, decoded body or None).

    Connection errors raise: a test calling this expects the service to be up.
    """
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with _http.open(req, timeout=timeout) as resp:
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    return status, json.loads(body) if body.strip() else None


def service_account() -> tuple[int, int] | None:
    """(uid, gid) to drop to when running as root, else None."""
    if os.geteuid() != 0:
        return None
    # Several pytest workers may get here at once on a fresh machine: the user another one created is as
    # good as ours, and useradd refuses while another holds /etc/passwd's lock (exit 10), so try again.
    deadline = time.monotonic() + 30
    while True:
        try:
            pw = pwd.getpwnam(SERVICE_USER)
            return pw.pw_uid, pw.pw_gid
        except KeyError:
            pass
        made = subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
             "/nonexistent", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            capture_output=True, text=True)
        if made.returncode not in (0, 9, 10) or time.monotonic() > deadline:  # 9: exists, 10: passwd locked
            raise ServiceStartError(f"useradd {SERVICE_USER} failed ({made.returncode}): {made.stderr}")
        if made.returncode == 10:
            time.sleep(0.2)


def run_as(account: tuple[int, int] | None) -> dict:
    if account is None:
        return {}
    return {"user": account[0], "group": account[1], "extra_groups": []}


def can_access(account: tuple[int, int] | None, path: Path, flag: str) -> bool:
    if account is None:
        return True
    return subprocess.run(["test", flag, str(path)], **run_as(account)).returncode == 0


def chown_tree(path: Path, account: tuple[int, int] | None) -> None:
    if account is None:
        return
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, *account)


def runtime_dir(name: str, workdir: Path, account) -> tuple[Path, Path, list]:
    """A fresh directory for one service run, its console log path, cleanups.

    When the service runs as another user that cannot reach ``workdir``
    (pytest's base temp dir is 0700 root), the directory lives in the system
    temp dir, is linked from ``workdir`` and removed when the service stops.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    base, n = name, 1
    while (workdir / base).exists() or (workdir / f"{base}.log").exists():
        n += 1
        base = f"{name}-{n}"
    log_path, cleanups = workdir / f"{base}.log", []
    if can_access(account, workdir, "-x"):
        run = workdir / base
        run.mkdir()
    else:
        run = Path(tempfile.mkdtemp(prefix=f"alertd-{base}-"))
        link = workdir / base
        link.symlink_to(run)

        def remove() -> None:
            shutil.rmtree(run, ignore_errors=True)
            link.unlink(missing_ok=True)

        cleanups.append(remove)
    if account is not None:
        os.chown(run, *account)
    return run, log_path, cleanups


def spawn(name, cmd, *, port, log_path, cwd, env=None, account=None,
          stop_signal=signal.SIGTERM, cleanups=()) -> RunningService:
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [str(c) for c in cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **run_as(account))
    svc = RunningService(name, proc, port, log_path, stop_signal=stop_signal,
                         cleanups=list(cleanups))
    _running.append(svc)
    return svc


def wait_ready(svc: RunningService, ready: Callable[[], bool], timeout: float) -> None:
    """Return once ``ready()``; else stop the service and raise with its log tail."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            if svc.proc.poll() is not None:
                problem = f"exited with status {svc.proc.returncode}"
                break
            if ready():
                return
            if time.monotonic() > deadline:
                problem = f"not ready after {timeout:.0f} s"
                break
            time.sleep(0.25)
    except BaseException:  # a broken probe or an interrupt: do not leave it running
        svc.stop()
        raise
    tail = svc.log_tail(50)
    svc.stop()
    kind = PortInUse if "address already in use" in tail.lower() else ServiceStartError
    raise kind(f"{svc.name} on port {svc.port} {problem}; last log lines "
               f"({svc.log_path}):\n{tail}")


def retry_port_clash(start: Callable[[], RunningService]) -> RunningService:
    for attempt in range(3):
        try:
            return start()
        except PortInUse:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def find_binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise ServiceUnavailable(f"{' or '.join(names)} not found on PATH; run: {INSTALL_COMMAND}")


def http_ready(url: str, accept: Callable[[bytes], bool] = lambda body: True):
    def ready() -> bool:
        status, body = http_get(url, timeout=2)
        return status == 200 and accept(body)
    return ready
