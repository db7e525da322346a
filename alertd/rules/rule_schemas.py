"""The rule files' schema files that declarations generate (alertd/config/schemafiles.py writes and checks
them with the configuration's)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from alertd.core.json_types import JSONObject, JSONValue, obj
from alertd.core.sections import Section, option_paths, section_schema
from alertd.rules.correlation_section import Correlation
from alertd.rules.declared import RULE_DEFS
from alertd.rules.remediation import LadderStepRule, PolicyRule, RemediationFile
from alertd.rules.rma import Condition, RmaFile, RmaRule
from alertd.rules.routing_section import ROUTING_DEFS, RoutingSection


@dataclass(frozen=True)
class RuleFile:
    """One schema file: its title, and either the declaration of its section (``section``: the file's key it
    is under) or of the whole file (``section`` ""), whose parts named in ``defs`` are written once under
    ``$defs`` and referred to."""

    title: str
    declared: type[Section]
    section: str = ""
    defs: Mapping[type[Section], str] = field(default_factory=dict)
    own_defs: Mapping[str, object] = field(default_factory=dict)  # what the declaration's own types refer to

    def keys(self) -> list[str]:
        """Every key the file's section declares, as ``section.key.key`` (the section itself not one)."""
        if self.section:
            return option_paths(self.declared, self.section)
        return [path.removeprefix(".") for path in option_paths(self.declared, "") if path.count(".") > 1]

    @property
    def key(self) -> str:
        """The rule files' key of the section."""
        return self.section or self.keys()[0].split(".")[0]

    def schema(self, name: str) -> JSONObject:
        head: JSONObject = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                            "$id": f"https://alertd.dev/schemas/{name}.schema.json", "title": self.title}
        if self.section:
            return {**head, "type": "object", "properties": {self.section: section_schema(self.declared)},
                    "$defs": {**RULE_DEFS, **obj(dict(self.own_defs), "own_defs")}}
        inlined = {cls: section_schema(cls) for cls in self.defs}
        defs: JSONObject = {ref: _referring({**section_schema(cls), **getattr(cls, "SCHEMA", {})}, inlined, self.defs)
                for cls, ref in self.defs.items()}
        return {**head, **_referring(section_schema(self.declared), inlined, self.defs), "$defs": dict(defs)}


def _referring(node: JSONObject, inlined: Mapping[type[Section], JSONObject],
               refs: Mapping[type[Section], str]) -> JSONObject:
    """``node`` with each part written under ``$defs`` replaced by a reference to it."""

    def walk(value: JSONValue) -> JSONValue:
        if isinstance(value, dict):
            part = next((cls for cls, schema in inlined.items() if schema == value), None)
            if part is not None:
                return {"$ref": f"#/$defs/{refs[part]}"}
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return {k: walk(v) for k, v in node.items()}


# schema file name -> what declares it
RULE_FILES: dict[str, RuleFile] = {
    "correlation": RuleFile("alertd correlation rules", Correlation, "correlation"),
    "routing": RuleFile("alertd routing rules", RoutingSection, "routing", own_defs=ROUTING_DEFS),
    "rma": RuleFile("alertd RMA candidate policy", RmaFile, defs={Condition: "condition", RmaRule: "rule"}),
    "remediation": RuleFile("alertd remediation policy", RemediationFile,
                            defs={LadderStepRule: "step", PolicyRule: "policy"}),
}


def rule_file_schema(name: str) -> JSONObject:
    return RULE_FILES[name].schema(name)


__all__ = ["RULE_FILES", "RuleFile", "rule_file_schema"]
