"""Store fixtures: one fresh store per test on SQLite AND on the session's real PostgreSQL.

A new SQLite file, or a new PostgreSQL schema in the session database (``search_path`` set through
the DSN). Import the fixtures into a test module: ``from tests.support.stores import make_store, store``.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable
from urllib.parse import quote

import pytest

from alertd.store.base import Store
from alertd.store.sqlite import SqliteStore


async def pending(store: Store, limit: int) -> list[tuple[int, dict[str, Any] | None]]:
    """The pending rows as (seq, wire form); None for an alert whose webhook body is stored."""
    return [(row.seq, row.alert) for row in (await store.pending_inbox(limit)).rows]


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request, tmp_path) -> Callable[[], Store]:
    """A factory: every call is a new store object on the SAME database (to test reopening)."""
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "alertd.sqlite3")
        return
    import psycopg

    from alertd.store.postgres import PostgresStore

    pg = request.getfixturevalue("postgres")
    schema = f"contract_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = f"{pg.dsn}?options={quote(f'-csearch_path={schema}')}&connect_timeout=10"
    yield lambda: PostgresStore(dsn)
    with psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
async def store(make_store) -> Store:
    s = make_store()
    await s.open()
    yield s
    await s.close()
