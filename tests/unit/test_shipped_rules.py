"""The shipped rules are package data; a site's rules add to or replace them only when the config says so."""
from __future__ import annotations

from pathlib import Path

import yaml

from alertd.config.settings import load_config
from alertd.rules.ruleset import load_rules, rule_files
from alertd.rules.shipped import default_rule_paths, shipped_rules


def test_the_shipped_rules_come_from_the_package_not_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "routing.yml").write_text("not: rules\n")
    assert default_rule_paths() == [str(shipped_rules())]
    assert (shipped_rules() / "xid-catalog.yml").is_file()
    assert load_config(None).rule_paths == [str(shipped_rules())]


def test_a_site_directory_replaces_a_shipped_file_by_name_and_adds_the_others(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "routing.yml").write_text((shipped_rules() / "routing.yml").read_text())
    shipped = yaml.safe_load((shipped_rules() / "xid-catalog.yml").read_text())
    entry = next(e for e in shipped["xids"] if e["code"] == 79)
    (site / "local-xids.yml").write_text(yaml.safe_dump({"xids": [{**entry, "name": "site's own 79"}]}))
    (tmp_path / "alertd.yml").write_text("rules:\n  site: [site]\n")
    cfg = load_config(tmp_path / "alertd.yml")
    assert cfg.rule_paths == [*default_rule_paths(), str(tmp_path / "site")]
    files = rule_files(cfg.rule_paths)
    assert [f for f in files if f.name == "routing.yml"] == [site / "routing.yml"]
    assert files[-2:] == [site / "local-xids.yml", site / "routing.yml"]
    assert load_rules(cfg.rule_paths).catalog.lookup(79).name == "site's own 79"


def test_rules_paths_still_replace_the_shipped_rules(tmp_path):
    only = tmp_path / "only.yml"
    only.write_text(Path(shipped_rules() / "xid-catalog.yml").read_text())
    (tmp_path / "alertd.yml").write_text("rules:\n  paths: [only.yml]\n")
    assert rule_files(load_config(tmp_path / "alertd.yml").rule_paths) == [only]
