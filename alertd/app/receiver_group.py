"""What the processes of one ``serve --receivers N`` group share on the machine: a private directory.

The engine process creates it at start (a new temporary directory, mode 0700, so it starts empty, named
after the engine's pid) and removes it when it stops; a group whose engine process died without stopping
(kill -9) is removed by the next group that starts on the machine. The receivers find it through their
environment. It holds:

- ``metrics/``: prometheus_client's multiprocess files (``PROMETHEUS_MULTIPROC_DIR``), so ``/metrics``
  on any process shows the whole group (alertd/core/service_metrics.py);
- ``control.sock``: the engine process's control socket. The engine process has no public listener
  (the receivers serve the port), so what must reach it from a request goes here: ``POST /-/reload``
  on a receiver asks the engine process to reload the group's rules and answers with its outcome.
- ``engine-health``: what would make the engine process unready (its engine steps failing), rewritten
  within ``HEALTH_POLL`` seconds of a change and every ``HEALTH_EVERY`` seconds otherwise. The receivers
  answer ``/readyz`` for the group, so they read it: a failure in it, or a report older than
  ``HEALTH_STALE`` (the engine process stalled), makes them unready too.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from alertd.core.service_metrics import MULTIPROC_ENV

log = logging.getLogger(__name__)
CONTROL_ENV = "ALERTD_CONTROL_SOCKET"
HEALTH_EVERY = 1.0  # seconds between the engine process's reports when nothing changes
HEALTH_POLL = 0.1  # seconds between looks at the engine's health: a change is reported this soon
HEALTH_STALE = 10.0  # seconds without one: the engine process is stalled (a step is at most a second or so)
RELOAD_TIMEOUT = 30.0  # seconds: loading and validating every rule file, on a busy machine


PREFIX = "alertd-group-"


def remove_dead_groups(tmp: Path) -> list[Path]:
    """Group directories of this user whose engine process is gone (a kill -9 skips the removal at stop).
    A live one is left alone, and so is one whose pid was reused: it is removed once that process is gone."""
    removed = []
    for path in tmp.glob(f"{PREFIX}*-*"):
        pid = path.name[len(PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or path.is_symlink() or path.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except (OSError, OverflowError):  # alive under another user (EPERM), gone meanwhile, or no pid at all
            continue
    if removed:
        log.info("removed %d group directories left by engine processes that were killed: %s",
                 len(removed), ", ".join(str(p) for p in removed))
    return removed


class ControlUnavailable(RuntimeError):
    """The engine process did not answer on its control socket."""


@dataclass(frozen=True)
class GroupDir:
    root: Path

    @classmethod
    def create(cls) -> "GroupDir":
        remove_dead_groups(Path(tempfile.gettempdir()))
        root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        (root / "metrics").mkdir()
        return cls(root)

    @property
    def metrics(self) -> Path:
        return self.root / "metrics"

    @property
    def control(self) -> Path:
        return self.root / "control.sock"

    @property
    def health(self) -> Path:
        return self.root / "engine-health"

    def environ(self) -> dict[str, str]:
        """What a receiver process needs in its environment."""
        return {MULTIPROC_ENV: str(self.metrics), CONTROL_ENV: str(self.control)}

    @classmethod
    def joined(cls) -> "GroupDir | None":
        """In a receiver process: the group it was started in (its control socket lies in the group's
        directory), or None outside a group."""
        control = os.environ.get(CONTROL_ENV)
        return cls(Path(control).parent) if control else None

    def enter(self) -> None:
        """Make this process write its metrics into the group's files (before prometheus_client is imported:
        it picks its value class then)."""
        os.environ[MULTIPROC_ENV] = str(self.metrics)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class HealthReport:
    """The engine process's word for the receivers' /readyz: ``failure()`` ("" when ready), written within
    ``HEALTH_POLL`` seconds of a change and every ``HEALTH_EVERY`` seconds otherwise, replaced whole, so a
    reader never sees half of it and the file's modification time says when it was last written."""

    path: Path
    failure: Callable[[], str]
    failing: bool = False  # the last write failed (logged once, not every second)
    written: str = ""
    written_at: float = 0.0

    def write(self) -> None:
        fresh = self.path.with_name(self.path.name + ".new")
        self.written, self.written_at = self.failure(), time.monotonic()
        try:
            fresh.write_text(self.written, encoding="utf-8")
            os.replace(fresh, self.path)
        except OSError as exc:  # the receivers see the report's age and say so
            if not self.failing:
                log.warning("could not report the engine's health to the receivers at %s: %s", self.path, exc)
            self.failing = True
        else:
            if self.failing:
                log.info("the engine's health reaches the receivers again at %s", self.path)
            self.failing = False

    async def run(self) -> None:
        while True:
            await asyncio.sleep(HEALTH_POLL)
            if self.failure() != self.written or time.monotonic() - self.written_at >= HEALTH_EVERY:
                self.write()


def engine_failure(path: Path | str, stale_after: float = HEALTH_STALE) -> str:
    """On a receiver: why the group's engine process makes it unready, or ""."""
    try:
        age = time.time() - os.stat(path).st_mtime
        failure = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return f"engine process health not readable at {path}: {exc.strerror or exc}"
    if age > stale_after:
        return f"engine process has not reported for {age:.0f}s: stalled or stopped"
    return f"engine process: {failure}" if failure else ""


async def serve_control(path: Path, reload: Callable[[], tuple[bool, str]]) -> asyncio.AbstractServer:
    """The engine process's control socket: one JSON answer per line asked (``reload``)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            asked = (await asyncio.wait_for(reader.readline(), 5)).strip()
            if asked == b"reload":
                ok, error = reload()
                answer = {"ok": ok, "error": error}
            else:
                answer = {"ok": False, "error": f"unknown control request {asked[:40]!r}"}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError) as exc:
            log.warning("control request dropped: %s", exc)
        finally:
            writer.close()

    return await asyncio.start_unix_server(handle, path=str(path))


async def ask_reload(path: str, timeout: float = RELOAD_TIMEOUT) -> tuple[bool, str]:
    """From a receiver: have the engine process reload the group's rules; its (ok, error)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), 5)
        try:
            writer.write(b"reload\n")
            await writer.drain()
            answer = json.loads(await asyncio.wait_for(reader.readline(), timeout) or b"null")
        finally:
            writer.close()
    except (OSError, asyncio.TimeoutError, ValueError) as exc:
        raise ControlUnavailable(f"the engine process did not answer on {path}: {type(exc).__name__}: {exc}") from None
    if not isinstance(answer, dict):
        raise ControlUnavailable(f"the engine process closed {path} without an answer")
    return bool(answer.get("ok")), str(answer.get("error") or "")
