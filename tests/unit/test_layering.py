"""The layers of alertd/, checked: which package may import which, and no import cycles.

Every import counts, including the ones inside functions (a cycle hidden in a
function is still a cycle). ``TYPE_CHECKING`` imports count too: a layer's types
are part of its dependencies.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "alertd"

# Lowest first. A package may import its own layer's lower neighbours listed here and nothing above it.
LAYERS: dict[str, set[str]] = {
    "core": set(),  # contracts: the model, errors, durations, matchers, outbox items, metrics
    "integrations": {"core"},  # Slack, PagerDuty, ...: render and send, nothing else of alertd
    "schemas": {"core", "integrations"},  # JSON Schemas, extended by the integrations' fragments
    "promql": {"core"},  # what an alert's own expression and the recording rules say
    "receive": {"core", "schemas"},  # Alertmanager's webhook: bytes in, alerts out
    "gpu": {"core", "promql", "schemas"},  # the Xid catalog, clock reasons, kernel log lines, PCI ids
    "rules": {"core", "gpu", "integrations", "promql", "schemas"},  # rule files -> one RuleSet
    "engine": {"core", "gpu", "promql", "rules"},  # pure: alerts and a clock in, changes out
    "store": {"core", "engine", "gpu", "receive", "rules"},
    "enrich": {"core", "engine", "gpu"},
    "notify": {"core", "integrations", "rules", "store"},
    "alertmanager": {"core", "receive"},
    "ha": {"core"},
    "config": {"alertmanager", "core", "engine", "integrations", "rules", "schemas"},
    "report": {"core", "rules", "store"},  # the reliability report: incident facts and fleet samples -> figures
    # proposals, guards, blast radius (pure) and the Kubernetes writes (remediation/kube.py, through enrich's reads)
    "remediation": {"core", "engine", "enrich", "gpu", "rules"},
}
_BELOW_APP = set(LAYERS)
LAYERS["app"] = _BELOW_APP - {"app"}
LAYERS["web"] = LAYERS["app"] | {"app"}
LAYERS["authoring"] = LAYERS["web"] - {"web"}
LAYERS["cli"] = LAYERS["web"] | {"web", "authoring"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name: str, path: Path) -> set[str]:
    """The alertd modules one module imports (``from pkg import mod`` names the module itself)."""
    out: set[str] = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("alertd"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if not base.startswith("alertd"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in MODULES else base)
    out.discard(name)
    return {m for m in out if m in MODULES}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer() -> None:
    packages = {_package(m) for m in MODULES} - {""}
    assert packages <= set(LAYERS), f"packages without a layer: {sorted(packages - set(LAYERS))}"
    loose = sorted(m for m in MODULES if m.count(".") == 1 and (ROOT / f"{m.split('.')[1]}.py").exists())
    assert not loose, f"modules at the top of alertd/ (put them in a layer): {loose}"


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    wrong = sorted(
        f"{src} imports {dst}"
        for src, dsts in GRAPH.items() if _package(src) == package
        for dst in dsts if _package(dst) not in LAYERS[package] | {package, ""}
    )
    assert not wrong, "\n".join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_round_a_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_no_package_cycle() -> None:
    packages: dict[str, set[str]] = {}
    for src, dsts in GRAPH.items():
        packages.setdefault(_package(src), set()).update(_package(d) for d in dsts if _package(d) != _package(src))
    packages.pop("", None)
    for dsts in packages.values():
        dsts.discard("")
    assert _cycles(packages) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
