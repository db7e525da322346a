"""A new store says it was created in one line, not one line per migration (sixteen at the first start)."""
from __future__ import annotations

import logging

from alertd.store import open_store
from alertd.store import sql


async def test_migrations_are_summarised_in_one_line(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="alertd.store")
    store = open_store("sqlite", data_dir=tmp_path)
    await store.open()
    await store.close()
    lines = [r.getMessage() for r in caplog.records if "schema" in r.getMessage()]
    assert lines == [f"store schema created at version {len(sql.MIGRATIONS)}"]
    caplog.clear()
    store = open_store("sqlite", data_dir=tmp_path)  # up to date: nothing to say
    await store.open()
    await store.close()
    assert not [r for r in caplog.records if "schema" in r.getMessage()]
