"""What the parts of the store need from the backend they share (alertd/store/backend.py implements it).

One database, on one thread: its reads and write transactions (fenced ones for the engine's writes),
its dialect, and the inbox log as the engine reads it. The parts (alertd/store/facade.py lists them)
are given one at construction; none of them knows which backend it is.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from alertd.core.json_types import JSONObject
from alertd.store.base import StoreUnavailable
from alertd.store.inbox_log import InboxLog

Rows = list[tuple[Any, ...]]


class Database(Protocol):
    last_id: str  # SQL naming the id of the row this session inserted last
    for_update: str  # what locks a selected row where the backend locks rows
    log: InboxLog  # the receive side's appends

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the store thread; every other member is called there."""

    def q(self, statement: str) -> str:
        """A statement written with ``?`` placeholders, as the driver wants it."""

    def query(self, statement: str, args: tuple[Any, ...] | list[Any] = ()) -> Rows: ...

    def cursor(self) -> Any:
        """For several reads in one snapshot; the caller commits (``commit``) and closes it."""

    def commit(self) -> None: ...

    def tx(self, fn: Callable[[Any], Any]) -> Any:
        """``fn(cursor)`` in one write transaction; StoreUnavailable when the database cannot take it."""

    def ftx(self, fn: Callable[[Any], Any]) -> Any:
        """A write transaction of the engine's that first checks its lease (``set_fence``)."""

    def attempt_tx(self, fn: Callable[[Any], Any]) -> Any:
        """The transaction an attempt at webhooks is counted in (alertd/store/quarantine.py)."""

    def set_fence(self, holder: str | None, token: int = 0) -> None: ...

    def stored_doc(self, doc: JSONObject) -> str | bytes:
        """How a member or incident document is stored."""

    def stored_event(self, doc: JSONObject) -> str | bytes:
        """How a timeline event is stored."""

    def db_now(self, cur: Any) -> float:
        """The database's clock, in seconds since the epoch."""

    def lease_round_begins(self, cur: Any, token: int) -> None: ...

    def lock_refused(self, exc: StoreUnavailable) -> bool:
        """Whether a write failed only because a row lock was not granted in time."""

    def log_query(self, statement: str, args: tuple[Any, ...] | list[Any] = ()) -> Rows: ...

    def taken_upto(self) -> int:
        """Log ids up to this one are taken (0: taken rows leave the log in the step)."""

    def take_hooks(self, cur: Any, ids: list[int]) -> None:
        """In the step's transaction: these webhooks are taken."""

    def log_idle(self) -> None: ...

    def backlog_hooks(self) -> int: ...


class Part:
    """What every part of the store is: methods over the backend it shares with the others. ``SqlStore``
    (alertd/store/facade.py) inherits them all, so each part keeps its own names (a unit test checks)."""

    def __init__(self, db: Database):
        self.db = db
