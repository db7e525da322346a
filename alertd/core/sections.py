"""Configuration sections declared once, as msgspec Structs: each field's type, bounds, default and description
beside each other. The same declaration decodes a validated section (``Section.from_doc``) and generates the
JSON Schema that validates it (``section_schema``; alertd/config/schemafiles.py writes the checked-in files).

The schema is still what checks a file, through jsonschema: its errors carry the path that gives line and
column and the wording of alertd/schemas/messages.py. msgspec then only converts what passed."""
from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import Callable, Generic, Literal, Self, TypeVar, Union

import msgspec

from alertd.core.durations import parse_duration
from alertd.core.json_types import JSONObject, JSONValue, arr, obj

DURATION_REF = "#/$defs/duration"  # each schema file that holds a duration defines it (Prometheus durations)
T = TypeVar("T")


class Seconds(float):
    """A duration in seconds, written in the file as a Prometheus duration (``10s``, ``1h30m``, ``20ms``)."""

    @classmethod
    def from_config(cls, value: str) -> "Seconds":
        return cls(parse_duration(value).total_seconds())

    @staticmethod
    def config_schema() -> dict[str, object]:
        return {"$ref": DURATION_REF}


class Span(timedelta):
    """A duration as a timedelta, written in the file as a Prometheus duration."""

    @classmethod
    def from_config(cls, value: str) -> Self:
        return cls(seconds=parse_duration(value).total_seconds())

    @staticmethod
    def config_schema() -> dict[str, object]:
        return {"$ref": DURATION_REF}


class WrittenDefault(Generic[T]):
    """A default kept as the file would write it, so the generated schema shows ``"default": "10s"`` (or
    ``["30s", "2m"]``)."""

    def __init__(self, make: Callable[[], T], text: JSONValue):
        self.make, self.text = make, text

    def __call__(self) -> T:
        return self.make()


def written(read: Callable[[str], T], text: str) -> T:
    """The default of a field whose type reads its value from text (``from_config``), given as that text."""
    value: T = msgspec.field(default_factory=WrittenDefault(lambda: read(text), text))
    return value


def written_each(read: Callable[[str], T], texts: Sequence[str]) -> tuple[T, ...]:
    """The default of a list field, given as the texts its items are read from."""
    as_written: list[JSONValue] = [t for t in texts]
    value: tuple[T, ...] = msgspec.field(default_factory=WrittenDefault(lambda: tuple(map(read, texts)), as_written))
    return value


def enum_alone(node: JSONObject) -> JSONObject:
    """An enum's schema without its type, as the generated files state every enum: a wrong value is then one
    error naming the values, not a second one about its type."""
    return {k: v for k, v in node.items() if k != "type"} if "enum" in node else node


def declared_default(cls: type[Section], name: str, kind: type[T]) -> T:
    """The default a section declares for ``name``, for a runtime type that holds the same option: the value is
    then written once, in the declaration (TypeError when the field has none, or not of ``kind``)."""
    (field,) = [f for f in msgspec.structs.fields(cls) if f.name == name]
    value = field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default
    if not isinstance(value, kind):
        raise TypeError(f"{cls.__name__}.{name} declares no default of type {kind.__name__}")
    return value


def duration(default: str) -> Seconds:
    """The default of a ``Seconds`` field, as a Prometheus duration."""
    return written(Seconds.from_config, default)


class Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A configuration section (or a part of one); its docstring is the schema's description of it."""

    @classmethod
    def from_doc(cls, doc: Mapping[str, object] | None) -> Self:
        """The section of a document the generated schema accepted; absent keys take their defaults."""
        return msgspec.convert(dict(doc or {}), cls, strict=False, dec_hook=_decode)


def _decode(kind: type, value: object) -> object:
    """A type of a section's own reads its value with ``from_config`` (Seconds, Span, report's Weekday, a rule's
    matchers)."""
    read = getattr(kind, "from_config", None)
    if callable(read) and isinstance(value, (str, int, float, list, dict, datetime)):
        return read(value)
    if kind is Path and isinstance(value, str):
        return Path(value)
    if kind is object:  # a section another schema file checks, kept as it is
        return value
    raise NotImplementedError(f"{kind.__name__} is not a configuration type")


