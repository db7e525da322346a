"""The embedded default: SQLite in WAL mode, synchronous=FULL (an acknowledged batch survives power loss)."""
from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from alertd.store import compact, sql
from alertd.store.dbapi import SqlStore


log = logging.getLogger(__name__)
CHECKPOINT_EVERY = 1.0  # seconds between checks of the write-ahead log
CHECKPOINT_BYTES = 4 * 1024 * 1024  # a WAL larger than this is copied back into the database
# Past this the writer itself checkpoints (TRUNCATE) between two transactions: the background PASSIVE
# checkpoints copy pages but cannot restart the log while the writer keeps appending, so under a storm
# the WAL would grow without end. The writer's checkpoint mostly finds the pages already copied.
# The WAL counts in the data directory's size: 6 MB keeps it under 100 bytes per alert of an 80,000-alert
# storm (16 MB cost about 220) for no measurable ingest cost (docs/performance.md, disk use under a storm).
TRUNCATE_BYTES = 6 * 1024 * 1024
JOURNAL_SIZE_LIMIT = 6 * 1024 * 1024  # what a restarted WAL is cut back to


class SqliteStore(SqlStore):
    serial = "INTEGER"
    int_key = "INTEGER"
    placeholder = "?"
    unavailable = (sqlite3.OperationalError, sqlite3.DatabaseError)

    def __init__(self, path: Path | str, *, synchronous: str = "FULL", max_pages: int = 0, checkpoints: bool = True):
        super().__init__()
        # Receiver processes (serve --receivers N) leave checkpoints to the engine process: one checkpointer.
        self.checkpoints = checkpoints
        self.path = Path(path)
        self.synchronous = synchronous
        self.max_pages = max_pages  # a hard size cap; 0 = none (tests use it to simulate a full disk)
        self._wal = f"{self.path}-wal"
        self.truncations = 0  # writer checkpoints that restarted the WAL (tests, debugging)
        self._checkpointer: threading.Thread | None = None
        self._stop_checkpoints = threading.Event()
        self._writer_lock: int | None = None  # fd of <database>-writer, flock()ed around each write

    def _open_writer_lock(self) -> int | None:
        """Writers in several processes (``serve --receivers N``) take turns through flock() on this file.

        SQLite's own busy handler makes a second writer sleep and poll (1, 2, 5 ... 100 ms), so the
        receivers and the engine waiting on each other took hundreds of milliseconds per webhook; a
        blocking flock() hands the database to the next writer the moment the current one commits."""
        try:
            return os.open(f"{self.path}-writer", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # e.g. a read-only directory: SQLite's busy handler still keeps it correct
            log.warning("writers not serialised by %s-writer (%s); relying on SQLite's busy timeout", self.path, exc)
            return None

    def _end(self) -> None:
        if self._writer_lock is not None:
            fcntl.flock(self._writer_lock, fcntl.LOCK_UN)

    def _connect(self) -> Any:
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self._writer_lock is None:
                self._writer_lock = self._open_writer_lock()
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=10)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        if self.max_pages:
            conn.execute(f"PRAGMA max_page_count={int(self.max_pages)}")
        # Checkpoints run on their own connection and thread (below): done by the writer, copying the
        # log back and fsyncing the database would stall every webhook waiting on that commit.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        return conn

    async def open(self) -> None:
        await super().open()
        if str(self.path) != ":memory:" and self.checkpoints:
            self._stop_checkpoints.clear()
            self._checkpointer = threading.Thread(target=self._checkpoint_loop, name="alertd-sqlite-checkpoint",
                                                  daemon=True)
            self._checkpointer.start()

    async def close(self) -> None:
        self._stop_checkpoints.set()
        if self._checkpointer is not None:
            self._checkpointer.join(timeout=10)
            self._checkpointer = None
        await super().close()
        if self._writer_lock is not None:
            os.close(self._writer_lock)
            self._writer_lock = None

    def _checkpoint_loop(self) -> None:
        """PASSIVE checkpoints never block the writer; they copy what readers no longer need."""
        wal = Path(f"{self.path}-wal")
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=10)
        try:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            while not self._stop_checkpoints.wait(CHECKPOINT_EVERY):
                try:
                    if wal.exists() and wal.stat().st_size > CHECKPOINT_BYTES:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:  # e.g. a full disk: the next round tries again
                    log.warning("WAL checkpoint failed: %s", exc)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            log.warning("WAL checkpoint failed: %s", exc)
        finally:
            conn.close()

    def _begin(self, cur: Any) -> None:
        if self._writer_lock is not None:
            fcntl.flock(self._writer_lock, fcntl.LOCK_EX)
        cur.execute("BEGIN IMMEDIATE")

    def _stored_doc(self, doc: dict[str, Any]) -> Any:
        return sql.packed(doc)

    def _stored_event(self, doc: dict[str, Any]) -> Any:
        return sql.packed(doc, compact.EVENTS_WITH)

    def _after_write(self) -> None:
        """Bound the WAL: past TRUNCATE_BYTES, checkpoint and truncate it from the writer, between batches
        (holding the writers' flock, so other processes wait for it instead of polling)."""
        if not self.checkpoints:
            return
        try:
            if os.stat(self._wal).st_size <= TRUNCATE_BYTES:
                return
        except OSError:
            return
        started = time.monotonic()
        try:
            self._conn.execute("PRAGMA busy_timeout=200")  # a reader in the way: try again after the next write
            busy, frames, done = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:  # e.g. a full disk; the next write tries again
            log.warning("WAL checkpoint (TRUNCATE) failed: %s", exc)
            return
        finally:
            self._conn.execute("PRAGMA busy_timeout=10000")
        self.truncations += 0 if busy else 1
        log.debug("WAL checkpoint (TRUNCATE): busy=%s, %s frames, %.0f ms", busy, frames,
                  (time.monotonic() - started) * 1000)

    async def size_bytes(self) -> int | None:
        return self.disk_bytes()

    def disk_bytes(self) -> int:
        """The database, its WAL and its shared-memory file on disk (alertd_store_bytes)."""
        total = 0
        for p in (self.path, Path(self._wal), Path(f"{self.path}-shm")):
            try:
                total += p.stat().st_blocks * 512
            except OSError:
                pass
        return total

    def set_max_pages(self, pages: int) -> None:
        """Cap the database size from now on (simulates a full disk in tests).

        A cap at or below the current size first vacuums the free pages away: pruned
        inbox bodies leave free pages that SQLite would reuse, so a cap alone would not
        make the next write fail the way a full disk with no free pages does.
        """
        def cap() -> None:
            current = int(self._conn.execute("PRAGMA page_count").fetchone()[0])
            if pages <= current:
                self._conn.execute("VACUUM")
            self._conn.execute(f"PRAGMA max_page_count={int(pages)}")

        self._executor.submit(cap).result()
