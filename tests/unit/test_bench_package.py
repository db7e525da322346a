"""bench/ is a package run with ``python -m bench.<name>`` from the repository root: no script edits
``sys.path`` to find alertd or its neighbours, and its modules import each other without a cycle (a deferred
import hides one, it does not remove it)."""
from __future__ import annotations

import ast

from tests.support.import_graph import ROOT, cycles, import_graph

BENCH = ROOT / "bench"


def test_no_import_cycles_in_bench():
    found = cycles(import_graph(BENCH))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_graph_sees_bench_modules():
    graph = import_graph(BENCH)
    assert "bench.fleetsim.faults" in graph and "bench.fleetsim.builder" in graph["bench.fleetsim.faults"]


def _edits_sys_path(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
                and node.value.id == "sys":
            return True
    return False


def test_no_bench_module_touches_sys_path():
    touching = sorted(str(p.relative_to(ROOT)) for p in BENCH.rglob("*.py")
                      if _edits_sys_path(ast.parse(p.read_text(encoding="utf-8"))))
    assert touching == [], f"run these with python -m bench.<name> instead: {touching}"


def test_no_test_or_testkit_module_touches_sys_path():
    """pytest puts the repository on the path (pyproject.toml: pythonpath); a test that does it again hides a
    run from elsewhere that would not find testkit."""
    modules = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "testkit").rglob("*.py")]
    touching = sorted(str(p.relative_to(ROOT)) for p in modules
                      if _edits_sys_path(ast.parse(p.read_text(encoding="utf-8"))))
    assert touching == [], f"rely on pytest's pythonpath instead: {touching}"


def test_a_sys_path_edit_is_found():
    assert _edits_sys_path(ast.parse("import sys\nsys.path.insert(0, '.')\n"))
    assert not _edits_sys_path(ast.parse("import os\nos.path.join('a')\n"))


def _top_imports(path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_bench_and_testkit_never_import_the_tests():
    """What the suite and the bench share lives in testkit/: bench imports alertd, bench and testkit, and
    testkit imports alertd and itself, never the test modules."""
    offending = sorted(str(p.relative_to(ROOT)) for d in (BENCH, ROOT / "testkit") for p in d.rglob("*.py")
                       if "tests" in _top_imports(p))
    assert offending == [], offending
