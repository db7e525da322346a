"""Each closed set of words with a meaning (signal kinds, categories, severities, remediation states, ...) is
declared once: no module but the declaring one writes two or more of a concept's words as a literal set,
tuple, list, dict's keys or ``Literal[...]``, and every enum of a shipped JSON Schema is either one of the
declared sets or, allow-listed here with its reason, words of something else (another system's)."""
from __future__ import annotations

import ast
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest

from alertd.config import schemafiles
from alertd.core import states, vocabulary as v
from alertd.core.incident_filters import SORTS
from alertd.store.history import Facet
from alertd.core.instants import WEEKDAYS
from alertd.core.model import FIRING, Alert
from alertd.integrations.registry import INTEGRATIONS
from alertd.report.shapes import FactKind
from tests.unit.test_vocabulary import _enums

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "alertd"
VOCABULARY, STATES = "alertd/core/vocabulary.py", "alertd/core/states.py"

# Each concept: the module that declares it, and its words
CONCEPTS: Mapping[str, tuple[str, frozenset[str]]] = {
    "signal kind": (VOCABULARY, frozenset(v.SignalKind)),
    "detail": (VOCABULARY, frozenset(v.Detail)),
    "category": (VOCABULARY, frozenset(v.Category)),
    "event kind": (VOCABULARY, frozenset(v.EventKind)),
    "GPU action": (VOCABULARY, frozenset(v.GpuAction)),
    "remediation action": (VOCABULARY, frozenset(v.RemediationAction)),
    "remediation kind": (VOCABULARY, frozenset(v.RemediationKind)),
    "remediation state": (VOCABULARY, frozenset(v.RemediationState)),
    "remediation step": (VOCABULARY, frozenset(v.RemediationStep)),
    "verdict kind": (VOCABULARY, frozenset(v.VerdictKind)),
    "correlation group": (VOCABULARY, frozenset(v.Group)),
    "history scope": (VOCABULARY, frozenset(v.HistoryScope)),
    "node label": (VOCABULARY, frozenset(v.NODE_LABELS)),
    "Xid label": (VOCABULARY, frozenset(v.XID_LABELS)),
    "severity": (STATES, frozenset(states.Severity)),
    "alert status": (STATES, frozenset(states.AlertStatus)),
    "incident status": (STATES, frozenset(states.IncidentStatus)),
    "report fact kind": ("alertd/report/shapes.py", frozenset(FactKind)),
    "process role": (VOCABULARY, frozenset(v.PROCESS_ROLES)),
    "weekday": ("alertd/core/instants.py", frozenset(WEEKDAYS)),
    "list order": ("alertd/core/incident_filters.py", frozenset(SORTS)),
    "integration": ("alertd/integrations/registry.py", frozenset(INTEGRATIONS)),
    "incident facet": ("alertd/store/history.py", frozenset(Facet)),
}

# Literals in alertd/ whose words are a concept's by accident, each with what they really are:
# (module, the words) -> why
ALLOWED_LITERALS: Mapping[tuple[str, frozenset[str]], str] = {
    ("alertd/web/api.py", frozenset({"node", "gpu"})): "the query parameters /api/gpus takes",
    ("alertd/integrations/presentation.py", frozenset({"pagerduty", "opsgenie"})):
        "a paging receipt's words by its integration (the registry imports this module: it cannot ask it)",
}

