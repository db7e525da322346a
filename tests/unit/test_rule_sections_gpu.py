"""Rule-file sections declared once (alertd/schemas/declared.py): their checked-in schemas are what the
declarations generate, the decoded section is what the parsers read, and the docs name exactly the declared
keys."""
from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
import yaml

from alertd.config import schemafiles
from alertd.core.sections import Section
from alertd.schemas.declared import RuleFile, key_paths
from alertd.rules.files import RULE_FILES as DECLARED_RULE_FILES
from alertd.rules.evidence import EVIDENCE
from alertd.rules.signals import SIGNALS
from alertd.schemas import validator

ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = DECLARED_RULE_FILES
# Where each rule file's keys are documented (docs/rules.md unless named here)
DOCS: dict[str, str] = {"kube-health": "sources.md"}
FILE_SUFFIXES = {"yml", "yaml", "md", "json", "py"}  # `signals.yml` names a file, not a key


def _section(rule_file: RuleFile[Section]) -> str:
    return msgspec.structs.fields(rule_file.body)[0].encode_name


def test_the_rule_files_schemas_are_what_the_declarations_generate():
    names = {f"{rf.name}.schema.json" for rf in RULE_FILES}
    assert names <= set(schemafiles.generated())
    assert [n for n in schemafiles.stale() if n in names] == [], "run: python -m alertd.config.schemafiles"


def test_a_stale_rule_schema_is_found(tmp_path):
    for name, text in schemafiles.generated().items():
        (tmp_path / name).write_text(text)
    for rule_file in RULE_FILES:
        path = tmp_path / f"{rule_file.name}.schema.json"
        text = path.read_text()
        path.write_text(text.replace('"additionalProperties": false', '"additionalProperties": true', 1))
        assert schemafiles.stale(tmp_path) == [path.name]
        path.write_text(text)


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda rf: rf.name)
def test_every_declared_key_is_in_the_generated_schema(rule_file):
    """The schema the rule files are checked with is the declaration's: a key of one is a key of the other."""
    def walk(node: object, root: dict[str, object], prefix: str) -> set[str]:
        if not isinstance(node, dict):
            return set()
        if "$ref" in node:
            node = {**root["$defs"][str(node["$ref"]).rsplit("/", 1)[-1]], **node}  # type: ignore[index]
            node.pop("$ref")
        if node.get("type") == "array":
            return walk(node.get("items"), root, prefix + "[]")
        out = set()
        for key, sub in (node.get("properties") or {}).items():
            path = f"{prefix}.{key}" if prefix else key
            out |= {path} | walk(sub, root, path)
        return out

    schema = validator(rule_file.name).schema
    assert walk(schema, schema, "") == set(key_paths(rule_file.body))


def test_a_section_decodes_with_the_declared_defaults():
    signals = SIGNALS.decode({"signals": [{"kind": "thermal", "match": ['alertname="GpuHot"']}]}).signals
    assert (signals[0].kind, signals[0].match, signals[0].detail, signals[0].severity) == \
        ("thermal", ('alertname="GpuHot"',), "", "")
    evidence = EVIDENCE.decode({"evidence": {"annotations": {"xid_patterns": ["Xid (?P<xid>[0-9]+)"]}}}).evidence
    assert evidence.annotations.fields == ("summary", "description", "message")
    assert evidence.expressions == () and evidence.cluster_metrics is None and evidence.gpu_looking.labels == ()


# -- the docs name exactly the declared keys

def _yaml_paths(doc: object, prefix: str) -> set[str]:
    if isinstance(doc, list):
        return set().union(*(_yaml_paths(item, prefix + "[]") for item in doc)) if doc else set()
    if not isinstance(doc, dict):
        return set()
    out: set[str] = set()
    for key, value in doc.items():
        out |= {f"{prefix}.{key}"} | _yaml_paths(value, f"{prefix}.{key}")
    return out


def named_keys(text: str, section: str) -> set[str]:
    """The keys of a section a document names: ``section.key`` or ``section[].key`` in backticks, or keys of a
    YAML block under the section."""
    found = set()
    for path in re.findall(rf"`({re.escape(section)}(?:\[\])?(?:\.[a-z_]+(?:\[\])?)+)(?:`|: )", text):
        if path.rsplit(".", 1)[-1] not in FILE_SUFFIXES:
            found.add(path)
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        try:
            doc = yaml.safe_load(block)
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and section in doc:
            found |= _yaml_paths(doc[section], section)
    return found


def disagreements(rule_file: RuleFile[Section], text: str, where: str) -> list[str]:
    declared = set(key_paths(rule_file.body))
    named = named_keys(text, _section(rule_file))
    return [f"{where} names {p}, which is not declared" for p in sorted(named - declared)] + \
        [f"{where} does not name {p}" for p in sorted(declared - named - {_section(rule_file)})]


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda rf: rf.name)
def test_the_docs_name_every_declared_key_and_no_other(rule_file):
    doc = DOCS.get(rule_file.name, "rules.md")
    assert disagreements(rule_file, (ROOT / "docs" / doc).read_text(), f"docs/{doc}") == []


def test_an_undocumented_or_gone_key_is_found():
    text = (ROOT / "docs" / "rules.md").read_text()
    dropped = re.sub(r"^\| `evidence\.annotations\.value_patterns` .*\n", "", text, flags=re.M)
    assert disagreements(EVIDENCE, dropped, "docs") == ["docs does not name evidence.annotations.value_patterns"]
    gone = text + "\nUse `evidence.annotations.xid_regex` for ...\n```yaml\nevidence:\n  labels:\n    - kind: ecc\n" \
        "      matches: ['a=\"b\"']\n```\n"
    found = disagreements(EVIDENCE, gone, "docs")
    assert found == ["docs names evidence.annotations.xid_regex, which is not declared",
                     "docs names evidence.labels[].matches, which is not declared"]
