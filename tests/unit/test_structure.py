"""The package's shape: no import cycles between alertd's modules; modules sized by concept.

Every import counts, also those inside functions: a deferred import hides a cycle, it does not remove it.
A module holds one concept and is split when a second one appears, not at a line count: past 500 lines the
suite says so as a warning (a place to look), past 800 it fails.
"""
from __future__ import annotations

import warnings

from tests.support.import_graph import PACKAGE, cycles, import_graph, module_name

LOOK_AT_LINES = 500
MAX_LINES = 800


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_in_alertd():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def _modules_over(lines: int) -> dict[str, int]:
    return {module_name(p): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > lines}


def test_no_module_over_800_lines():
    long = _modules_over(MAX_LINES)
    assert not long, long
    if large := _modules_over(LOOK_AT_LINES):
        warnings.warn(f"modules over {LOOK_AT_LINES} lines (does one hold two concepts?): {large}", stacklevel=1)
