"""The rule files' schema files that declarations generate (alertd/config/schemafiles.py writes and checks
them with the configuration's): schema file name -> its title, the section it validates, the declaration."""
from __future__ import annotations

from alertd.core.json_types import JSONObject
from alertd.core.sections import Section, section_schema
from alertd.rules.correlation_section import Correlation
from alertd.rules.declared import RULE_DEFS

RULE_FILES: dict[str, tuple[str, str, type[Section]]] = {
    "correlation": ("alertd correlation rules", "correlation", Correlation),
}


def rule_file_schema(name: str) -> JSONObject:
    """A rule section's schema file: the section's schema under its key, with the definitions it refers to."""
    title, section, cls = RULE_FILES[name]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://alertd.dev/schemas/{name}.schema.json", "title": title, "type": "object",
            "properties": {section: section_schema(cls)}, "$defs": dict(RULE_DEFS)}


__all__ = ["RULE_FILES", "rule_file_schema"]
