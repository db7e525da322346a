"""JSON values as the type checker sees them: what json.loads returns, what a YAML document holds after
schema validation, what an HTTP API answers. Narrow with the helpers before reading a member."""
from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]
JSONObject: TypeAlias = dict[str, JSONValue]
JSONArray: TypeAlias = list[JSONValue]


def obj(value: object, where: str = "value") -> JSONObject:
    """`value` as a JSON object, or TypeError naming `where`."""
    if not isinstance(value, dict):
        raise TypeError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def arr(value: object, where: str = "value") -> JSONArray:
    """`value` as a JSON array, or TypeError naming `where`."""
    if not isinstance(value, list):
        raise TypeError(f"{where}: expected a JSON array, got {type(value).__name__}")
    return value


def items(value: object) -> JSONArray:
    """`value` when it is a JSON array, else an empty one (absent is the same as empty)."""
    return value if isinstance(value, list) else []


def objects(value: object) -> list[JSONObject]:
    """The JSON objects in `value` when it is an array; anything else in it, or a non-array, is skipped."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def text(value: object, default: str = "") -> str:
    """`value` when it is a string, else `default`."""
    return value if isinstance(value, str) else default


def member(value: object, key: str) -> JSONObject:
    """`value[key]` when both are JSON objects, else an empty object (absent is the same as empty)."""
    if isinstance(value, dict):
        got = value.get(key)
        if isinstance(got, dict):
            return got
    return {}
