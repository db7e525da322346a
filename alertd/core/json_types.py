"""JSON as it crosses alertd's edges (the store's documents, HTTP bodies, Kubernetes objects, annotations,
YAML documents after schema validation).

``JSONValue`` is any JSON document; readers narrow it with the helpers below instead of assuming a shape,
so a value of the wrong type reads as absent (``""``, ``0``, ``None``, an empty list) rather than raising
in a renderer; ``obj`` and ``arr`` raise instead, naming where, for documents whose shape is required.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence, TypeAlias, TypeVar, Union, cast

JSONValue: TypeAlias = Union[None, bool, int, float, str, list["JSONValue"], dict[str, "JSONValue"]]
JSONObject: TypeAlias = dict[str, JSONValue]
JSONArray: TypeAlias = list[JSONValue]
T = TypeVar("T")


def as_json(value: Mapping[str, str] | Sequence[str] | Sequence[int] | Sequence[Mapping[str, str]]) -> JSONValue:
    """Labels, names, ids: JSON as they are, shared rather than copied (documents written for every member of
    every step). Only the type changes; what holds the result must not modify it."""
    return cast(JSONValue, value)


def as_object(value: object) -> JSONObject:
    """The value when it is an object, else an empty one: for a part that may be missing. Where the part
    must be there, :func:`obj` raises instead."""
    return cast(JSONObject, value) if isinstance(value, dict) else {}


def as_array(value: object) -> JSONArray:
    """The value when it is an array, else an empty one (absent is the same as empty). Where the array must be
    there, :func:`arr` raises instead."""
    return cast(JSONArray, value) if isinstance(value, list) else []


def as_text(value: object, default: str = "") -> str:
    """The value itself when it is a string, else ``default``. Unlike :func:`text`, which reads a member, a
    number is not written out: for a value that must be text as it is (a command's argument)."""
    return value if isinstance(value, str) else default


def obj(value: object, where: str = "value") -> JSONObject:
    """The value as a JSON object, or TypeError naming ``where``: for a document whose shape is required
    (:func:`as_object` reads a wrong type as empty)."""
    if not isinstance(value, dict):
        raise TypeError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return cast(JSONObject, value)


def arr(value: object, where: str = "value") -> JSONArray:
    """The value as a JSON array, or TypeError naming ``where`` (:func:`as_array` reads a wrong type as
    empty)."""
    if not isinstance(value, list):
        raise TypeError(f"{where}: expected a JSON array, got {type(value).__name__}")
    return cast(JSONArray, value)


def member(value: object, key: str) -> JSONObject:
    """``value[key]`` when both are JSON objects, else an empty object (absent is the same as empty)."""
    return as_object(as_object(value).get(key))


def objects(value: object) -> list[JSONObject]:
    """The objects of an array (other items are skipped)."""
    return [v for v in as_array(value) if isinstance(v, dict)]


def each(read: Callable[[JSONObject], T], value: object) -> tuple[T, ...]:
    """``read`` of each object of an array, in order (other items are skipped): typed values from the JSON
    they are stored as, e.g. ``each(Taint.from_json, spec.get("taints"))``."""
    return tuple(read(v) for v in objects(value))


def text(obj: JSONObject, key: str, default: str = "") -> str:
    """An object's string member; numbers are written out (an id or count a writer stored as a number reads
    as its text), anything else reads as ``default``. For a bare value, :func:`as_text`."""
    value = obj.get(key)
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return default


def required_text(obj: JSONObject, key: str) -> str:
    """A string member that must be there: KeyError when absent, ValueError when not a string."""
    value = obj[key]
    if not isinstance(value, str):
        raise ValueError(f"{key}: a string, not {type(value).__name__}")
    return value


def optional_text(obj: JSONObject, key: str) -> str | None:
    """A string member, or None when absent or null."""
    value = obj.get(key)
    return None if value is None else text(obj, key)


def integer(obj: JSONObject, key: str, default: int = 0) -> int:
    """An integer member (numeric strings too); anything else reads as ``default``."""
    value = obj.get(key)
    if isinstance(value, bool) or value is None:
        return default
    try:
        return int(float(value)) if isinstance(value, (int, float, str)) else default
    except ValueError:
        return default


def optional_integer(obj: JSONObject, key: str) -> int | None:
    """An integer member, or None when absent, null or not a number."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def number(obj: JSONObject, key: str, default: float = 0.0) -> float:
    """A numeric member (numeric strings too); anything else reads as ``default``."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default
    try:
        return float(value)
    except ValueError:
        return default


def strings(value: JSONValue) -> list[str]:
    """The strings of an array (other items are skipped)."""
    return [v for v in as_array(value) if isinstance(v, str)]


def integers(value: JSONValue) -> list[int]:
    """The integers of an array (other items, booleans among them, are skipped)."""
    return [v for v in as_array(value) if isinstance(v, int) and not isinstance(v, bool)]


def string_map(value: JSONValue) -> dict[str, str]:
    """An object's scalar members as text (nested values are skipped)."""
    return {k: str(v) for k, v in as_object(value).items()
            if isinstance(v, (str, int, float)) and not isinstance(v, bool)}


__all__ = ["JSONArray", "JSONObject", "JSONValue", "arr", "as_array", "as_json", "as_object", "as_text", "each", "integer",
           "integers", "member", "number", "obj", "objects", "optional_integer", "optional_text", "required_text", "string_map",
           "strings", "text"]
