"""The embedded default: SQLite in WAL mode, synchronous=FULL (an acknowledged batch survives power loss)."""
from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from alertd.core.json_types import JSONObject
from alertd.store import compact, sql
from alertd.store.backend import SqlBackend
from alertd.store.facade import SqlStore
from alertd.store.inbox_log import InboxLogDatabase


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
# The log's WAL is copied back PASSIVE, alongside its writers (a blocking checkpoint copying megabytes would
# hold every acknowledgement waiting). SQLite restarts a WAL from its start only when a writer begins after a
# round that caught up, which under steady appends never happens by itself: past LOG_WAL_RESTART a second
# PASSIVE round holding the writers' lock copies the few frames appended since the first, so the next append
# restarts it. Only past LOG_WAL_LIMIT, or once quiet, is it truncated holding the lock.
LOG_WAL_RESTART = 4 * 1024 * 1024
LOG_WAL_LIMIT = 64 * 1024 * 1024
LOG_QUIET = 2.0  # seconds without a webhook taken before the log is tidied (free pages back, WAL truncated)
RELEASE_CHUNK = 32  # taken webhooks deleted per transaction (each holds the appending writers ~1 ms)
RELEASE_ROWS = 256  # taken webhooks deleted from the inbox log at least every this many ...
RELEASE_EVERY = 0.25  # ... or seconds


