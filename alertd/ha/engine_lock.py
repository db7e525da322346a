"""One engine per SQLite database: an exclusive flock() on ``<database>-engine``, held for the process's life.

Two ``alertd serve`` on one data directory (started twice by mistake, or two
containers mounting one volume) would each run an engine on the same database:
two incident id counters, every notification sent twice. PostgreSQL replicas
are elected through the store (the lease); on SQLite the engine process takes
this lock instead. It is non-blocking (the second engine refuses to start at
once, naming the holder) and the kernel releases it when the holder's process
ends, however it ends (kill -9 included), so there is no stale lock to clean up.
Receiver processes (``serve --receivers N``) share the database with their
engine and take no lock.

The holder writes ``pid <pid> host <hostname>`` into the file, so the refusal
can say who holds it. The file descriptor is not inherited by child processes
(Python opens it non-inheritable), so receivers never keep the lock alive.
"""
from __future__ import annotations

import fcntl
import os
import socket
from dataclasses import dataclass
from pathlib import Path


class EngineLocked(Exception):
    """Another process runs the engine on this database; the message is one line for the operator."""


@dataclass(slots=True)
class EngineLock:
    path: Path
    fd: int

    def release(self) -> None:
        """Only for tests and in-process restarts: a process that ends releases the lock anyway."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def lock_path(database: Path) -> Path:
    return database.with_name(database.name + "-engine")


def acquire(database: Path, data_dir: Path) -> EngineLock:
    """Take the engine lock of ``database`` or raise EngineLocked naming ``data_dir`` and the holder."""
    path = lock_path(database)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise EngineLocked(
            f"another alertd engine already runs on the data directory {data_dir} ({holder} holds {path}); "
            "stop it, or give this one its own --data-dir") from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} host {socket.gethostname()}\n".encode(), 0)
    return EngineLock(path, fd)


def _holder(fd: int) -> str:
    """What the holder wrote ('pid 123 host a'), or a neutral phrase while it has not written yet."""
    try:
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text if text.startswith("pid ") else "a process whose pid is not recorded"
