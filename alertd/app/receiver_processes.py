"""``alertd serve --receivers N``: N receiver processes beside the engine, on one port.

The engine process binds the port once and the receivers inherit the
listening socket (alertd/app/listener.py: no other process can join it), and
the kernel spreads the connections over them; they validate and write the shared SQLite (WAL) inbox,
the engine process reads it back. The engine process itself binds nothing, so
its engine steps never delay a webhook. One Python process uses one core: this
is how alertd uses the others. The receivers die with the engine process
(PR_SET_PDEATHSIG) and are stopped with it; they find the group's directory
(metrics files, control socket: alertd/app/receiver_group.py) in their environment.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
from typing import Mapping, Sequence

from alertd.core.service_metrics import MULTIPROC_ENV

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


def default_receivers(backend: str, cores: int | None = None) -> int:
    """One receiver process beside the engine where there is a second core, on SQLite.

    Measured on this project's 2-core reference machine (docs/performance.md, bench/ha.py): with the
    inbox log, acknowledging no longer waits for the engine's commits, so the engine's CPU is what slows
    webhooks in a single process; one receiver took 1.6-1.9x the webhooks/s of a single process at a
    lower p99, and a second one did not add on 2 cores. PostgreSQL replicas stay one process each (they
    scale by replicas). ``--receivers N`` keeps the choice open."""
    cores = os.cpu_count() if cores is None else cores
    return 1 if backend == "sqlite" and (cores or 1) >= 2 else 0


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:  # not Linux: the receiver notices its parent's death at its next parent check
        pass


class ReceiverPool:
    """``env``: what the receivers add to this process's environment (the group's directory, alertd/app/receiver_group.py)."""

    def __init__(self, count: int, argv: Sequence[str], env: Mapping[str, str] | None = None,
                 pass_fds: Sequence[int] = ()):
        self.count, self.argv = count, list(argv)
        self.env = {**os.environ, **(env or {})}
        self.pass_fds = tuple(pass_fds)  # the group's listening socket (alertd/app/listener.py)
        self.procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "alertd.cli.main", *self.argv], env=self.env,
                                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, pass_fds=self.pass_fds)

    def start(self) -> None:
        for _ in range(self.count):
            self.procs.append(self._spawn())
        log.info("started %d receiver processes: %s", self.count, ", ".join(str(p.pid) for p in self.procs))

    def restart_dead(self) -> None:
        for i, proc in enumerate(self.procs):
            if proc.poll() is not None:
                log.error("receiver process %d exited with %s; starting another", proc.pid, proc.returncode)
                self._forget(proc.pid)
                self.procs[i] = self._spawn()

    def _forget(self, pid: int) -> None:
        """A dead receiver's live gauges leave the group's metrics (its counters stay in the sums)."""
        if path := self.env.get(MULTIPROC_ENV):
            from prometheus_client.multiprocess import mark_process_dead

            mark_process_dead(pid, path)

    def signal(self, signum: int) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    def stop(self, timeout: float = 15.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self._forget(proc.pid)
        self.procs = []
