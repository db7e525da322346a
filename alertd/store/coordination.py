"""Parts of the store for several processes over one database: the engine lease and fencing, actions
forwarded to the leader, shared settings (installation id). Each runs on the backend's thread; the fence
itself is the backend's (every engine write checks it: ``Database.ftx``).
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from alertd.core.json_types import JSONObject, obj
from alertd.core.model import iso
from alertd.store.database import Part
from alertd.store.base import StoreUnavailable
from alertd.store.lease import ENGINE, LeaseRow, LeaseVerdict, judge_lease


class Lease(Part):
    """The engine lease: create, renew, take over, release; and the fence the engine's writes check."""

    async def acquire_lease(self, holder: str, address: str, ttl: float, token: int) -> tuple[LeaseVerdict, LeaseRow | None]:
        """Create, renew or take over the engine lease if allowed; returns the decision and the row seen."""
        def do(cur: Any) -> tuple[LeaseVerdict, LeaseRow | None]:
            self.db.lease_round_begins(cur, token)
            cur.execute(self.db.q("SELECT holder, token, expires_at, address FROM leases WHERE name = ?" + self.db.for_update),
                        (ENGINE,))
            found = cur.fetchone()
            # The clock is read once the row is locked: the wait for a lock (a writer holding the lease row)
            # must neither make a lease look unexpired nor shorten the one granted now.
            now = self.db.db_now(cur)
            row = LeaseRow(found[0], int(found[1]), float(found[2]), found[3]) if found else None
            decision = judge_lease(row, holder, token, now, ttl)
            if decision.action == "create":
                cur.execute(self.db.q("INSERT INTO leases (name, holder, token, expires_at, address) VALUES (?, ?, ?, ?, ?) "
                                    "ON CONFLICT (name) DO NOTHING"), (ENGINE, holder, 1, decision.expires_at, address))
                if cur.rowcount != 1:  # another process created it first
                    return LeaseVerdict("wait", 0), row
            elif decision.action in ("renew", "take"):
                cur.execute(self.db.q("UPDATE leases SET holder = ?, token = ?, expires_at = ?, address = ? WHERE name = ?"),
                            (holder, decision.token, decision.expires_at, address, ENGINE))
            return decision, row
        try:
            result: tuple[LeaseVerdict, LeaseRow | None] = await self.db.run(self.db.tx, do)
        except StoreUnavailable as exc:
            # A follower finding the lease row locked (PostgreSQL) waits for its next round instead of for the
            # lock: the row is held by the leader's write in progress (it is alive) or by a cut-off leader's
            # transaction, which the server ends (idle_in_transaction_session_timeout). Meanwhile the
            # follower's store keeps serving its webhooks, which would otherwise queue behind the lock.
            if token or not self.db.lock_refused(exc):
                raise
            return LeaseVerdict("wait", 0), None
        return result

    async def release_lease(self, holder: str, token: int) -> None:
        """Let the lease expire now (a clean shutdown), so a follower takes over without waiting."""
        await self.db.run(self.db.tx, lambda cur: cur.execute(
            self.db.q("UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? AND token = ?"), (ENGINE, holder, token)))

    async def lease(self) -> LeaseRow | None:
        rows = await self.db.run(self.db.query, "SELECT holder, token, expires_at, address FROM leases WHERE name = ?", (ENGINE,))
        return LeaseRow(rows[0][0], int(rows[0][1]), float(rows[0][2]), rows[0][3]) if rows else None

    def set_fence(self, holder: str | None, token: int = 0) -> None:
        """From now on every engine write checks, in its own transaction, that this token still holds the lease."""
        self.db.set_fence(holder, token)


class Commands(Part):
    """Actions forwarded from followers to the leader (alertd/ha/commands.py)."""

    async def submit_command(self, kind: str, incident_id: str, args: JSONObject) -> int:
        def do(cur: Any) -> int:
            cur.execute(self.db.q("INSERT INTO commands (kind, incident_id, args, created_at) VALUES (?, ?, ?, ?) RETURNING id"),
                        (kind, incident_id, json.dumps(args, default=str), iso(datetime.now(timezone.utc))))
            return int(cur.fetchone()[0])
        command_id: int = await self.db.run(self.db.tx, do)
        return command_id

    async def command_result(self, command_id: int) -> tuple[str, str]:
        rows = await self.db.run(self.db.query, "SELECT state, result FROM commands WHERE id = ?", (command_id,))
        return (rows[0][0], rows[0][1]) if rows else ("missing", "")

    async def pending_commands(self, limit: int = 50) -> list[tuple[int, str, str, JSONObject]]:
        rows = await self.db.run(self.db.query, "SELECT id, kind, incident_id, args FROM commands WHERE state = 'pending' "
                                            "ORDER BY id LIMIT ?", (limit,))
        return [(r[0], r[1], r[2], obj(json.loads(r[3]), "a command's args")) for r in rows]

    async def finish_command(self, command_id: int, result: str) -> None:
        await self.db.run(self.db.ftx, lambda cur: cur.execute(
            self.db.q("UPDATE commands SET state = 'done', result = ? WHERE id = ?"), (result, command_id)))



class SharedMeta(Part):
    """Settings every process shares, chosen once (the installation id)."""

    async def meta_setdefault(self, key: str, value: str) -> str:
        """The stored value of ``key``, storing ``value`` first if there is none (first start wins)."""
        def do(cur: Any) -> str:
            cur.execute(self.db.q("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"), (key, value))
            cur.execute(self.db.q("SELECT value FROM meta WHERE key = ?"), (key,))
            return str(cur.fetchone()[0])
        stored: str = await self.db.run(self.db.tx, do)
        return stored
