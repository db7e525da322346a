"""Rule-file sections declared once, as msgspec Structs (alertd/core/sections.py): the declaration is the
section's JSON Schema (generated into alertd/schemas/ by ``python -m alertd.config.schemafiles``) and the
typed value its parser reads (``RuleFile.decode``), so a key, its bounds, default and description are written
in one place.

The schema still checks a rule file first, through jsonschema, with the words and positions of
alertd/schemas/messages.py; the generated schema keeps the shape the hand-written one had (its ``$defs`` by
name, the matcher pattern, the conditions between keys), so every error reads as it did."""
from __future__ import annotations

import typing
from types import UnionType
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Self, TypeVar

import msgspec
from msgspec import Meta

from alertd.core.json_types import JSONObject, JSONValue, obj
from alertd.core.sections import Section
from alertd.core.states import Severity
from alertd.schemas.messages import MATCHER_OPERATORS

MATCHER_PATTERN = r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*' + MATCHER_OPERATORS + r'\s*"(?:[^"\\]|\\.)*"\s*$'
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


def word(values: Iterable[str], description: str) -> Meta:
    """A value out of a vocabulary set (alertd/core/vocabulary.py), listed in the given order."""
    return Meta(description=description, extra_json_schema={"enum": [str(v) for v in values]})


def in_order(words: Iterable[str], among: Iterable[str]) -> tuple[str, ...]:
    """``among`` in the order of ``words`` (a StrEnum's declaration order), for an error that lists them."""
    wanted = set(among)
    return tuple(str(w) for w in words if w in wanted)


class Conditions:
    """Mixed into a declared Struct whose schema adds conditions between its keys (``allOf``)."""

    schema_extra: ClassVar[JSONObject] = {}


@dataclass(frozen=True)
class RuleFile(typing.Generic[S]):
    """One rule-file section's schema file: ``body`` holds the section as its only key; the Structs of
    ``defs`` are ``$defs`` by the given name, the others are inlined where they are used."""

    name: str  # the schema file: <name>.schema.json
    title: str
    body: type[S]
    defs: Mapping[type[Section], str] = field(default_factory=dict)
    extra_defs: JSONObject = field(default_factory=dict)
    # The order of a definition's keys: several errors at one path are told in it (as the hand-written file had)
    def_key_order: tuple[str, ...] = KEY_ORDER

    def decode(self, doc: Mapping[str, object]) -> S:
        """The section of a rule file its schema accepted."""
        return self.body.from_doc(doc)

    def schema(self) -> JSONObject:
        generated = obj(msgspec.json.schema(self.body, schema_hook=_schema_hook), self.name)
        made = _Maker(self, obj(generated["$defs"], "$defs"))
        root = made.struct(self.body)
        defs = {**self.extra_defs, **{name: made.struct(cls) for cls, name in self.defs.items()}}
        return {"$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": f"https://alertd.dev/schemas/{self.name}.schema.json", "title": self.title,
                **root, "$defs": dict(sorted(defs.items(), key=lambda d: _DEF_ORDER.get(d[0], 1)))}


_DEF_ORDER = {"matcher": 0}  # the matcher first, as the hand-written files had it


def _schema_hook(kind: type) -> dict[str, object]:
    schema = getattr(kind, "config_schema", None)
    if callable(schema):
        return dict(schema())
    raise NotImplementedError(f"{kind.__name__} has no schema")


class _Maker:
    """msgspec's schema of the Structs, reshaped as the rule files' schemas are written."""

    def __init__(self, rule_file: RuleFile[S], generated: JSONObject):
        self.rule_file, self.generated = rule_file, generated
        self.by_name: dict[str, type[Section]] = {}

    def struct(self, cls: type[Section]) -> JSONObject:
        self._know(cls)
        node = self.node(obj(self.generated[cls.__name__], cls.__name__))
        if cls.__doc__ and "description" in node:
            node["description"] = " ".join(str(node["description"]).split())
        if not node.get("required"):
            node.pop("required", None)
        extra = getattr(cls, "schema_extra", {})
        order = self.rule_file.def_key_order if cls in self.rule_file.defs else KEY_ORDER
        ordered = {k: node[k] for k in order if k in node}
        return {**ordered, **{k: v for k, v in node.items() if k not in ordered}, **extra}

    def _know(self, cls: type[Section]) -> None:
        for f in msgspec.structs.fields(cls):
            for part in _structs(f.type):
                if part.__name__ not in self.by_name:
                    self.by_name[part.__name__] = part
                    self._know(part)

    def node(self, node: JSONObject) -> JSONObject:
        out: JSONObject = {}
        for key, value in node.items():
            if key == "title" or (key == "default" and value is None):
                continue
            out[key] = self.value(value)
        ref = out.pop("$ref", None)
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref.rsplit("/", 1)[-1] in self.by_name:
            part = self.by_name[ref.rsplit("/", 1)[-1]]
            name = self.rule_file.defs.get(part)
            out = {"$ref": f"#/$defs/{name}", **out} if name else {**self.struct(part), **out}
        elif ref is not None:
            out = {"$ref": ref, **out}
        options = out.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options:  # X | None: absent, never null in a file
            rest = [o for o in options if o != {"type": "null"}]
            del out["anyOf"]
            out = {**obj(rest[0], "anyOf"), **out} if len(rest) == 1 else {"anyOf": rest, **out}
        if "enum" in out:
            out.pop("type", None)  # the enum alone: one error for a wrong value, as written by hand
        return out

    def value(self, value: JSONValue) -> JSONValue:
        if isinstance(value, dict):
            return self.node(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


def key_paths(cls: type[Section], prefix: str = "") -> list[str]:
    """Every key a declared section has, as docs/rules.md names it (``signals[].kind``,
    ``evidence.annotations.fields``), a part before its keys."""
    out = []
    for f in msgspec.structs.fields(cls):
        path = f"{prefix}.{f.encode_name}" if prefix else f.encode_name
        out.append(path)
        for part in _structs(f.type)[:1]:
            out += key_paths(part, path + ("[]" if _is_list(f.type) else ""))
    return out


def _is_list(kind: object) -> bool:
    while typing.get_origin(kind) in (typing.Annotated, typing.Union, UnionType):
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    return typing.get_origin(kind) in (tuple, list)


def _structs(kind: object) -> list[type[Section]]:
    """The Structs a field's type holds (in a list, an optional, ...)."""
    if isinstance(kind, type) and issubclass(kind, Section):
        return [kind]
    return [s for arg in typing.get_args(kind) for s in _structs(arg)]


__all__ = ["Conditions", "DETAIL_PATTERN", "DefText", "KEY_ORDER", "MATCHER_PATTERN", "MatcherText", "RUNBOOK_PATTERN",
           "RuleFile", "SEVERITY_WORDS", "in_order", "key_paths", "matcher_def", "word"]
