"""JSON Schemas for the webhook, the config and the rule files, and one validator entry point."""
from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Collection

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from alertd.core.json_types import JSONObject, obj
from alertd.core.errors import InvalidDocument, Problem
from alertd.core.yamlio import Marks, Path_, format_path, mark_for
from alertd.schemas.messages import describe, describe_secret, meant

__all__ = ["describe", "problems", "schema", "validate_document", "validator"]


@functools.cache
def schema(name: str) -> JSONObject:
    doc = obj(json.loads(resources.files(__package__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")),
              f"{name}.schema.json")
    return doc


@functools.cache
def registry() -> Registry:
    """Every shipped schema by its $id, so one schema can $ref another (config -> notify.schema.json)."""
    resources_ = []
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(".schema.json"):
            doc = schema(entry.name.removesuffix(".schema.json"))
            resources_.append((str(doc["$id"]), Resource.from_contents(doc)))
    return Registry().with_resources(resources_)


@functools.cache
def validator(name: str) -> Draft202012Validator:
    s = schema(name)
    Draft202012Validator.check_schema(s)
    return Draft202012Validator(s, registry=registry())


def problems(name: str, doc: object, source: str, marks: Marks | None = None,
             secret_paths: Collection[Path_] = ()) -> list[Problem]:
    """Every schema error of ``doc``; those at ``secret_paths`` (values read from secret files) without the value."""
    out = []
    for error in sorted(map(meant, validator(name).iter_errors(doc)), key=lambda e: list(map(str, e.absolute_path))):
        path = tuple(error.absolute_path)
        line, col = mark_for(marks or {}, path)
        secret = any(path[:len(p)] == tuple(p) for p in secret_paths)
        out.append(Problem(source, describe_secret(error) if secret else describe(error), line, col, format_path(path)))
    return out


def validate_document(name: str, doc: object, source: str, marks: Marks | None = None) -> None:
    found = problems(name, doc, source, marks)
    if found:
        raise InvalidDocument(found)
