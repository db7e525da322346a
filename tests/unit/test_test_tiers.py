"""The test suite's own rules: tiers are marked from directory and fixtures (tests/conftest.py), and only
testkit/browser.py imports selenium, so collection works on a machine without it."""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from tests.conftest import tier_markers, worker_group
from tests.support.xdist_groups import RunAll

TESTS = Path(__file__).resolve().parents[1]


def test_tiers_come_from_the_directory_and_what_a_test_uses():
    assert tier_markers("unit", {"tmp_path"}, set()) == ["unit"]
    assert tier_markers("integration", {"tmp_path", "postgres"}, set()) == ["integration", "postgres", "services"]
    assert tier_markers("integration", {"make_store"}, {"postgres"}) == ["integration", "postgres", "services"]
    assert tier_markers("integration", {"make_store"}, {"sqlite"}) == ["integration"]
    assert tier_markers("integration", {"kube_apiserver"}, set()) == ["integration", "services"]
    assert tier_markers("sim", {"browser"}, set()) == ["integration", "browser"]
    assert tier_markers("e2e", set(), set()) == ["e2e", "services"]


def test_tests_sharing_a_costly_service_or_module_fixture_share_a_worker():
    mod = "tests/integration/test_x.py"
    assert worker_group("integration", {"opensearch"}, set(), mod, False) == "search"
    assert worker_group("integration", {"opensearch", "elasticsearch", "postgres"}, set(), mod, True) == "search"
    assert worker_group("integration", {"searcher"}, {"elasticsearch"}, mod, True) == "search"
    assert worker_group("e2e", {"kube_apiserver", "postgres"}, set(), mod, False) == "kube"
    assert worker_group("integration", {"server"}, set(), mod, True) == mod
    assert worker_group("integration", {"postgres"}, {"postgres"}, mod, False) is None
    assert worker_group("unit", {"backend"}, {"opensearch"}, mod, False) is None  # only a name in a unit test


def test_only_the_browser_support_module_imports_selenium():
    found = []
    for path in TESTS.rglob("*.py"):
        if path == TESTS / "support" / "browser.py":
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(TESTS)}: {n}" for n in names if n.split(".")[0] == "selenium"]
    assert found == [], "import selenium's names from testkit.browser (None without selenium)"


def test_a_parallel_run_that_dropped_tests_names_them():
    """The controller's count: collected node ids (one id may name several items) against teardowns seen."""
    run_all = RunAll()
    assert not run_all.missing()  # nothing collected yet (not a parallel run): nothing to say
    run_all.collected = Counter({"t.py::a": 1, "t.py::fuzz": 3})
    run_all.finished.update(["t.py::a", "t.py::fuzz"])
    assert run_all.missing() == Counter({"t.py::fuzz": 2})
    run_all.finished.update(["t.py::fuzz", "t.py::fuzz"])
    assert not run_all.missing()
