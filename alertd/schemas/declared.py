"""Rule files declared once, as msgspec Structs (alertd/core/sections.py): a file's declaration is its JSON
Schema (``RuleFile.schema``, generated into alertd/schemas/ by ``python -m alertd.config.schemafiles``; the
files are listed in alertd/rules/rule_schemas.py) and the typed value its parser reads (``RuleFile.decode``),
so a key, its bounds, default and description are written in one place.

The schema still checks a rule file first, through jsonschema, with the words and positions of
alertd/schemas/messages.py; a schema first written by hand keeps that file's shape (its ``$defs`` by name,
its key order, the conditions between keys), so every error reads as it did."""
from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Self, TypeVar

import msgspec
from msgspec import Meta

from alertd.core.json_types import JSONObject, obj
from alertd.core.sections import Section, enum_alone, list_part, option_paths, part_of, section_schema
from alertd.core.states import Severity
from alertd.schemas.messages import MATCHER_OPERATORS

MATCHER_START = r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*" + MATCHER_OPERATORS  # a label name and its operator
MATCHER_PATTERN = MATCHER_START + r'\s*"(?:[^"\\]|\\.)*"\s*$'
# A signal's severity in the rule files' order (most severe first, as their errors list it)
SEVERITY_WORDS = tuple(str(s) for s in reversed(Severity))
RUNBOOK_PATTERN = "^[a-z0-9][a-z0-9-]*$"
DETAIL_PATTERN = "^[a-z][a-z0-9_]*$"
S = TypeVar("S", bound=Section, covariant=True)
KEY_ORDER = ("type", "description", "additionalProperties", "minProperties", "required", "properties")


class DefText(str):
    """Text whose schema is a definition of its rule file's (``#/$defs/<ref>``), shared by several keys."""

    ref: ClassVar[str]

    @classmethod
    def from_config(cls, value: str) -> Self:
        return cls(value)

    @classmethod
    def config_schema(cls) -> dict[str, object]:
        return {"$ref": f"#/$defs/{cls.ref}"}


class MatcherText(DefText):
    """One Alertmanager-style matcher as written (``alertname=~"GPUXid.*"``): the schema checks its form, the
    rule loader parses it and reports a bad one at its position."""

    ref = "matcher"


def matcher_def(description: str) -> JSONObject:
    """The ``matcher`` definition of a rule file's schema (what MatcherText refers to)."""
    return {"type": "string", "description": description, "pattern": MATCHER_PATTERN}


def word(values: Iterable[str], description: str | None = None) -> Meta:
    """A value out of a vocabulary set (alertd/core/vocabulary.py), listed in the given order: its schema is the
    enum alone (a wrong value is one error, naming the words), for a field or a list's items
    (``tuple[Annotated[str, word(...)], ...]``)."""
    return Meta(description=description, extra_json_schema={"enum": [str(v) for v in values]})


def in_order(words: Iterable[str], among: Iterable[str]) -> tuple[str, ...]:
    """``among`` in the order of ``words`` (a StrEnum's declaration order), for an error that lists them."""
    wanted = set(among)
    return tuple(str(w) for w in words if w in wanted)


@dataclass(frozen=True)
class RuleFile(typing.Generic[S]):
    """One rule file's schema file. ``body`` declares the whole file (its keys the sections) or, with
    ``section``, the one section under that key. The Structs of ``defs`` are ``$defs`` by the given name, the
    others are inlined where they are used; ``extra_defs`` are the file's own definitions its types refer to."""

    name: str  # the schema file: <name>.schema.json
    title: str
    body: type[S]
    defs: Mapping[type[Section], str] = field(default_factory=dict)
    extra_defs: JSONObject = field(default_factory=dict)
    section: str = ""
    # The order of a declared object's keys, as the hand-written file had it: several errors at one path are told
    # in it (None: the declaration's own order)
    key_order: tuple[str, ...] | None = KEY_ORDER
    def_key_order: tuple[str, ...] | None = None  # a definition's, when it differs from key_order

    @property
    def key(self) -> str:
        """The rule files' key of the section."""
        return self.section or msgspec.structs.fields(self.body)[0].encode_name

    def keys(self) -> list[str]:
        """Every key the file declares, as ``section.key.key`` (a list's items' keys under the list's), the
        section's own first."""
        if self.section:
            return [self.section, *option_paths(self.body, self.section)]
        return [path.removeprefix(".") for path in option_paths(self.body, "")]

    def decode(self, doc: Mapping[str, object]) -> S:
        """The section(s) of a rule file its schema accepted."""
        part = doc.get(self.section) if self.section else doc
        return self.body.from_doc(part if isinstance(part, Mapping) else None)

    def schema(self) -> JSONObject:
        root = self._shaped(self.body, self.key_order)
        if self.section:
            root = {"type": "object", "properties": {self.section: root}}
        defs = {**self.extra_defs, **{name: self._shaped(cls, self.def_key_order or self.key_order)
                                      for cls, name in self.defs.items()}}
        return {"$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": f"https://alertd.dev/schemas/{self.name}.schema.json", "title": self.title,
                **root, "$defs": dict(sorted(defs.items(), key=lambda d: _DEF_ORDER.get(d[0], 1)))}

    def _shaped(self, cls: type[Section], order: tuple[str, ...] | None) -> JSONObject:
        schema = section_schema(cls, {part: name for part, name in self.defs.items() if part is not cls})
        return schema if order is None else _shape(schema, cls, order)


_DEF_ORDER = {"matcher": 0}  # the matcher first, as the hand-written files had it


def _shape(node: JSONObject, cls: type[Section], order: tuple[str, ...]) -> JSONObject:
    """A declared object's schema in the hand-written files' shape: its keys in ``order`` (what it says of
    itself as a whole last), its docstring on one line, an enum without its type (one error for a wrong
    value)."""
    whole = getattr(cls, "SCHEMA", {})
    own = {k: v for k, v in node.items() if k not in whole}
    if cls.__doc__ and "description" in own:
        own["description"] = " ".join(str(own["description"]).split())
    properties = dict(obj(own.get("properties", {}), "properties"))
    for f in msgspec.structs.fields(cls):
        prop = _untyped(obj(properties[f.encode_name], f.name))
        if (part := part_of(f.type)) is not None and "$ref" not in prop:
            prop = _shape(prop, part, order)
        elif (item := list_part(f.type)) is not None and "$ref" not in obj(prop["items"], f.name):
            prop["items"] = _shape(obj(prop["items"], f.name), item, order)
        properties[f.encode_name] = prop
    if properties:
        own["properties"] = properties
    ordered = {k: own[k] for k in order if k in own}
    return {**ordered, **{k: v for k, v in own.items() if k not in ordered}, **whole}


def _untyped(node: JSONObject) -> JSONObject:
    return enum_alone({k: _untyped(v) if isinstance(v, dict) else v for k, v in node.items()})


__all__ = ["DETAIL_PATTERN", "DefText", "KEY_ORDER", "MATCHER_PATTERN", "MATCHER_START", "MatcherText",
           "RUNBOOK_PATTERN", "RuleFile", "SEVERITY_WORDS", "in_order", "matcher_def", "word"]
