"""Start-up checks that turn what alertd cannot start with into one line naming the file and the fix.

``preflight`` runs them before anything starts, in order: the rules load, the server's own checks (the
exposure of an address without credentials, the TLS certificate: alertd/cli/serve.py), the store can be
used, no other engine holds the SQLite database, the receivers' port can be bound. A corrupt or read-only
database otherwise surfaces as a long traceback after "listening on", with no file name and no hint.
The traceback stays available at log level debug.
"""
from __future__ import annotations

import logging
import os
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from alertd.app.listener import bind_listener
from alertd.app.options import ServeOptions
from alertd.app.recording_rules import load_site_rules
from alertd.config.settings import Config
from alertd.core.errors import InvalidDocument
from alertd.ha import engine_lock
from alertd.rules.ruleset import RuleSet
from alertd.store.sqlite import private_file

log = logging.getLogger(__name__)
CORRUPT = ("file is not a database", "malformed", "file is encrypted", "not a database")


class PreflightFailed(Exception):
    """What stops the start, as the line(s) to print on stderr."""


@dataclass(frozen=True)
class Cleared:
    """What the checks produced and the service starts with."""

    rules: RuleSet
    engine_lock: engine_lock.EngineLock | None  # held until the process ends (docs/ha.md)
    # A receiver group's listening socket, bound by its engine process and inherited by the receivers: no other
    # alertd can join the port (alertd/app/listener.py).
    listener: socket.socket | None = None


def preflight(options: ServeOptions, cfg: Config, checks: Sequence[Callable[[], str]] = ()) -> Cleared:
    """Every check in order; the first problem raises PreflightFailed. ``checks``: the server's own, each
    returning a problem ("" when fine)."""
    try:
        rules = load_site_rules(cfg)
    except InvalidDocument as exc:
        raise PreflightFailed(f"invalid rules:\n{exc}") from None
    for check in checks:
        if problem := check():
            raise PreflightFailed(f"alertd: {problem}")
    if options.backend == "sqlite" and (problem := sqlite_problem(options.database)):
        raise PreflightFailed(f"alertd: {problem}")
    lock = None
    if options.backend == "sqlite" and options.role == "engine":
        try:
            lock = engine_lock.acquire(options.database, options.data_dir.resolve())
        except (engine_lock.EngineLocked, OSError) as exc:
            raise PreflightFailed(f"alertd: {exc}") from None
    listener = None
    if options.leads_group:  # bound here, not in a restart loop of receivers
        try:
            listener = bind_listener(*cfg.host_port)
        except OSError as exc:
            raise PreflightFailed(f"alertd: could not start: {cfg.listen}: {exc}") from None
    return Cleared(rules, lock, listener)


def sqlite_problem(path: Path) -> str:
    """Why the SQLite store at ``path`` cannot be used (one line with what to do), or ""."""
    directory = path.parent
    try:
        private_file(path)  # 0600 in a 0700 directory when created here (alertd/store/sqlite.py)
    except OSError as exc:
        return f"cannot create the data directory {directory}: {exc.strerror or exc}; {_writable_hint(directory)}"
    if os.statvfs(directory).f_flag & os.ST_RDONLY:
        return (f"the data directory {directory} is on a read-only file system; {_writable_hint(directory)}")
    if not os.access(directory, os.W_OK | os.X_OK):
        return (f"the data directory {directory} is not writable by uid {os.getuid()} (SQLite also writes its "
                f"-wal and -shm files there); {_writable_hint(directory)}")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        return f"the database {path} is read-only for uid {os.getuid()}; {_writable_hint(path)}"
    try:
        conn = sqlite3.connect(str(path), timeout=10)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            conn.execute("BEGIN IMMEDIATE")  # can we write? (read-only file system, locked by another process)
            conn.execute("ROLLBACK")
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        log.debug("store check failed", exc_info=True)
        text = str(exc)
        if any(word in text for word in CORRUPT):
            return corrupt_advice(path, text)
        if "readonly" in text or "read-only" in text:
            return f"the database {path} is read-only ({text}); {_writable_hint(path)}"
        if "locked" in text:
            return f"the database {path} is locked ({text}): is another alertd running on this data directory?"
        return f"cannot open the database {path}: {text}"
    return ""


def corrupt_advice(path: Path, why: str) -> str:
    """One line: which file is damaged, and the three ways on (restore, recover, start empty)."""
    return (f"the database {path} is corrupt ({why}); stop alertd, then restore it from a backup, or keep what is "
            f"readable with sqlite3's .recover (sqlite3 {path} .recover | sqlite3 {path}.recovered, then "
            f"mv {path}.recovered {path}), or move it aside to start with an empty store (mv {path} {path}.corrupt); "
            "in each case remove its -wal and -shm files if present")


def damaged(database: Path) -> str:
    """After a start-up failure: the advice for the first of the store's files (the database and its inbox
    log) that SQLite's quick_check finds damaged, or "". Read-only; it reads every page, so it runs only
    once something failed, never on an ordinary start."""
    for path in (database, Path(f"{database}-inbox")):
        if not path.exists():
            continue
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
            try:
                rows = conn.execute("PRAGMA quick_check(3)").fetchall()
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            if any(word in str(exc) for word in CORRUPT):
                return corrupt_advice(path, str(exc))
            continue
        found = [str(r[0]) for r in rows if r and r[0] != "ok"]
        if found:
            why = "; ".join(line for text in found for line in text.splitlines())
            return corrupt_advice(path, why if len(why) <= 200 else why[:199] + "…")
    return ""


def _writable_hint(where: Path) -> str:
    return (f"make {where} writable (e.g. a volume mounted read-write, owned by the alertd user) or point "
            "--data-dir / storage.sqlite_path elsewhere")
