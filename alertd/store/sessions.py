"""Browser sessions kept in the store, so a login and a logout count in every process at once.

The web UI's login (alertd/web/access.py) hands the browser a random session id; the
store keeps only a hash of it (a copy of this table opens no session) with the name
of the token that logged in and a slow fingerprint of that token. The table is what
makes sessions revocable: logout deletes the row, and a session whose token is no
longer configured (a rotation) is refused by the web layer, which compares
fingerprints. Every receiver process and every replica on PostgreSQL reads the
same rows (docs/security.md, "Sessions").
"""
from __future__ import annotations

from typing import Any
from alertd.store.database import Part

MIGRATION = [
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        token TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX sessions_expiry ON sessions (expires_at)",
]


class Sessions(Part):
    """Browser sessions (a part of the store). Times are seconds since the epoch."""

    async def create_session(self, key: str, name: str, token: str, now: float, expires_at: float) -> None:
        """Store a new session (``key``: the hash of its id); sessions expired by ``now`` are deleted on the way."""
        def do(cur: Any) -> None:
            cur.execute(self.db.q("DELETE FROM sessions WHERE expires_at <= ?"), (now,))
            cur.execute(self.db.q("INSERT INTO sessions (id, name, token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)"),
                        (key, name, token, now, expires_at))
        await self.db.run(self.db.tx, do)

    async def find_session(self, key: str, now: float) -> tuple[str, str] | None:
        """(name, token fingerprint) of a session that has not expired by ``now``, or None."""
        rows = await self.db.run(self.db.query, "SELECT name, token FROM sessions WHERE id = ? AND expires_at > ?",
                               (key, now))
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    async def end_session(self, key: str) -> bool:
        """Delete a session (logout); False when there was none."""
        def do(cur: Any) -> bool:
            cur.execute(self.db.q("DELETE FROM sessions WHERE id = ?"), (key,))
            return bool(cur.rowcount)
        ended: bool = await self.db.run(self.db.tx, do)
        return ended
