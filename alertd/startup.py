"""Start-up checks that turn a store alertd cannot use into one line naming the file and the fix.

A corrupt or read-only database otherwise surfaces as a long traceback after
"listening on", with no file name and no hint. The traceback stays available at
log level debug.
"""
from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from alertd.store.sqlite import private_file

log = logging.getLogger(__name__)
CORRUPT = ("file is not a database", "malformed", "file is encrypted", "not a database")


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
            return (f"the database {path} is corrupt ({text}); move it aside to start with an empty store "
                    f"(mv {path} {path}.corrupt, and its -wal and -shm files if present) or restore a backup")
        if "readonly" in text or "read-only" in text:
            return f"the database {path} is read-only ({text}); {_writable_hint(path)}"
        if "locked" in text:
            return f"the database {path} is locked ({text}): is another alertd running on this data directory?"
        return f"cannot open the database {path}: {text}"
    return ""


def _writable_hint(where: Path) -> str:
    return (f"make {where} writable (e.g. a volume mounted read-write, owned by the alertd user) or point "
            "--data-dir / storage.sqlite_path elsewhere")
