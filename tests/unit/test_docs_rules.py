"""docs/rules.md cannot drift from the schemas, the loaders or the tools it describes."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import yaml

from alertd.authoring import schemadoc
from alertd.authoring.check import check
from alertd.authoring.replay import main as replay_main
from alertd.authoring.ruletest import run_file

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rules.md"
TEXT = DOC.read_text(encoding="utf-8")


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", TEXT, re.S)


@pytest.mark.parametrize("name", schemadoc.SCHEMAS)
def test_every_schema_property_is_documented(name):
    assert name in schemadoc.available(), f"schema {name} is missing"
    missing = sorted(p for p in schemadoc.property_names(name) if f"`{p}`" not in TEXT and f".{p}`" not in TEXT)
    assert not missing, f"{name}: not in docs/rules.md: {missing}"


def test_generated_tables_are_current():
    fresh, changed = schemadoc.refresh(TEXT)
    assert not changed, f"stale tables {changed}: run python -m alertd.authoring.schemadoc --write docs/rules.md"
    for name in schemadoc.available():
        assert f"<!-- BEGIN schemadoc {name} -->" in TEXT, f"no table for {name}"
    assert schemadoc.main(["--check", str(DOC)]) == 0


def test_generator_prints_every_table(capsys):
    assert schemadoc.main([]) == 0
    out = capsys.readouterr().out
    for name in schemadoc.available():
        assert f"<!-- BEGIN schemadoc {name} -->\n| Key | Type | Description |" in out
    assert "| `correlation.storm.min_nodes` | integer |" in out


def test_rule_examples_are_valid(tmp_path):
    sections = {"xids", "signals", "evidence", "correlation", "routing"}
    examples = [b for b in code_blocks("yaml") if set(yaml.safe_load(b) or {}) & sections]
    assert len(examples) == 8
    for i, block in enumerate(examples):
        path = tmp_path / f"example{i}.yml"
        path.write_text(block)
        report = check([path], runbooks=ROOT / "runbooks")
        assert report.ok, "\n".join(map(str, report.errors))


def test_the_test_file_example_passes_against_the_shipped_rules(tmp_path):
    (block,) = [b for b in code_blocks("yaml") if b.lstrip().startswith("# rules/tests/")]
    path = tmp_path / "site.test.yml"
    path.write_text(block.replace("rule_files: [..]", f"rule_files: [{ROOT / 'rules'}]"))
    result = run_file(path)
    assert result.ok, "\n".join(map(str, result.problems + result.failures))


def test_the_replay_example_output_is_real():
    (block,) = [b for b in code_blocks("console") if b.startswith("$ alertd replay examples/recorded.jsonl\n")]
    out, err = io.StringIO(), io.StringIO()
    assert replay_main(str(ROOT / "examples" / "recorded.jsonl"), rule_paths=[str(ROOT / "rules")], config=None,
                       as_json_output=False, tail=None, until=None, out=out, err=err) == 0
    actual = out.getvalue().splitlines()
    shown = [line for line in block.splitlines()[1:] if line.strip() and line.strip() != "..."]
    missing = [line for line in shown if line not in actual]
    assert not missing, "docs/rules.md shows replay output that alertd does not print:\n" + "\n".join(missing)


@pytest.mark.parametrize("command", [
    "alertd check --prometheus-rules tests/fixtures/prometheus-rules/site-handwritten.yml",
    "alertd explain examples/webhook-site-rules.json",
    "alertd explain examples/webhook-docker-host.json",
])
def test_bring_your_own_rules_output_is_real(command, capsys, monkeypatch):
    """The section "Bring your own alert rules" shows what the commands print, line for line."""
    from alertd.cli.main import main as cli_main

    (block,) = [b for b in code_blocks("console") if b.startswith(f"$ {command}\n")]
    monkeypatch.chdir(ROOT)
    assert cli_main(command.split()[1:]) == 0
    actual = capsys.readouterr().out
    assert block.split("\n", 1)[1].rstrip() == actual.rstrip()
