"""The layers of alertd/, checked: which package may import which, and no import cycles.

Every import counts, including the ones inside functions and under ``TYPE_CHECKING``
(tests/support/import_graph.py); module cycles are checked by test_structure.py.
"""
from __future__ import annotations

import pytest

from tests.support.import_graph import PACKAGE, cycles, import_graph


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
    "report": {"core", "rules", "store"},  # the reliability report: incident facts and fleet samples -> figures
    "alertmanager": {"core", "receive"},
    "ha": {"core"},
    # signals besides the webhook: Kubernetes' health conditions and Events, watched (alertd/sources/)
    "sources": {"core", "receive", "rules"},
    # every section parsed once, into the settings types their users define (alertmanager/, enrich/, report/)
    "config": {"alertmanager", "core", "engine", "enrich", "integrations", "receive", "report", "rules", "schemas",
               "sources"},
    # proposals, guards, blast radius (pure) and the Kubernetes writes (remediation/kube.py, through enrich's reads)
    "remediation": {"core", "engine", "enrich", "gpu", "rules"},
}
_BELOW_APP = set(LAYERS)
LAYERS["app"] = _BELOW_APP - {"app"}
LAYERS["web"] = LAYERS["app"] | {"app"}
LAYERS["authoring"] = LAYERS["web"] - {"web"}
LAYERS["cli"] = LAYERS["web"] | {"web", "authoring"}


GRAPH = import_graph()
MODULES = set(GRAPH)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer() -> None:
    packages = {_package(m) for m in MODULES} - {""}
    assert packages <= set(LAYERS), f"packages without a layer: {sorted(packages - set(LAYERS))}"
    loose = sorted(m for m in MODULES if m.count(".") == 1 and (PACKAGE / f"{m.split('.')[1]}.py").exists())
    assert not loose, f"modules at the top of alertd/ (put them in a layer): {loose}"


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    wrong = sorted(
        f"{src} imports {dst}"
        for src, dsts in GRAPH.items() if _package(src) == package
        for dst in dsts if _package(dst) not in LAYERS[package] | {package, ""}
    )
    assert not wrong, "\n".join(wrong)


def test_no_package_cycle() -> None:
    packages: dict[str, set[str]] = {}
    for src, dsts in GRAPH.items():
        packages.setdefault(_package(src), set()).update(_package(d) for d in dsts if _package(d) != _package(src))
    packages.pop("", None)
    for dsts in packages.values():
        dsts.discard("")
    assert cycles(packages) == []

