"""Rule-file sections declared once, as the configuration's sections are (alertd/core/sections.py): a
section's Structs give its schema file (alertd/config/schemafiles.py writes it), its defaults and the typed
document its parser reads.

The schema still checks a section first (its errors carry file:line:col and the words of
alertd/schemas/messages.py). What the schema cannot see, a duration out of order or out of range, is
reported here at its place and left to its default, as the parsers did before."""
from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from typing import TypeVar

import msgspec

from alertd.core.durations import DurationError, parse_duration
from alertd.core.json_types import JSONObject
from alertd.core.sections import Section, Span, list_part, part_of
from alertd.core.yamlio import Path_
from alertd.integrations.base import DURATION_SCHEMA
from alertd.rules.checker import Checker
from alertd.schemas.declared import MATCHER_START

S = TypeVar("S", bound=Section)
MATCHERS_REF = "#/$defs/matchers"
MATCHERS_SCHEMA: JSONObject = {
    "type": "array",
    "description": "Alertmanager matchers, ANDed: name=\"v\", name!=\"v\", name=~\"re\", name!~\"re\".",
    "items": {"type": "string", "pattern": MATCHER_START},
}
RULE_DEFS: JSONObject = {
    "duration": {**DURATION_SCHEMA, "description": "Prometheus duration, e.g. 30s, 5m, 1h30m."},
    "matchers": MATCHERS_SCHEMA,
}


class Matchers(tuple[str, ...]):
    """Alertmanager matcher strings as written (``signal=~"xid|ecc"``); the parser reads them with their place,
    so a bad one is a problem at its index."""

    @classmethod
    def from_config(cls, value: list[str]) -> "Matchers":
        return cls(value)

    @staticmethod
    def config_schema() -> dict[str, object]:
        return {"$ref": MATCHERS_REF}


class TextSpan(Span):
    """A duration its schema only asks to be text: its parser reports a bad one (with the parser's words)."""

    @staticmethod
    def config_schema() -> dict[str, object]:
        return {"type": "string"}


def matchers(*texts: str) -> Matchers:
    """A matchers default: these texts."""
    return Matchers(texts)


def decode(cls: type[S], doc: Mapping[str, object] | None, path: Path_, check: Checker) -> S:
    """The section of a schema-valid document; a duration the schema passed but alertd cannot hold is a
    problem at its place, and its field keeps its default."""
    return cls.from_doc(_readable(cls, dict(doc or {}), path, check))


def _readable(cls: type[Section], doc: dict[str, object], path: Path_, check: Checker) -> dict[str, object]:
    out = dict(doc)
    for field in _fields(cls):
        value, at = doc.get(field.encode_name), path + (field.encode_name,)
        if value is None:
            continue
        part, items = part_of(field.type), list_part(field.type)
        if _is_span(field.type) and isinstance(value, str):
            try:
                parse_duration(value)
            except DurationError as exc:
                check.problem(at, str(exc))
                if field.required:
                    out[field.encode_name] = "0"  # what the parsers read a bad one as, where there is no default
                else:
                    del out[field.encode_name]
        elif part is not None and isinstance(value, dict):
            out[field.encode_name] = _readable(part, value, at, check)
        elif items is not None and isinstance(value, list):
            out[field.encode_name] = [_readable(items, v, at + (i,), check) if isinstance(v, dict) else v
                                      for i, v in enumerate(value)]
    return out


@functools.cache
def _fields(cls: type[Section]) -> tuple[msgspec.structs.FieldInfo, ...]:
    """A declaration's fields (msgspec reads its annotations on every call: once per class is enough)."""
    return msgspec.structs.fields(cls)


def _is_span(kind: object) -> bool:
    """Whether a field holds a duration (``Span``, ``Annotated[Span, ...]``, ``Span | None``)."""
    return (isinstance(kind, type) and issubclass(kind, Span)) or any(_is_span(k) for k in typing.get_args(kind))


__all__ = ["MATCHERS_SCHEMA", "Matchers", "RULE_DEFS", "TextSpan", "decode", "matchers"]