def _schema_hook(kind: type) -> dict[str, object]:
    schema = getattr(kind, "config_schema", None)
    if callable(schema):
        return dict(schema())
    if kind is Path:
        return {"type": "string"}
    if kind is object:  # a section another schema file checks (msgspec takes an empty schema for no hook)
        return {"description": "Any JSON value."}
    raise NotImplementedError(f"{kind.__name__} has no schema")


def section_schema(cls: type[Section], refs: Mapping[type[Section], str] | None = None) -> JSONObject:
    """The JSON Schema of a section with its parts inlined (as hand-written schemas had them, so an error's
    schema is the object it is about), enums in declaration order (their error lists them as declared). A part
    named in ``refs`` is referred to (``#/$defs/<name>``) instead, where its file defines it once."""
    generated = obj(msgspec.json.schema(cls, schema_hook=_schema_hook), cls.__name__)
    defs = obj(generated["$defs"], "$defs")
    return _Inliner(defs, refs or {}).part(cls, obj(defs[_def_name(generated["$ref"])], cls.__name__))


def _def_name(ref: JSONValue) -> str:
    return str(ref).rsplit("/", 1)[-1]


@dataclass(frozen=True)
class _Inliner:
    defs: JSONObject  # msgspec's schemas of the parts and enums
    refs: Mapping[type[Section], str]

    def part(self, cls: type[Section], node: JSONObject) -> JSONObject:
        """A part's schema: inlined, or a reference to its definition."""
        if cls in self.refs:
            return {"$ref": f"#/$defs/{self.refs[cls]}"}
        return _inline(cls, node, self)


def _inline(cls: type[Section], node: JSONObject, made: _Inliner) -> JSONObject:
    defs = made.defs
    out = {k: v for k, v in node.items() if k != "title" and not (k == "required" and not v)}
    properties = dict(obj(node.get("properties", {}), "properties"))
    for field in msgspec.structs.fields(cls):
        prop = dict(obj(properties[field.encode_name], field.name))
        kind, part_cls = _bare(field.type), part_of(field.type)
        if part_cls is not None:
            # An optional part (None: absent) is the part's schema alone: the document never holds null
            # (alertd.config.settings drops empty keys), and anyOf would blur the part's own errors.
            ref = prop.pop("$ref", None) or next(o["$ref"] for o in arr(prop.pop("anyOf")) if isinstance(o, dict) and "$ref" in o)
            if prop.get("default", 0) is None:
                del prop["default"]
            part = made.part(part_cls, obj(defs[_def_name(ref)], part_cls.__name__))
            prop = {**part, **prop}  # the field's own description before the part's docstring
        elif (item_cls := list_part(field.type)) is not None:
            prop = _alone(prop, field.name) if _optional(prop) else prop  # an optional list: the list alone
            items = obj(prop["items"], field.name)  # a list of parts: each item inlined as a part is
            prop["items"] = made.part(item_cls, obj(defs[_def_name(items["$ref"])], item_cls.__name__))
        elif _optional(prop):
            prop = _alone(prop, field.name)  # an optional option (None: absent): the option alone, likewise
        elif typing.get_origin(kind) is Literal:
            prop["enum"] = list(typing.get_args(kind))
        else:
            prop = obj(_resolved(prop, made, _named(field.type)), field.name)
        if isinstance(field.default_factory, WrittenDefault):
            prop["default"] = field.default_factory.text
        properties[field.encode_name] = prop
    # What a part says of itself as a whole (oneOf, minProperties), and keys another module declares for it (a
    # routing receiver's integrations), after its own
    whole = dict(getattr(cls, "SCHEMA", {}))
    out["properties"] = {**properties, **obj(whole.pop("properties", {}), f"{cls.__name__}.SCHEMA properties")}
    return {**out, **whole}


