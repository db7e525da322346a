"""Session-wide test setup: the real services (PostgreSQL, OpenSearch, Elasticsearch) start once per session,
and every test gets the markers of its tier (``pytest -m "not e2e"``, ``-m unit``, ``-m "not services"``).

Tiers come from where a test lives (tests/unit, tests/integration and tests/sim, tests/e2e) and what it uses:
a session service fixture makes it ``services`` (and ``postgres`` for PostgreSQL, also when a fixture is
parametrized over the backends), the ``browser`` fixture makes it ``browser``. Tests that start Prometheus or
Alertmanager themselves carry ``pytest.mark.services`` in their module. Unit tests get a tighter default
timeout than the ini's, because a unit test that runs for a minute is a hang, not a slow test.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["tests.support.fixtures"]

TESTS = Path(__file__).parent
TIER_BY_DIRECTORY = {"unit": "unit", "integration": "integration", "sim": "integration", "e2e": "e2e"}
SERVICE_FIXTURES = frozenset({"postgres", "opensearch", "elasticsearch", "kube_apiserver"})
UNIT_TIMEOUT_S = 60


def tier_markers(directory: str, fixtures: set[str], params: set[object]) -> list[str]:
    """The markers of one test: its directory's tier, then what it needs."""
    names = [TIER_BY_DIRECTORY[directory]] if directory in TIER_BY_DIRECTORY else []
    if "postgres" in fixtures or "postgres" in params:
        names += ["postgres", "services"]
    if fixtures & SERVICE_FIXTURES or directory == "e2e":
        names.append("services")
    if "browser" in fixtures:
        names.append("browser")
    return list(dict.fromkeys(names))


def _directory(item: pytest.Item) -> str:
    try:
        return Path(item.path).relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = {v for v in callspec.params.values() if isinstance(v, str)} if callspec else set()
        names = tier_markers(_directory(item), set(getattr(item, "fixturenames", ())), params)
        have = {m.name for m in item.iter_markers()}
        for name in names:
            if name not in have:
                item.add_marker(name)
        if "unit" in names and "timeout" not in have:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S))
