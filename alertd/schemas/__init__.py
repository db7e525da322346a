"""JSON Schemas for the webhook, the config and the rule files, and one validator entry point."""
from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

from alertd.core.errors import InvalidDocument, Problem
from alertd.core.yamlio import Marks, format_path, mark_for


EXTENDED = ("notify", "routing")  # their per-integration parts come from the integrations themselves


@functools.cache
def schema(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        resources.files(__package__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8"))
    if name in EXTENDED:
        from alertd.integrations.registry import extend_schema

        extend_schema(name, doc)
    return doc


@functools.cache
def registry() -> Registry:
    """Every shipped schema by its $id, so one schema can $ref another (config -> notify.schema.json)."""
    resources_ = []
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(".schema.json"):
            doc = schema(entry.name.removesuffix(".schema.json"))
            resources_.append((doc["$id"], Resource.from_contents(doc)))
    return Registry().with_resources(resources_)


@functools.cache
def validator(name: str) -> Draft202012Validator:
    s = schema(name)
    Draft202012Validator.check_schema(s)
    return Draft202012Validator(s, registry=registry())


def describe(error: ValidationError) -> str:
    """A message that names the key, not the schema internals."""
    where = format_path(tuple(error.absolute_path)) or "document"
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"{where}: unknown key(s) {', '.join(map(repr, extra))}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not one of {error.validator_value}"
    return f"{where}: {error.message}"


def problems(name: str, doc: Any, source: str, marks: Marks | None = None) -> list[Problem]:
    out = []
    for error in sorted(validator(name).iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        line, col = mark_for(marks or {}, tuple(error.absolute_path))
        out.append(Problem(source, describe(error), line, col, format_path(tuple(error.absolute_path))))
    return out


def validate_document(name: str, doc: Any, source: str, marks: Marks | None = None) -> None:
    found = problems(name, doc, source, marks)
    if found:
        raise InvalidDocument(found)