# What each concept's schema enums may list: the declared sets (any other subset is a second declaration)
SCHEMA_SETS: Mapping[str, tuple[frozenset[str], ...]] = {
    "signal kind": (v.RULED_KINDS, v.EVIDENCE_KINDS, v.HISTORY_KINDS, v.REMEDIATION_KINDS, v.SUSPECT_CHOICES),
    "detail": (v.MISSING_DETAILS, v.EVIDENCE_MISSING_DETAILS),
    "category": (v.RULED_CATEGORIES,),
    "GPU action": (frozenset(v.LADDER), v.CATALOG_ACTIONS, v.DRAINED_ACTIONS, v.NOT_HARDWARE_ACTIONS,
                   v.RECOVERY_ACTIONS, v.SXID_ACTIONS, frozenset({"", *v.LADDER})),
    "remediation action": (v.STEP_ACTIONS, frozenset(v.REMEDIATION_ACTIONS)),
    "verdict kind": (frozenset(v.VerdictKind),),
    "history scope": (frozenset(v.HistoryScope),),
    "severity": (frozenset(states.SEVERITIES), frozenset(states.RAISED_SEVERITIES)),
    "alert status": (frozenset(states.AlertStatus),),
    "incident status": (frozenset(states.IncidentStatus),),
    "weekday": (frozenset(WEEKDAYS),),
}
# Schemas generated from alertd.yml's sections (alertd/config/schemafiles.py): an option's words of no concept
# are declared by its Section's Literal type, which the literal check above sees.
GENERATED = frozenset({"config", *schemafiles.OWN_FILES})
# Schema enums of words no concept holds: (schema, the words) -> what they are and where they are declared.
# A health CloudEvent's kind mixes kinds and details: tests/unit/test_vocabulary.py checks it.
ALLOWED_ENUMS: Mapping[tuple[str, frozenset[str]], str] = {
    ("cloudevent-gpu-health", v.HEALTH_EVENT_KINDS): "v.HEALTH_EVENT_KINDS, checked by test_vocabulary.py",
    ("enrich", frozenset({"elasticsearch", "opensearch", "graylog"})): "the log backends of alertd/enrich/backends.py",
    ("enrich", frozenset({"messages", "universal"})): "Graylog's two search APIs (alertd/enrich/graylog.py)",
    ("kube-health", frozenset({"True", "False", "Unknown"})): "Kubernetes' NodeCondition status values",
    ("remediation", frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})): "Kubernetes' taint effects",
    ("remediation", frozenset({"required", "automatic"})): "a policy's approval: rules/remediation.py",
    ("routing", frozenset({"mute", "downgrade", "notify"})): "what routing does of a cordoned node's incident: "
                                                           "rules/windows.py CordonPolicy",
    ("ruletest", frozenset({"acknowledge", "resolve"})): "a rule test's actions (alertd/schemas/ruletest.py)",
}


def concepts_of(words: frozenset[str]) -> list[str]:
    """The concepts holding every one of ``words`` (two or more, "" aside: the empty choice is no word)."""
    words = words - {""}
    if len(words) < 2:
        return []
    return [name for name, (_, known) in CONCEPTS.items() if words <= known]


