"""Every rule file's schema is declared once (alertd/rules/rule_schemas.py): the schema files are what the
declarations generate, their keys are the declared ones, the defaults the descriptions state are the declared
ones, a decoded section holds the declared defaults, and the docs name exactly the declared keys."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from alertd.config import schemafiles
from alertd.core.json_types import JSONValue
from alertd.integrations import registry
from alertd.rules.evidence import EVIDENCE
from alertd.rules.rule_schemas import RULE_FILES
from alertd.rules.signals import SIGNALS
from alertd.schemas import validator
from alertd.schemas.declared import RuleFile

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(RULE_FILES)
# Where each rule file's keys are documented (docs/rules.md unless named here)
DOCS: dict[str, str] = {"kube-health": "sources.md"}
# A receiver's integration sections: each integration declares its own (registry.receiver_parts)
INTEGRATIONS_OWN = tuple(f"routing.receivers.{kind}" for kind in registry.INTEGRATIONS)
TABLE = re.compile(r"<!-- BEGIN schemadoc (?P<name>[a-z-]+) -->.*?<!-- END schemadoc (?P=name) -->", re.S)
FILE_SUFFIXES = ("yml", "yaml", "md", "json", "py")  # `signals.yml` names a file, not a key


def test_every_rule_file_is_declared():
    assert len(RULE_FILES) == 11 and {f"{name}.schema.json" for name in RULE_FILES} <= set(schemafiles.generated())


def test_the_rule_schema_files_are_what_the_declarations_generate():
    stale = [name for name in schemafiles.stale() if name.removesuffix(".schema.json") in RULE_FILES]
    assert stale == [], "run: python -m alertd.config.schemafiles"


@pytest.mark.parametrize("name", NAMES)
def test_a_stale_rule_schema_file_is_found(tmp_path, name):
    for file, text in schemafiles.generated().items():
        (tmp_path / file).write_text(text)
    assert schemafiles.stale(tmp_path) == []
    path = tmp_path / f"{name}.schema.json"
    path.write_text(path.read_text().replace('"additionalProperties": false', '"additionalProperties": true', 1))
    assert schemafiles.stale(tmp_path) == [f"{name}.schema.json"]


# -- the schema's keys are the declared ones

def schema_keys(node: object, root: dict[str, object], prefix: str = "") -> set[str]:
    """The keys a schema admits, as ``section.key.key`` (a list's items' keys under the list's)."""
    if not isinstance(node, dict):
        return set()
    if "$ref" in node and str(node["$ref"]).startswith("#/$defs/"):
        node = {**root["$defs"][str(node["$ref"]).rsplit("/", 1)[-1]], **node}  # type: ignore[index]
        node.pop("$ref")
    if node.get("type") == "array":
        return schema_keys(node.get("items"), root, prefix)
    out = set()
    for key, sub in (node.get("properties") or {}).items():
        path = f"{prefix}.{key}" if prefix else key
        if not path.startswith(INTEGRATIONS_OWN):
            out |= {path} | schema_keys(sub, root, path)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_the_schema_admits_exactly_the_declared_keys(name):
    schema = validator(name).schema  # as rule files are checked with it (the integrations' sections added)
    assert schema_keys(schema, schema) == set(RULE_FILES[name].keys())


def test_a_key_the_schema_does_not_declare_is_found():
    schema = json.loads(schemafiles.generated()["signals.schema.json"])
    schema["$defs"]["rule"]["properties"]["priority"] = {"type": "integer"}
    assert schema_keys(schema, schema) - set(SIGNALS.keys()) == {"signals.priority"}


def test_a_section_decodes_with_the_declared_defaults():
    signals = SIGNALS.decode({"signals": [{"kind": "thermal", "match": ['alertname="GpuHot"']}]}).signals
    assert (signals[0].kind, signals[0].match, signals[0].detail, signals[0].severity) == \
        ("thermal", ('alertname="GpuHot"',), "", "")
    evidence = EVIDENCE.decode({"evidence": {"annotations": {"xid_patterns": ["Xid (?P<xid>[0-9]+)"]}}}).evidence
    assert evidence.annotations.fields == ("summary", "description", "message")
    assert evidence.expressions == () and evidence.cluster_metrics is None and evidence.gpu_looking.labels == ()


# -- the defaults a description states ("Default 5m.") are the declared ones

def _stated(node: JSONValue, path: str = "") -> Iterator[tuple[str, str, JSONValue]]:
    if isinstance(node, dict):
        # the value ends before a space, ;,() or ": " (a colon inside it, as in a time, belongs to it)
        said = re.search(r"\b[Dd]efault ((?:[^\s;,():]|:(?=\S))+?)\.?(?=[\s;,()]|:\s|$)", str(node.get("description", "")))
        if said and "default" in node and not isinstance(node["default"], (list, dict)):
            yield path, said.group(1), node["default"]
        for key, sub in node.items():
            yield from _stated(sub, f"{path}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _stated(sub, f"{path}/{i}")


def _wrong(stated: list[tuple[str, str, JSONValue]]) -> list[str]:
    return [f"{path}: says {said}, declares {default!r}" for path, said, default in stated
            if said != ("none" if default == "" else json.dumps(default).strip('"'))]


@pytest.mark.parametrize("name", NAMES)
def test_the_defaults_the_descriptions_state_are_the_declared_ones(name):
    assert _wrong(list(_stated(json.loads(schemafiles.generated()[f"{name}.schema.json"])))) == []


def test_the_descriptions_state_defaults_to_check():
    files = [json.loads(schemafiles.generated()[f"{name}.schema.json"]) for name in NAMES]
    assert sum(len(list(_stated(schema))) for schema in files) > 20, "the check would pass on anything"


def test_a_description_stating_another_default_is_found():
    schema = {"properties": {"hold_down": {"description": "Stays open. Default 5m.", "default": "10m"}}}
    assert _wrong(list(_stated(schema))) == ["/properties/hold_down: says 5m, declares '10m'"]


# -- the docs name every declared key, and no key that is gone

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
    named = {m.replace("[]", "") for m in re.findall(rf"`({section}(?:\.[a-z_]+|\[\])+)", text)
             if not m.endswith(FILE_SUFFIXES)}
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        try:
            doc = yaml.safe_load(block)
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get(section), (dict, list)):
            named |= _yaml_keys(doc[section], section)
    return named


def disagreements(text: str, rule_file: RuleFile, where: str = "docs/rules.md") -> list[str]:
    """Declared keys the text never names, and keys its prose or examples name that are not declared (the
    generated tables aside: they are the declaration's, tests/unit/test_docs_rules.py keeps them current)."""
    section = rule_file.key
    declared = set(rule_file.keys()) - {section}
    leaves = {k for k in declared if not any(d.startswith(k + ".") for d in declared)}
    prose = TABLE.sub("", text)

    def named(text: str) -> set[str]:  # a free-form mapping's own keys (handoff labels) are no keys of the section
        return {k for k in named_keys(text, section) if not any(k.startswith(leaf + ".") for leaf in leaves)
                and not k.startswith(INTEGRATIONS_OWN)}

    return ([f"{where} does not name {k}" for k in sorted(declared - named(text))]
            + [f"{where} names {k}, which is not declared" for k in sorted(named(prose) - declared)])


@pytest.mark.parametrize("name", NAMES)
def test_the_docs_name_every_declared_key_and_no_other(name):
    doc = DOCS.get(name, "rules.md")
    assert disagreements((ROOT / "docs" / doc).read_text(encoding="utf-8"), RULE_FILES[name], f"docs/{doc}") == []


def test_an_undocumented_or_gone_key_is_found():
    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    correlation = RULE_FILES["correlation"]
    dropped = re.sub(r"^.*`correlation\.storm\.page_updates`.*\n", "", TABLE.sub("", text), flags=re.M)
    assert "docs/rules.md does not name correlation.storm.page_updates" in disagreements(dropped, correlation)
    gone = text + "\nSet `correlation.storm.wait` to hold longer.\n"
    assert disagreements(gone, correlation) == ["docs/rules.md names correlation.storm.wait, which is not declared"]
    example = text + "\n```yaml\ncorrelation:\n  storm:\n    events:\n      - name: x\n        by: [cluster]\n        keyed: [x]\n```\n"
    assert disagreements(example, correlation) == [
        "docs/rules.md names correlation.storm.events.keyed, which is not declared"]
    dropped = re.sub(r"^.*`evidence\.annotations\.value_patterns`.*\n", "", text, flags=re.M)
    assert disagreements(dropped, EVIDENCE) == ["docs/rules.md does not name evidence.annotations.value_patterns"]


def test_the_checked_in_routing_schema_is_the_whole_file():
    """An editor reads the schema file alone: the shipped routing rules, and a receiver of every integration,
    are valid by it without alertd adding anything."""
    schema = json.loads((ROOT / "alertd" / "schemas" / "routing.schema.json").read_text(encoding="utf-8"))
    check = Draft202012Validator(schema)
    shipped = yaml.safe_load((ROOT / "rules" / "routing.yml").read_text(encoding="utf-8"))
    assert list(check.iter_errors(shipped)) == []
    every = {"name": "all", "console": True, "slack": {"channels": ["#a"]}, "pagerduty": {"routing_key": "${a}"},
             "webhook": {"endpoint": "${w}"}, "opsgenie": {"api_key": "${o}"}}
    assert set(every) - {"name"} == set(registry.INTEGRATIONS)
    assert list(check.iter_errors({"routing": {"receivers": [every]}})) == []
    assert list(check.iter_errors({"routing": {"receivers": [{**every, "email": {}}]}})) != []
