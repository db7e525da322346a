"""The checked-in JSON Schemas of the configuration, generated from the declarations.

``python -m alertd.config.schemafiles`` rewrites them after a declaration changed; ``--check`` only says
which are stale (tests/unit/test_config_sections.py fails on a stale one). config.schema.json is the
declaration of the file (alertd/config/document.py); the sections with a schema file of their own are
referred to from it. Every rule file's schema (alertd/rules/rule_schemas.py) is written here too, the rule
test files' (alertd/schemas/ruletest.py) and the inbound payloads' (alertd/receive/shapes.py)."""
from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

from alertd.alertmanager.settings import AlertmanagerSettings
from alertd.config.classify import ClassifySettings
from alertd.config.document import ConfigFile
from alertd.core.json_types import JSONObject, obj
from alertd.core.sections import Section, parts, section_schema
from alertd.enrich.settings import EnrichSettings
from alertd.integrations.base import DURATION_SCHEMA
from alertd.integrations.registry import NotifySection
from alertd.receive import shapes
from alertd.rules.rule_schemas import RULE_FILES
from alertd.schemas.declared import RuleFile
from alertd.schemas.ruletest import RULE_TEST

URL = "https://alertd.dev/schemas/{}.schema.json"
# Sections with a schema file of their own, referred to by config.schema.json: file name -> (title, section).
OWN_FILES: dict[str, tuple[str, type[Section]]] = {
    "classify": ("Classification inputs beyond the rule files", ClassifySettings),
    "notify": ("alertd notifiers", NotifySection),
    "alertmanager": ("Alertmanager API access", AlertmanagerSettings),
    "enrich": ("alertd enrichment", EnrichSettings),
}
# config.schema.json's sections that a Struct declares, inlined in it.
SECTIONS: dict[str, type[Section]] = {name: cls for name, cls in parts(ConfigFile).items() if name not in OWN_FILES}
# The rule-language files declared as rule files are: the rule files' and the rule tests'
DECLARED_FILES: dict[str, RuleFile[Section]] = {**RULE_FILES, RULE_TEST.name: RULE_TEST}
DECLARED: dict[str, type[Section]] = {**SECTIONS, **{name: cls for name, (_, cls) in OWN_FILES.items()}}


def schema_dir() -> Path:
    return Path(str(resources.files("alertd.schemas")))


def _dump(doc: JSONObject) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _file(name: str, title: str, body: JSONObject) -> JSONObject:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": URL.format(name), "title": title,
            **{k: v for k, v in body.items() if k != "description"}, "$defs": {"duration": dict(DURATION_SCHEMA)}}


def _config() -> JSONObject:
    body = section_schema(ConfigFile)
    properties = dict(obj(body["properties"], "properties"))
    for name in OWN_FILES:
        described = obj(properties[name], name)
        properties[name] = {"$ref": URL.format(name), **{k: v for k, v in described.items() if k == "description"}}
    return _file("config", str(body["description"]), {**body, "properties": properties})


def generated(directory: Path | None = None) -> dict[str, str]:
    """File name -> its text as the declarations make it."""
    out = {"config.schema.json": _dump(_config())}
    for name, (title, cls) in OWN_FILES.items():
        out[f"{name}.schema.json"] = _dump(_file(name, title, section_schema(cls)))
    out.update((f"{name}.schema.json", _dump(rule_file.schema())) for name, rule_file in DECLARED_FILES.items())
    out.update((name, _dump(doc)) for name, doc in shapes.generated().items())
    return out


def stale(directory: Path | None = None) -> list[str]:
    """The files whose checked-in text is not what the declarations generate."""
    directory = directory or schema_dir()
    return sorted(name for name, text in generated(directory).items()
                  if (directory / name).read_text(encoding="utf-8") != text)


def main(argv: list[str]) -> int:
    directory = schema_dir()
    if "--check" in argv:
        names = stale(directory)
        for name in names:
            print(f"{directory / name} is stale: run python -m alertd.config.schemafiles")
        return 1 if names else 0
    for name, text in generated(directory).items():
        (directory / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