def _strings(nodes: list[ast.expr | None]) -> frozenset[str] | None:
    if not all(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in nodes):
        return None
    return frozenset(n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _literals(tree: ast.AST) -> Iterator[tuple[int, frozenset[str]]]:
    """Each literal set, tuple, list, dict (its keys) and ``Literal[...]`` made of strings only."""
    inside: set[int] = set()  # the tuple of a Literal[...]: counted with it
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            continue
        elts: list[ast.expr | None] | None = None
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            elts = list(node.elts)
        elif isinstance(node, ast.Dict):
            elts = list(node.keys)
        elif isinstance(node, ast.Subscript) and (getattr(node.value, "id", "") == "Literal"
                                                   or getattr(node.value, "attr", "") == "Literal"):
            elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
            inside.add(id(node.slice))
        words = _strings(elts) if elts else None
        if words is not None:
            yield getattr(node, "lineno", 0), words


def redeclared(source: str, module: str) -> list[str]:
    """Where ``source`` (the text of ``module``, e.g. "alertd/web/api.py") writes a concept's words again."""
    out = []
    for line, words in _literals(ast.parse(source)):
        held = [c for c in concepts_of(words) if CONCEPTS[c][0] != module]
        if held and (module, words - {""}) not in ALLOWED_LITERALS:
            out.append(f"{module}:{line}: {sorted(words - {''})}: words of {' or '.join(held)}, "
                       f"declared in {CONCEPTS[held[0]][0]}")
    return out


def test_no_module_writes_a_concepts_words_again() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        found += redeclared(path.read_text(encoding="utf-8"), module)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("snippet", [
    'LOUD = ("critical", "error")',
    'WAITING = {"proposed", "held"}',
    'ICON = {"xid": ":boom:", "thermal": ":fire:"}',
    'def f(kind: Literal["quarantine", "uncordon"]) -> None: ...',
    'STEPS = ["", "cordon", "drain"]',
])
def test_a_concepts_words_written_again_are_found(snippet: str) -> None:
    assert len(redeclared(snippet, "alertd/web/example.py")) == 1
    assert redeclared('SKIPPED = ("critical", "other")', "alertd/web/example.py") == []  # no one concept's
    home = CONCEPTS[concepts_of(frozenset({"critical", "error"}))[0]][0]
    assert redeclared('LOUD = ("critical", "error")', home) == []


def test_the_allowed_literals_are_still_written() -> None:
    """An entry whose literal is gone would quietly allow the next one."""
    written = {(p.relative_to(ROOT).as_posix(), words - {""}) for p in PACKAGE.rglob("*.py")
               for _, words in _literals(ast.parse(p.read_text(encoding="utf-8")))}
    assert set(ALLOWED_LITERALS) <= written, sorted(set(ALLOWED_LITERALS) - written)


def schema_enums() -> Iterator[tuple[str, list[Any]]]:
    for f in sorted((PACKAGE / "schemas").glob("*.schema.json")):
        for _, values in _enums(json.loads(f.read_text(encoding="utf-8"))):
            if len([x for x in values if x != ""]) >= 2 and all(isinstance(x, str) for x in values):
                yield f.name.removesuffix(".schema.json"), values


def enum_problem(schema: str, values: list[str]) -> str:
    """What is wrong with one enum of a schema: "" when it lists a declared set or is allowed."""
    words = frozenset(values)
    if len(words) != len(values):
        return f"{schema}.schema.json lists a word twice: {values}"
    if (schema, words) in ALLOWED_ENUMS:
        return ""
    if schema in GENERATED and not concepts_of(words):
        return ""
    held = concepts_of(words)
    for concept in held:
        if words in SCHEMA_SETS.get(concept, ()) or words - {""} in SCHEMA_SETS.get(concept, ()):
            return ""
    if held:
        home = CONCEPTS[held[0]][0]
        return f"{schema}.schema.json lists {sorted(words)}: words of {held[0]}, but no set {home} declares"
    return f"{schema}.schema.json lists {sorted(words)}, words of no concept: declare them, or allow them here"


def test_every_schema_enum_is_a_declared_set() -> None:
    problems = [p for schema, values in schema_enums() if (p := enum_problem(schema, values))]
    assert not problems, "\n".join(problems)


def test_a_schema_enum_of_other_words_is_found() -> None:
    assert enum_problem("signals", ["critical", "error", "warning", "info"]) == ""
    assert enum_problem("correlation", ["warning", "error", "critical"]) == ""
    assert "no set" in enum_problem("signals", ["critical", "error"])  # a severity subset nobody declared
    assert "no set" in enum_problem("evidence", ["hardware", "memory"])
    assert "twice" in enum_problem("signals", ["info", "info", "error"])
    assert "no concept" in enum_problem("routing", ["mute", "shout"])


def test_the_allowed_enums_are_still_listed() -> None:
    listed = {(schema, frozenset(values)) for schema, values in schema_enums()}
    assert set(ALLOWED_ENUMS) <= listed, sorted(set(ALLOWED_ENUMS) - listed)


def test_the_engines_domain_group_is_its_domain_kind() -> None:
    """A bad failure domain's incident is of group domain and its primary signal of kind domain."""
    assert v.Group.DOMAIN.value == v.SignalKind.DOMAIN.value and v.Category.OTHER.value == v.SignalKind.OTHER.value


def test_the_fields_a_check_knows_are_the_fields_an_alert_and_a_storm_event_have() -> None:
    """`alertd check` warns of a matcher naming a field no alert has: its list is what grouping derives."""
    from alertd.authoring.check import DERIVED_FIELDS
    from alertd.core.model import Incident, OPEN, Severity, Signal
    from alertd.engine.grouping import fields_of
    from alertd.engine.storm.events import EVENT_FIELDS, signal_fields

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert set(fields_of(Alert("f", FIRING, {}, {}, at, None))) == DERIVED_FIELDS
    inc = Incident("i", "k", "node", "t", Severity.WARNING, "hardware", OPEN, at, at)
    assert set(signal_fields(inc, Signal())) | {"alertname"} == EVENT_FIELDS
