"""Store operations for several processes over one database: the engine lease, fencing, forwarded
actions and shared settings (installation id). Mixed into SqlStore; runs on its store thread.
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any, Callable

from alertd.store.lease import ENGINE, LeaseVerdict, Fenced, LeaseRow, judge_lease
from alertd.core.model import iso


class CoordinationMixin:
    """Needs SqlStore's ``_run``, ``_tx``, ``_q`` and ``_query``."""

    for_update = ""  # PostgreSQL locks the lease row; SQLite's BEGIN IMMEDIATE locks the database
    _fence: tuple[str, int] | None = None

    _run: Callable[..., Any]
    _tx: Callable[..., Any]
    _q: Callable[[str], str]
    _query: Callable[..., list[tuple[Any, ...]]]

    def _db_now(self, cur: Any) -> float:
        """The database's clock (backend hook): replicas with skewed clocks agree on lease expiry."""
        return time.time()

    # ----- the engine lease -----

    def _lease_round_begins(self, cur: Any, token: int) -> None:
        """Backend hook, at the start of a lease round's transaction (``token`` 0: a follower's)."""

    async def acquire_lease(self, holder: str, address: str, ttl: float, token: int) -> tuple[LeaseVerdict, LeaseRow | None]:
        """Create, renew or take over the engine lease if allowed; returns the decision and the row seen."""
        def do(cur: Any) -> tuple[LeaseVerdict, LeaseRow | None]:
            self._lease_round_begins(cur, token)
            cur.execute(self._q("SELECT holder, token, expires_at, address FROM leases WHERE name = ?" + self.for_update),
                        (ENGINE,))
            found = cur.fetchone()
            # The clock is read once the row is locked: the wait for a lock (a writer holding the lease row)
            # must neither make a lease look unexpired nor shorten the one granted now.
            now = self._db_now(cur)
            row = LeaseRow(found[0], int(found[1]), float(found[2]), found[3]) if found else None
            decision = judge_lease(row, holder, token, now, ttl)
            if decision.action == "create":
                cur.execute(self._q("INSERT INTO leases (name, holder, token, expires_at, address) VALUES (?, ?, ?, ?, ?) "
                                    "ON CONFLICT (name) DO NOTHING"), (ENGINE, holder, 1, decision.expires_at, address))
                if cur.rowcount != 1:  # another process created it first
                    return LeaseVerdict("wait", 0), row
            elif decision.action in ("renew", "take"):
                cur.execute(self._q("UPDATE leases SET holder = ?, token = ?, expires_at = ?, address = ? WHERE name = ?"),
                            (holder, decision.token, decision.expires_at, address, ENGINE))
            return decision, row
        result: tuple[LeaseVerdict, LeaseRow | None] = await self._run(self._tx, do)
        return result

    async def release_lease(self, holder: str, token: int) -> None:
        """Let the lease expire now (a clean shutdown), so a follower takes over without waiting."""
        await self._run(self._tx, lambda cur: cur.execute(
            self._q("UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? AND token = ?"), (ENGINE, holder, token)))

    async def lease(self) -> LeaseRow | None:
        rows = await self._run(self._query, "SELECT holder, token, expires_at, address FROM leases WHERE name = ?", (ENGINE,))
        return LeaseRow(rows[0][0], int(rows[0][1]), float(rows[0][2]), rows[0][3]) if rows else None

    def set_fence(self, holder: str | None, token: int = 0) -> None:
        """From now on every engine write checks, in its own transaction, that this token still holds the lease."""
        self._fence = (holder, token) if holder else None

    def _check_fence(self, cur: Any) -> None:
        if self._fence is None:
            return
        holder, token = self._fence
        # Row-locks the lease until commit: a takeover waits for this transaction or makes it fail here.
        cur.execute(self._q("UPDATE leases SET token = token WHERE name = ? AND holder = ? AND token = ?"),
                    (ENGINE, holder, token))
        if cur.rowcount != 1:
            raise Fenced(f"engine lease token {token} of {holder} is no longer valid: write refused")

    def _ftx(self, fn: Callable[[Any], Any]) -> Any:
        """A fenced engine transaction (on the store thread)."""
        def fenced(cur: Any) -> Any:
            self._check_fence(cur)
            return fn(cur)
        return self._tx(fenced)

    # ----- actions forwarded from followers to the leader -----

    async def submit_command(self, kind: str, incident_id: str, args: dict[str, Any]) -> int:
        def do(cur: Any) -> int:
            cur.execute(self._q("INSERT INTO commands (kind, incident_id, args, created_at) VALUES (?, ?, ?, ?) RETURNING id"),
                        (kind, incident_id, json.dumps(args, default=str), iso(datetime.now(timezone.utc))))
            return int(cur.fetchone()[0])
        command_id: int = await self._run(self._tx, do)
        return command_id

    async def command_result(self, command_id: int) -> tuple[str, str]:
        rows = await self._run(self._query, "SELECT state, result FROM commands WHERE id = ?", (command_id,))
        return (rows[0][0], rows[0][1]) if rows else ("missing", "")

    async def pending_commands(self, limit: int = 50) -> list[tuple[int, str, str, dict[str, Any]]]:
        rows = await self._run(self._query, "SELECT id, kind, incident_id, args FROM commands WHERE state = 'pending' "
                                            "ORDER BY id LIMIT ?", (limit,))
        return [(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

    async def finish_command(self, command_id: int, result: str) -> None:
        await self._run(self._ftx, lambda cur: cur.execute(
            self._q("UPDATE commands SET state = 'done', result = ? WHERE id = ?"), (result, command_id)))

    # ----- shared settings -----

    async def meta_setdefault(self, key: str, value: str) -> str:
        """The stored value of ``key``, storing ``value`` first if there is none (first start wins)."""
        def do(cur: Any) -> str:
            cur.execute(self._q("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"), (key, value))
            cur.execute(self._q("SELECT value FROM meta WHERE key = ?"), (key,))
            return str(cur.fetchone()[0])
        stored: str = await self._run(self._tx, do)
        return stored
