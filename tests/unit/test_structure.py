"""The package's shape: no import cycles between alertd's modules, no module over 500 lines.

Every import counts, also those inside functions: a deferred import hides a cycle, it does not remove it.
"""
from __future__ import annotations

from tests.support.import_graph import PACKAGE, cycles, import_graph, module_name

MAX_LINES = 500


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_in_alertd():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_module_over_500_lines():
    long = {module_name(p): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long
