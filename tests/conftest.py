"""Session-wide test setup: the real services (PostgreSQL, OpenSearch, Elasticsearch) start once per session,
and every test gets the markers of its tier (``pytest -m "not e2e"``, ``-m unit``, ``-m "not services"``).

Tiers come from where a test lives (tests/unit, tests/integration and tests/sim, tests/e2e) and what it uses:
a session service fixture makes it ``services`` (and ``postgres`` for PostgreSQL, also when a fixture is
parametrized over the backends), the ``browser`` fixture makes it ``browser``. Tests that start Prometheus or
Alertmanager themselves carry ``pytest.mark.services`` in their module. Unit tests get a tighter default
timeout than the ini's, because a unit test that runs for a minute is a hang, not a slow test.

scripts/test.sh runs the suite on pytest-xdist workers with ``--dist loadgroup`` (the scheduler of
tests/support/xdist_groups.py); each worker starts the session services it needs. ``worker_group`` keeps the tests that share something costly on one worker
(``pytest.mark.xdist_group``): the two JVM search servers (``search``) and the kube-apiserver with etcd
(``kube``) then start once in the run instead of once per worker, and a module whose tests share a
module-scoped fixture (an alertd process, a Prometheus, a fresh venv) builds it once. PostgreSQL starts
in a second or two and is left to each worker.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["tests.support.fixtures", "tests.support.xdist_groups"]

TESTS = Path(__file__).parent
TIER_BY_DIRECTORY = {"unit": "unit", "integration": "integration", "sim": "integration", "e2e": "e2e"}
SERVICE_FIXTURES = frozenset({"postgres", "opensearch", "elasticsearch", "kube_apiserver"})
SEARCH_SERVICES = frozenset({"opensearch", "elasticsearch"})
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


def worker_group(directory: str, fixtures: set[str], params: set[object], module: str,
                 module_scoped: bool) -> str | None:
    """The xdist group of one test, or None when any worker may run it.

    A search server is named by a fixture or, for a fixture parametrized over the backends that asks
    for the server at run time, by a parameter (unit tests start no services: their parameters are
    only names)."""
    named = fixtures | (params if directory != "unit" else set())
    if named & SEARCH_SERVICES:
        return "search"
    if "kube_apiserver" in fixtures:
        return "kube"
    return module if module_scoped else None


def _module_scoped(item: pytest.Item) -> bool:
    """Whether the test uses a fixture built once per module (or class, or package) by this suite."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope in ("module", "class", "package") and _ours(d.func) for chain in defs for d in chain)


def _ours(func: object) -> bool:
    code = getattr(func, "__code__", None)
    return code is not None and Path(code.co_filename).is_relative_to(TESTS)


def _directory(item: pytest.Item) -> str:
    try:
        return Path(item.path).relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return ""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.support.xdist_groups import record  # imported here: pytest_plugins imports it first, rewritten

    groups: dict[str, str] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = {v for v in callspec.params.values() if isinstance(v, str)} if callspec else set()
        directory, fixtures = _directory(item), set(getattr(item, "fixturenames", ()))
        names = tier_markers(directory, fixtures, params)
        have = {m.name for m in item.iter_markers()}
        for name in names:
            if name not in have:
                item.add_marker(name)
        if "unit" in names and "timeout" not in have:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S))
        marked = [str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")]
        group = "_".join(sorted(set(marked))) or worker_group(
            directory, fixtures, params, item.nodeid.split("::")[0], _module_scoped(item))
        if group is not None:
            if not marked:
                item.add_marker(pytest.mark.xdist_group(group))
            groups[item.nodeid] = group
    record(config, groups)
