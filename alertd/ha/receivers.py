"""``alertd serve --receivers N``: N receiver processes beside the engine, on one port.

The receivers bind the port with SO_REUSEPORT and the kernel spreads the
connections over them; they validate and write the shared SQLite (WAL) inbox,
the engine process reads it back. The engine process itself binds nothing, so
its engine steps never delay a webhook. One Python process uses one core: this
is how alertd uses the others. The receivers die with the engine process
(PR_SET_PDEATHSIG) and are stopped with it; they find the group's directory
(metrics files, control socket: alertd/ha/group.py) in their environment.

Once they run, the engine process lowers its own CPU priority (processing.engine_nice):
when the cores are busy, answering Alertmanager comes first and processing catches up
in larger steps. The inbox is durable, so nothing waits on the engine but the pages.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
from typing import Mapping, Sequence

from alertd.ha.group import MULTIPROC_ENV

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


def _thread_ids() -> list[int]:
    """This process's threads (Linux keeps a nice value per thread); elsewhere the calling thread alone."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


class ReceiverPool:
    """``env``: what the receivers add to this process's environment (the group's directory, alertd/ha/group.py)."""

    def __init__(self, count: int, argv: Sequence[str], env: Mapping[str, str] | None = None):
        self.count, self.argv = count, list(argv)
        self.env = {**os.environ, **(env or {})}
        self.procs: list[subprocess.Popen] = []
        self.nice = os.getpriority(os.PRIO_PROCESS, 0)  # the receivers': this process's before it lowers its own

    def _spawn(self) -> subprocess.Popen:
        nice = self.nice

        def prepare() -> None:  # in the child, before exec
            _die_with_parent()
            try:  # started again by an engine that lowered its priority: back to the receivers' (CAP_SYS_NICE)
                os.setpriority(os.PRIO_PROCESS, 0, nice)
            except OSError:
                pass

        return subprocess.Popen([sys.executable, "-m", "alertd.cli", *self.argv], env=self.env,
                                stdin=subprocess.DEVNULL, preexec_fn=prepare)

    def lower_engine(self, by: int) -> None:
        """This (the engine) process's threads go ``by`` nice steps below the receivers; threads started later
        inherit it from the thread that starts them. Measured on 2 cores (docs/performance.md): more webhooks
        acknowledged per second and a lower p99, the engine keeping up in larger steps."""
        if by <= 0:
            return
        nice = min(19, self.nice + by)
        for tid in _thread_ids():
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError as exc:  # a thread that just ended, or a system that refuses
                log.debug("could not lower the priority of thread %d: %s", tid, exc)
        log.info("engine process at nice %d, its receiver processes at %d (processing.engine_nice)", nice, self.nice)

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
                if (nice := os.getpriority(os.PRIO_PROCESS, self.procs[i].pid)) != self.nice:
                    log.warning("receiver process %d runs at the engine's priority (nice %d, not %d): raising a "
                                "priority needs CAP_SYS_NICE; restart alertd to give it back", self.procs[i].pid,
                                nice, self.nice)

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