def _alone(prop: JSONObject, name: str) -> JSONObject:
    """An ``X | None`` field's schema as X's alone (with the field's own description)."""
    (given,) = [o for o in arr(prop["anyOf"]) if o != {"type": "null"}]
    rest = {k: v for k, v in prop.items() if k != "anyOf" and not (k == "default" and v is None)}
    return {**obj(given, name), **rest}


def _resolved(node: JSONValue, made: _Inliner, named: Mapping[str, type]) -> JSONValue:
    """``node`` with the references to the parts and enums it holds (a list of parts, a map to an enum)
    replaced by their schemas: a part inlined, an enum's values in declaration order."""
    if isinstance(node, list):
        return [_resolved(v, made, named) for v in node]
    if not isinstance(node, dict):
        return node
    name = _def_name(node.get("$ref"))
    out = enum_alone({k: _resolved(v, made, named) for k, v in node.items() if k != "$ref" or name not in named})
    if name not in named:  # not one of msgspec's (the file's own duration)
        return out
    kind = named[name]
    if isinstance(kind, type) and issubclass(kind, Section):
        return {**made.part(kind, obj(made.defs[name], name)), **out}
    enum = {k: v for k, v in obj(made.defs[name], name).items() if k != "title"}
    enum["enum"] = [member.value for member in typing.cast(type[Enum], kind)]
    return {**enum, **out}


def _named(kind: object) -> dict[str, type]:
    """The parts and enums a field's type holds, by the name msgspec gives their schema."""
    kind = _bare(kind)
    if isinstance(kind, type) and issubclass(kind, (Section, Enum)):
        return {kind.__name__: kind}
    out: dict[str, type] = {}
    for arg in typing.get_args(kind):
        out |= _named(arg)
    return out


def part_of(kind: object) -> type[Section] | None:
    """The Section a field holds (``Part`` or ``Part | None``), or None for an option."""
    kind = _bare(kind)
    members = [k for k in typing.get_args(kind) if k is not type(None)] if typing.get_origin(kind) in (Union, UnionType) \
        else [kind]
    if len(members) == 1 and isinstance(members[0], type) and issubclass(members[0], Section):
        return members[0]
    return None


def _optional(prop: JSONObject) -> bool:
    """Whether a field's schema is ``X or null`` (an ``X | None`` field)."""
    choices = prop.get("anyOf")
    return isinstance(choices, list) and len(choices) == 2 and {"type": "null"} in choices


def list_part(kind: object) -> type[Section] | None:
    """The Section a list field holds (``tuple[Part, ...]`` or ``tuple[Part, ...] | None``), or None."""
    kind = _bare(kind)
    if typing.get_origin(kind) in (Union, UnionType):
        members = [k for k in typing.get_args(kind) if k is not type(None)]
        kind = _bare(members[0]) if len(members) == 1 else kind
    args = typing.get_args(kind) if typing.get_origin(kind) in (tuple, list) else ()
    return part_of(args[0]) if args and (len(args) == 1 or args[1:] == (...,)) else None


def _bare(kind: object) -> object:
    """A field's type without ``Annotated``."""
    while typing.get_origin(kind) is typing.Annotated:
        kind = typing.get_args(kind)[0]
    return kind


def parts(cls: type[Section]) -> dict[str, type[Section]]:
    """The parts a section holds, by their key."""
    return {field.encode_name: part for field in msgspec.structs.fields(cls) if (part := part_of(field.type)) is not None}


def option_paths(cls: type[Section], prefix: str) -> list[str]:
    """Every option of a section as ``section.key`` (``classify.rules_api.ttl``), parts before their keys (a
    list's items' keys under the list's)."""
    paths = []
    for field in msgspec.structs.fields(cls):
        path, part = f"{prefix}.{field.encode_name}", part_of(field.type) or list_part(field.type)
        paths.append(path)
        if part is not None:
            paths += option_paths(part, path)
    return paths


__all__ = ["DURATION_REF", "Seconds", "Section", "Span", "declared_default", "duration", "enum_alone", "list_part",
           "option_paths", "part_of", "parts", "section_schema", "written", "written_each"]
