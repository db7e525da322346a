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
