"""Rule-file sections declared once (alertd/rules/declared.py): their schema files are generated from the
declarations, the defaults the descriptions state are the declared ones, and docs/rules.md names exactly
the declared keys."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from alertd.config import schemafiles
from alertd.integrations import registry
from alertd.core.json_types import JSONValue
from alertd.rules.rule_schemas import RULE_FILES, RuleFile

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
# A receiver's integration sections: each integration adds its own to the schema (registry.extend_schema)
INTEGRATIONS_OWN = tuple(f"routing.receivers.{kind}" for kind in registry.INTEGRATIONS)
TABLE = re.compile(r"<!-- BEGIN schemadoc (?P<name>[a-z-]+) -->.*?<!-- END schemadoc (?P=name) -->", re.S)


def test_the_rule_schema_files_are_what_the_declarations_generate():
    stale = [name for name in schemafiles.stale() if name.removesuffix(".schema.json") in RULE_FILES]
    assert stale == [], "run: python -m alertd.config.schemafiles"


@pytest.mark.parametrize("name", sorted(RULE_FILES))
def test_a_stale_rule_schema_file_is_found(tmp_path, name):
    for file, text in schemafiles.generated().items():
        (tmp_path / file).write_text(text)
    assert schemafiles.stale(tmp_path) == []
    path = tmp_path / f"{name}.schema.json"
    path.write_text(path.read_text().replace('"additionalProperties": false', '"additionalProperties": true', 1))
    assert schemafiles.stale(tmp_path) == [f"{name}.schema.json"]


# -- the defaults a description states ("Default 5m.") are the declared ones

def _stated(node: JSONValue, path: str = "") -> Iterator[tuple[str, str, JSONValue]]:
    if isinstance(node, dict):
        said = re.search(r"\b[Dd]efault ([^\s;,():]+?)\.?(?=[\s;,():]|$)", str(node.get("description", "")))
        if said and "default" in node and not isinstance(node["default"], (list, dict)):
            yield path, said.group(1), node["default"]
        for key, sub in node.items():
            yield from _stated(sub, f"{path}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _stated(sub, f"{path}/{i}")


@pytest.mark.parametrize("name", sorted(RULE_FILES))
def test_the_defaults_the_descriptions_state_are_the_declared_ones(name):
    schema = json.loads(schemafiles.generated()[f"{name}.schema.json"])
    stated = list(_stated(schema))
    assert stated, "no description states a default: the test would pass on anything"
    wrong = [f"{path}: says {said}, declares {default!r}" for path, said, default in stated
             if said != ("none" if default == "" else json.dumps(default).strip('"'))]
    assert wrong == []


def test_a_description_stating_another_default_is_found():
    schema = {"properties": {"hold_down": {"description": "Stays open. Default 5m.", "default": "10m"}}}
    assert [(p, s, d) for p, s, d in _stated(schema)] == [("/properties/hold_down", "5m", "10m")]


# -- docs/rules.md names every declared key, and no key that is gone

def _yaml_keys(doc: object, prefix: str) -> set[str]:
    out: set[str] = set()
    for item in doc if isinstance(doc, list) else [doc]:
        if isinstance(item, dict):
            for key, value in item.items():
                out |= {f"{prefix}.{key}"} | _yaml_keys(value, f"{prefix}.{key}")
    return out


def named_keys(text: str, section: str) -> set[str]:
    """The keys of a section a text names: `section.key` in backticks (tables write list items as ``key[].key``),
    and the keys of its YAML examples under the section."""
    named = {m.replace("[]", "") for m in re.findall(rf"`({section}(?:\.[a-z_]+|\[\])+)", text)}
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        try:
            doc = yaml.safe_load(block)
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get(section), (dict, list)):
            named |= _yaml_keys(doc[section], section)
    return named


def disagreements(text: str, rule_file: RuleFile) -> list[str]:
    """Declared keys the text never names, and keys its prose or examples name that are not declared (the
    generated tables aside: they are the declaration's, tests/unit/test_docs_rules.py keeps them current)."""
    declared = set(rule_file.keys())
    leaves = {k for k in declared if not any(d.startswith(k + ".") for d in declared)}
    section = rule_file.key
    prose = TABLE.sub("", text)

    def named(text: str) -> set[str]:  # a free-form mapping's own keys (handoff labels) are no keys of the section
        return {k for k in named_keys(text, section) if not any(k.startswith(leaf + ".") for leaf in leaves)
                and not k.startswith(INTEGRATIONS_OWN)}

    return ([f"docs/rules.md does not name {k}" for k in sorted(declared - named(text))]
            + [f"docs/rules.md names {k}, which is not declared" for k in sorted(named(prose) - declared)])


@pytest.mark.parametrize("name", sorted(RULE_FILES))
def test_the_docs_name_every_declared_key_and_no_other(name):
    assert disagreements(DOC.read_text(encoding="utf-8"), RULE_FILES[name]) == []


def test_an_undocumented_or_gone_key_is_found():
    text = DOC.read_text(encoding="utf-8")
    correlation = RULE_FILES["correlation"]
    dropped = re.sub(r"^.*`correlation\.storm\.page_updates`.*\n", "", TABLE.sub("", text), flags=re.M)
    assert "docs/rules.md does not name correlation.storm.page_updates" in disagreements(dropped, correlation)
    gone = text + "\nSet `correlation.storm.wait` to hold longer.\n"
    assert disagreements(gone, correlation) == ["docs/rules.md names correlation.storm.wait, which is not declared"]
    example = text + "\n```yaml\ncorrelation:\n  storm:\n    events:\n      - name: x\n        by: [cluster]\n        keyed: [x]\n```\n"
    assert disagreements(example, correlation) == [
        "docs/rules.md names correlation.storm.events.keyed, which is not declared"]
