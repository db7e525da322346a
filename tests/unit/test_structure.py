"""The package's shape: no import cycles; modules sized by concept, a concept's package entered by its __init__.

Every import counts, also those inside functions: a deferred import hides a cycle, it does not remove it.
A module holds one concept and is split when a second one appears, not at a line count; a concept too large
for one module becomes a package with one entry point (alertd/engine/storm/). Past 500 lines the suite says so
as a warning (a place to look for a second concept), past 800 it fails.
"""
from __future__ import annotations

import warnings

from tests.support.import_graph import PACKAGE, cycles, import_graph, module_name

LOOK_AT_LINES = 500
MAX_LINES = 800
# Packages that hold one concept over several modules: the rest of alertd imports the package, never its parts.
ENTERED_BY_INIT = ("alertd.engine.storm",)


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


def _parts_imported(graph: dict[str, set[str]], packages: tuple[str, ...]) -> list[str]:
    """Imports of a package's own modules from outside the package."""
    return sorted(f"{src} imports {dst}" for src, dsts in graph.items() for dst in dsts for pkg in packages
                  if dst.startswith(pkg + ".") and not (src == pkg or src.startswith(pkg + ".")))


def test_the_part_finder_finds_a_part_imported_from_outside():
    graph = {"p": {"p.a"}, "p.a": {"p.b"}, "q": {"p"}, "r": {"p.b"}}
    assert _parts_imported(graph, ("p",)) == ["r imports p.b"]


def test_a_concept_package_is_entered_through_its_init():
    wrong = _parts_imported(import_graph(), ENTERED_BY_INIT)
    assert not wrong, "\n".join(wrong)