class SqliteBackend(SqlBackend):
    serial = "INTEGER"
    int_key = "INTEGER"
    strpos = "instr"
    placeholder = "?"
    unavailable = (sqlite3.OperationalError, sqlite3.DatabaseError)

    def __init__(self, path: Path | str, *, synchronous: str = "FULL", max_pages: int = 0, checkpoints: bool = True):
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
        self.log_path = Path(f"{self.path}-inbox")
        self._log_lock: int | None = None  # fd of <log>-writer: the log's writers in every process take turns
        # ... and this process's threads too (the receive path, the engine's housekeeping: one flock between them)
        self._log_mutex = threading.Lock()
        self._log_reader: sqlite3.Connection | None = None  # the engine's connection to the log (store thread)
        self._log_id = ""  # the log file's own id (log_meta): the engine's mark names the log it belongs to
        self._log_page = 4096  # the log's page size, read at open (a WAL frame holds one page)
        self._taken = 0  # log ids up to this are taken (meta inbox_taken, read at open)
        self._taking = 0  # what the step being committed takes
        self._released = 0  # log rows up to this are deleted
        self._released_at = 0.0
        self._took_at = 0.0  # when the engine last took webhooks (monotonic): the log is tidied once quiet
        self._untidy = True  # the log may hold free pages or a WAL since it was last tidied (see _release)
        super().__init__()

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
        _unlock(self._writer_lock)
        self._taking = 0  # committed (then _after_write took it) or rolled back

    def _connect(self) -> Any:
        if str(self.path) != ":memory:":
            private_file(self.path)
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

    async def open(self, *upgrades: Callable[[], None]) -> None:
        await super().open(*upgrades)
        # The engine's mark is read (and tied to this log) before any step: a step naming the webhooks it takes
        # must not be the first to set it, or the mark is not tied to a log and a restart takes them again.
        await self.run(self._read_mark)
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
        def close_reader() -> None:
            if self._log_reader is not None:
                self._log_reader.close()
                self._log_reader = None
        self._executor.submit(close_reader).result()
        await super().close()
        for fd in (self._writer_lock, self._log_lock):
            if fd is not None:
                os.close(fd)
        self._writer_lock = self._log_lock = None

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

    # ----- the inbox log: a database file of its own -----

    def _inbox_log_database(self) -> InboxLogDatabase:
        return InboxLogDatabase(connect=self._connect_log, begin=self._begin_log, end=self._end_log,
                          unavailable=self.unavailable)

    def _connect_log(self, synchronous: str | None = None) -> sqlite3.Connection:
        """The log's writers wait for each other (flock on ``<log>-writer``), never for the engine's commits."""
        private_file(self.log_path)
        if self._log_lock is None:
            self._log_lock = os.open(f"{self.log_path}-writer", os.O_RDWR | os.O_CREAT, 0o600)
        conn = sqlite3.connect(str(self.log_path), isolation_level=None, check_same_thread=False, timeout=10)
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # before the first table: taken rows give their pages back
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous or self.synchronous}")
        conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # never on an acknowledgement's path: see _release
        if self.max_pages:
            conn.execute(f"PRAGMA max_page_count={int(self.max_pages)}")
        conn.execute("CREATE TABLE IF NOT EXISTS inbox_log (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                     "received_at TEXT NOT NULL, alerts INTEGER NOT NULL, body BLOB NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS log_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT OR IGNORE INTO log_meta (key, value) VALUES ('id', ?)", (uuid.uuid4().hex,))
        return conn

    def _hold_log(self) -> None:
        """The log writers' turn: this process's threads (they share one flock), then the other processes'.
        Released by _end_log, which the caller runs whatever happens."""
        self._log_mutex.acquire()
        _lock(self._log_lock)

    def _begin_log(self, cur: Any) -> None:
        self._hold_log()
        cur.execute("BEGIN IMMEDIATE")

    def _end_log(self) -> None:
        try:
            _unlock(self._log_lock)
        finally:
            self._log_mutex.release()

    def _schema_vars(self) -> dict[str, str]:
        return {**super()._schema_vars(), "inbox_log": "SELECT 1"}  # the log is its own file (above)

    def log_query(self, statement: str, args: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        assert self._log_reader is not None, "the store is not open"
        return self._log_reader.execute(statement, args).fetchall()

    def taken_upto(self) -> int:
        return self._taken

    def _read_mark(self) -> None:
        """At open: the engine's connection to the log (its deletes need no fsync, see _release), the log's id
        and how far the engine took it (main database, meta). A log that is not the one the engine took from
        (deleted, replaced) is taken from its start."""
        self._log_reader = self._connect_log(synchronous="NORMAL")
        self._log_id = self._log_reader.execute("SELECT value FROM log_meta WHERE key = 'id'").fetchone()[0]
        self._log_page = self._log_reader.execute("PRAGMA page_size").fetchone()[0]
        marked, taken = self._stored_mark()
        if marked == self._log_id:
            self._taken = taken
        else:
            if marked:
                log.warning("inbox log %s is not the one the engine took from; taking it from its start", self.log_path)
            counted = self.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'inbox_attempts'")
            self.tx(lambda cur: [cur.execute(sql.UPSERT_META, ("inbox_log", self._log_id)),
                                  cur.execute(sql.UPSERT_META, ("inbox_taken", "0")),
                                  counted and cur.execute("DELETE FROM inbox_attempts")])  # the old log's ids
            self._taken = 0
        self._released = self._taken

    def _stored_mark(self) -> tuple[str | None, int]:
        """The engine's mark as stored (main database, meta): the log it belongs to and how far it took it."""
        meta = dict(self.query("SELECT key, value FROM meta WHERE key IN ('inbox_log', 'inbox_taken')"))
        return meta.get("inbox_log"), int(meta.get("inbox_taken") or 0)

    def backlog_hooks(self) -> int:
        """Ids commit in order here: the log's last id less the engine's mark. The mark is read again from the
        main database (a receiver process's own ``_taken`` is the one read at its open), and before the log, so
        the log read sees every id it names; a log the mark is not tied to (see _read_mark) counts whole."""
        marked, taken = self._stored_mark()
        # One subquery each: SQLite answers a lone min() or max() from the index, both together by a scan
        first, last = self.log_query("SELECT (SELECT min(id) FROM inbox_log), (SELECT max(id) FROM inbox_log)")[0]
        if last is None:
            return 0
        return int(last) - int(first) + 1 if marked != self._log_id else max(0, int(last) - taken)

    def log_idle(self) -> None:
        self._release(idle=True)

    def take_hooks(self, cur: Any, ids: list[int]) -> None:
        """Ids commit in order (one writer at a time): the engine takes a prefix, and the step names its end."""
        self._taking, self._took_at = max(ids), time.monotonic()
        cur.execute(sql.UPSERT_META, ("inbox_taken", str(self._taking)))

    def _release(self, idle: bool = False) -> None:
        """Taken rows leave the log every RELEASE_EVERY seconds or RELEASE_ROWS webhooks, RELEASE_CHUNK per
        transaction, and whenever the engine finds it empty, outside any acknowledgement (no fsync of its own:
        a lost delete is repeated, the engine's mark keeps them taken). The log's WAL is copied back here too,
        never by an appending writer (see LOG_WAL_RESTART), and truncated past LOG_WAL_LIMIT; once the log is
        drained and quiet (LOG_QUIET) its free pages go back to the file system and its WAL is truncated, so
        neither keeps a storm's size."""
        if self._log_reader is None:
            return
        due = self._taken > self._released and (idle or self._taken - self._released >= RELEASE_ROWS or
                                                 time.monotonic() - self._released_at >= RELEASE_EVERY)
        # Once drained and quiet: free pages and the WAL go back. Not each time the engine merely catches up
        # (many times a second under a steady load): truncating holds every appending writer waiting.
        tidy = idle and self._untidy and time.monotonic() - self._took_at >= LOG_QUIET
        if not due and not tidy:
            return
        conn = self._log_reader
        start = self._released
        while True:  # in chunks, letting the writers in between: each chunk holds them a few ms
            upto = min(self._taken, start + RELEASE_CHUNK)
            last = upto >= self._taken
            try:
                self._begin_log(conn.cursor())  # in the try: the lock is released if BEGIN fails
                conn.execute("DELETE FROM inbox_log WHERE id > ? AND id <= ?", (start, upto))
                conn.execute("COMMIT")
                if last and tidy:  # under load the freed pages are reused by the next appends
                    conn.executescript("PRAGMA incremental_vacuum;")  # (sqlite3_exec: steps it to the end)
                if last and (tidy or _size(f"{self.log_path}-wal") > LOG_WAL_LIMIT):
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:  # e.g. a full disk: the next round tries again
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                log.warning("could not delete taken webhooks from the inbox log: %s", exc)
                return
            finally:
                self._end_log()
            self._released = start = upto
            if last:
                break
        if not tidy:
            self._checkpoint_log(conn)
        self._released_at, self._untidy = time.monotonic(), not tidy

    def _checkpoint_log(self, conn: sqlite3.Connection) -> None:
        """PASSIVE alongside the writers; past LOG_WAL_RESTART once more holding their lock (see LOG_WAL_RESTART)."""
        try:
            # Caught up or not: a writer that began during this round restarts nothing (it read from the WAL)
            _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if frames * self._log_page > LOG_WAL_RESTART:
                try:
                    self._hold_log()
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                finally:
                    self._end_log()
        except sqlite3.Error as exc:
            log.warning("inbox log checkpoint failed: %s", exc)

    def _begin(self, cur: Any) -> None:
        _locked_begin(self._writer_lock, cur)

    def attempt_tx(self, fn: Callable[[Any], Any]) -> Any:
        """An attempt must outlive the process (a kill -9 mid-step), not the machine: in WAL mode a commit at
        synchronous=NORMAL survives the process without an fsync of its own, so counting it costs the engine's
        steps no second fsync. A power loss forgets at most the count of the step that was running."""
        if self.synchronous.upper() != "FULL":
            return self.tx(fn)
        self._conn.execute("PRAGMA synchronous=NORMAL")
        try:
            return self.tx(fn)
        finally:
            self._conn.execute("PRAGMA synchronous=FULL")

    def stored_doc(self, doc: JSONObject) -> str | bytes:
        return sql.packed(doc)

    def stored_event(self, doc: JSONObject) -> str | bytes:
        return sql.packed(doc, compact.EVENTS_WITH)

    def _after_write(self) -> None:
        """Bound the WAL: past TRUNCATE_BYTES, checkpoint and truncate it from the writer, between batches
        (holding the writers' flock, so other processes wait for it instead of polling)."""
        if self._taking:
            self._taken = self._taking
            self._release()
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
        for p in (self.path, Path(self._wal), Path(f"{self.path}-shm"), self.log_path, Path(f"{self.log_path}-wal"),
                  Path(f"{self.log_path}-shm")):
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
        def cap(conn: sqlite3.Connection) -> None:
            current = int(conn.execute("PRAGMA page_count").fetchone()[0])
            if pages <= current:
                conn.execute("VACUUM")
            conn.execute(f"PRAGMA max_page_count={int(pages)}")

        self._executor.submit(cap, self._conn).result()
        self.log.run(cap)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _locked_begin(lock: int | None, cur: Any) -> None:
    """A write transaction after the writers' flock (when there is a lock file): waiting writers in other
    processes are woken when it is released, where SQLite's busy handler sleeps and polls."""
    _lock(lock)
    cur.execute("BEGIN IMMEDIATE")


def _lock(lock: int | None) -> None:
    if lock is not None:
        fcntl.flock(lock, fcntl.LOCK_EX)


def _unlock(lock: int | None) -> None:
    if lock is not None:
        fcntl.flock(lock, fcntl.LOCK_UN)


def private_file(path: Path) -> None:
    """Create a database file (and its directory) readable by alertd's user only: 0600 in a 0700 directory.

    They hold incidents, the audit trail and session rows. SQLite gives the -wal and -shm files it creates
    later the database file's mode, so creating the file first, with os.open's mode, covers them too.
    Existing files keep the mode they have (an operator may have chosen it)."""
    private_dir(path.parent)
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError:  # read-only or unwritable: sqlite3.connect says so, with the file's name (alertd/app/preflight.py)
        pass


def private_dir(directory: Path) -> None:
    """mkdir -p with 0700 for the directories it creates (the data directory)."""
    if not directory.exists():
        private_dir(directory.parent)
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass


class SqliteStore(SqlStore):
    """The store on SQLite: builds its backend. ``disk_bytes`` is the backend's, cheap enough (a few stat()
    calls) for the service to measure at each scrape."""

    def __init__(self, path: Path | str, *, synchronous: str = "FULL", max_pages: int = 0, checkpoints: bool = True):
        backend = SqliteBackend(path, synchronous=synchronous, max_pages=max_pages, checkpoints=checkpoints)
        super().__init__(backend)
        self.disk_bytes = backend.disk_bytes
