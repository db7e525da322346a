"""Housekeeping asks the store its size only where no scrape measures it (PostgreSQL: pg_database_size)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from alertd.app.housekeeping import Housekeeping
from alertd.config.settings import Config
from alertd.core.service_metrics import Metrics

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


class Store:
    def __init__(self, size: int | None):
        self.size, self.asked = size, 0

    async def prune(self, before: datetime, *, resolved_before: datetime | None = None) -> int:
        return 0

    async def stats(self) -> dict[str, int]:
        return {"outbox_pending": 3}

    async def size_bytes(self) -> int | None:
        self.asked += 1
        return self.size


def failed(what: str, exc: Exception) -> None:
    raise AssertionError(f"{what}: {exc}")


@pytest.mark.parametrize(("measured_at_scrape", "asked", "gauge"), [(False, 1, 4096.0), (True, 0, 0.0)])
async def test_the_store_size_is_asked_only_where_no_scrape_measures_it(measured_at_scrape, asked, gauge):
    store, metrics = Store(4096), Metrics()
    keeping = Housekeeping(Config(), store, clock=lambda: NOW, metrics=metrics, failed=failed,
                           measured_at_scrape=measured_at_scrape)
    await keeping.round(prune=True)
    assert store.asked == asked
    assert metrics.registry.get_sample_value("alertd_store_bytes") == gauge
    assert metrics.registry.get_sample_value("alertd_outbox_pending") == 3.0


async def test_a_store_that_cannot_tell_its_size_leaves_the_gauge():
    store, metrics = Store(None), Metrics()
    await Housekeeping(Config(), store, clock=lambda: NOW, metrics=metrics, failed=failed,
                       measured_at_scrape=False).round(prune=False)
    assert store.asked == 1 and metrics.registry.get_sample_value("alertd_store_bytes") == 0.0
