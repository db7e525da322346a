"""The rule test format is declared once (alertd/schemas/ruletest.py): ruletest.schema.json is what the
declaration generates, it admits exactly the declared keys, the defaults its descriptions state are the
declared ones, a decoded file holds them, and docs/rules.md names every declared key and no other."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from alertd.config import schemafiles
from alertd.core.states import AlertStatus
from alertd.schemas import validator
from alertd.schemas.ruletest import RULE_TEST, RuleTestFile, unreadable
from tests.unit.test_rule_sections import TABLE, _stated, _wrong, schema_keys

ROOT = Path(__file__).resolve().parents[2]
FILE = "ruletest.schema.json"
TEST = {"name": "t", "input": [{"at": "0s", "labels": {"alertname": "A", "xid": 79}}],
        "actions": [{"at": 30, "action": "acknowledge", "incident": "INC-1"}],
        "expect": [{"at": "1m", "incidents": [{"children": 2, "xids": [79]}]}]}


def test_the_schema_file_is_what_the_declaration_generates():
    assert FILE in schemafiles.generated()
    assert FILE not in schemafiles.stale(), "run: python -m alertd.config.schemafiles"


def test_a_stale_schema_file_is_found(tmp_path):
    for file, text in schemafiles.generated().items():
        (tmp_path / file).write_text(text)
    path = tmp_path / FILE
    path.write_text(path.read_text().replace('"minItems": 1', '"minItems": 0', 1))
    assert schemafiles.stale(tmp_path) == [FILE]


def test_the_schema_admits_exactly_the_declared_keys():
    schema = validator("ruletest").schema
    assert schema_keys(schema, schema) == set(RULE_TEST.keys())
    assert {"tests.input.every", "tests.expect.incidents.verdict_action", "defaults.labels"} <= set(RULE_TEST.keys())


def test_the_defaults_the_descriptions_state_are_the_declared_ones():
    stated = list(_stated(json.loads(schemafiles.generated()[FILE])))
    assert {path.rsplit("/", 1)[-1] for path, _, _ in stated} >= {"status", "by", "partial"}
    assert _wrong(stated) == []


def test_a_decoded_file_holds_the_declared_defaults():
    doc = RULE_TEST.decode({"tests": [TEST]})
    assert doc.rule_files == ("..",) and doc.start == datetime(2026, 1, 1, tzinfo=timezone.utc)
    (test,) = doc.tests
    alert, action, expect = test.input[0], test.actions[0], test.expect[0]
    assert (alert.status, alert.labels, alert.every, action.by) == (AlertStatus.FIRING, {"alertname": "A", "xid": "79"},
                                                                    None, "test")
    assert action.at.after(doc.start) == doc.start + timedelta(seconds=30) and str(action.at) == "30"
    assert expect.partial is False and expect.incidents is not None
    assert expect.incidents[0].given() == {"xids": [79], "children": 2}


def test_a_time_the_schema_passes_but_cannot_be_read_is_found():
    doc = {"start": "2026-02-30T00:00:00Z", "tests": [{**TEST, "eval_at": ["5m", "1h1h"],
                                                       "input": [{**TEST["input"][0], "every": "1m1m", "until": "1h"}]}]}
    found = {path: why for path, why in unreadable(RuleTestFile, doc)}
    assert set(found) == {("start",), ("tests", 0, "eval_at", 1), ("tests", 0, "input", 0, "every")}
    assert "out of order or repeated" in found[("tests", 0, "input", 0, "every")]
    assert list(unreadable(RuleTestFile, {"tests": [TEST]})) == []


def test_an_interval_of_zero_is_unreadable():
    """A series every 0s would never reach its until."""
    alert = {**TEST["input"][0], "every": "0s", "until": "1m"}
    assert list(unreadable(RuleTestFile, {"tests": [{**TEST, "input": [alert]}]})) == [
        (("tests", 0, "input", 0, "every"), "'0s' repeats without end: use a duration above 0, e.g. 1m")]


# -- docs/rules.md names every declared key (in its generated table or its prose) and no other

def documented(text: str) -> set[str]:
    """The rule test keys a text names in backticks, as the table writes them (``tests[].input[].at``)."""
    top = "|".join(RuleTestFile.__struct_fields__)
    return {m.replace("[]", "") for m in re.findall(rf"`((?:{top})(?:\[\]|\.[a-z_]+)*)`", text)}


def disagreements(text: str) -> list[str]:
    block = "".join(m.group(0) for m in TABLE.finditer(text) if m.group("name") == "ruletest")
    declared, named = set(RULE_TEST.keys()), documented(block)
    return ([f"docs/rules.md does not name {k}" for k in sorted(declared - named)]
            + [f"docs/rules.md names {k}, which is not declared" for k in sorted(named - declared)])


def test_the_docs_name_every_declared_key_and_no_other():
    assert disagreements((ROOT / "docs" / "rules.md").read_text(encoding="utf-8")) == []


def test_an_undocumented_or_gone_key_is_found():
    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    dropped = re.sub(r"^\| `tests\[\]\.input\[\]\.until` .*\n", "", text, flags=re.M)
    assert disagreements(dropped) == ["docs/rules.md does not name tests.input.until"]
    gone = text.replace("| `tests[].input[].until` |", "| `tests[].input[].till` |")
    assert disagreements(gone) == ["docs/rules.md does not name tests.input.until",
                                   "docs/rules.md names tests.input.till, which is not declared"]
