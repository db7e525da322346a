"""alertd's import graph, read from the source: every import counts, also those inside functions (a deferred
import hides a cycle, it does not remove it). Used by the structure and layering tests, for alertd/ and for bench/."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "alertd"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """alertd modules imported by ``path`` (``from pkg import name`` counts as pkg.name when that is a module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    out = set()
    for target in found:
        while target and target not in modules:  # alertd.x.y.z -> the module that exists
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)
    return out


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """The graph of ``package``'s modules (alertd/ by default; bench/ too), edges to its own modules only."""
    paths = {module_name(p): p for p in package.rglob("*.py")}
    modules = set(paths)
    graph = {name: imports_of(path, modules) for name, path in paths.items()}
    # Importing a.b.c runs a/__init__ and a/b/__init__ too, but those edges are the package's own business:
    # a cycle through a package's __init__ shows up as an edge into it.
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out
