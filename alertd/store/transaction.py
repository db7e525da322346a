"""One write transaction on a DB-API connection, the same way for the store and the inbox log."""
from __future__ import annotations

import logging
from typing import Any, Callable

from alertd.store.base import StoreUnavailable

log = logging.getLogger(__name__)


def transaction(conn: Any, fn: Callable[[Any], Any], *, begin: Callable[[Any], None], end: Callable[[], None],
                unavailable: tuple[type[BaseException], ...], after: Callable[[], None] | None = None) -> Any:
    """``fn(cursor)`` between ``begin`` and a commit; what the driver says is unavailable becomes
    StoreUnavailable (answered 503); anything else rolls back and propagates. ``after`` runs once committed,
    before ``end`` lets other writers in; its failure is logged, never turned into the commit's."""
    cur = conn.cursor()
    try:
        begin(cur)
        result = fn(cur)
        conn.commit()
        if after is not None:
            try:
                after()
            except Exception:  # committed: housekeeping after it must not turn it into a failure
                log.exception("store housekeeping after a commit failed")
    except unavailable as exc:
        rollback_quietly(conn)
        raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
    except BaseException:
        rollback_quietly(conn)
        raise
    finally:
        cur.close()
        end()
    return result


def rollback_quietly(conn: Any) -> None:
    try:
        conn.rollback()
    except Exception:  # the connection itself may be gone
        log.exception("rollback failed")
