"""The checked-in JSON Schemas of the configuration, generated from the sections' declarations.

``python -m alertd.config.schemafiles`` rewrites them after a declaration changed; ``--check`` only says
which are stale (tests/unit/test_config_sections.py fails on a stale one). config.schema.json keeps the
sections not yet declared as Structs as they are written in it; the declared ones are replaced. Each
declared rule-file section (alertd/rules/files.py) has a schema file of its own."""
from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

from alertd.config.classify import ClassifySettings
from alertd.config.connections import ConnectionSettings
from alertd.config.service import HAConfig, LogSettings, ProcessingSettings, RulesSettings, StorageSettings, TlsSettings
from alertd.core.json_types import JSONObject, obj
from alertd.core.sections import Section, section_schema
from alertd.enrich.settings import NodeIndexSettings
from alertd.integrations.base import DURATION_SCHEMA
from alertd.integrations.tickets import RmaSettings
from alertd.report.settings import ReportSettings
from alertd.rules.files import RULE_FILES
from alertd.sources.settings import SourcesSettings

# config.schema.json's sections (or parts of one, dotted) that a Struct declares; the others are still written
# in the file.
SECTIONS: dict[str, type[Section]] = {
    "report": ReportSettings,
    "tls": TlsSettings,
    "log": LogSettings,
    "storage": StorageSettings,
    "connections": ConnectionSettings,
    "ha": HAConfig,
    "rules": RulesSettings,
    "processing": ProcessingSettings,
    "sources": SourcesSettings,
    "normalize.kubernetes": NodeIndexSettings,
    "rma": RmaSettings,
}
# Sections with a schema file of their own, referred to by config.schema.json: file name -> (title, section).
OWN_FILES: dict[str, tuple[str, type[Section]]] = {
    "classify": ("Classification inputs beyond the rule files", ClassifySettings),
}
DECLARED: dict[str, type[Section]] = {**SECTIONS, **{name: cls for name, (_, cls) in OWN_FILES.items()}}


def schema_dir() -> Path:
    return Path(str(resources.files("alertd.schemas")))


def _dump(doc: JSONObject) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _config(current: JSONObject) -> JSONObject:
    out = current
    for name, cls in SECTIONS.items():
        out = _replaced(out, name.split("."), section_schema(cls))
    return out


def _replaced(node: JSONObject, path: list[str], schema: JSONObject) -> JSONObject:
    """``node`` with the schema of the property at ``path`` replaced (the enclosing objects copied)."""
    properties = dict(obj(node["properties"], "properties"))
    head, rest = path[0], path[1:]
    properties[head] = _replaced(obj(properties[head], head), rest, schema) if rest else schema
    return {**node, "properties": properties}


def _own_file(name: str, title: str, cls: type[Section]) -> JSONObject:
    body = section_schema(cls)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://alertd.dev/schemas/{name}.schema.json", "title": title,
            **{k: v for k, v in body.items() if k != "description"}, "$defs": {"duration": dict(DURATION_SCHEMA)}}


def generated(directory: Path | None = None) -> dict[str, str]:
    """File name -> its text as the declarations make it."""
    directory = directory or schema_dir()
    current = obj(json.loads((directory / "config.schema.json").read_text(encoding="utf-8")), "config.schema.json")
    out = {"config.schema.json": _dump(_config(current))}
    for name, (title, cls) in OWN_FILES.items():
        out[f"{name}.schema.json"] = _dump(_own_file(name, title, cls))
    for rule_file in RULE_FILES:
        out[f"{rule_file.name}.schema.json"] = _dump(rule_file.schema())
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
