"""Per-key reference tables for docs/rules.md, generated from the JSON Schemas.

    python -m alertd.authoring.schemadoc                     # print every table
    python -m alertd.authoring.schemadoc --write docs/rules.md  # refresh the tables in place
    python -m alertd.authoring.schemadoc --check docs/rules.md  # exit 1 if they are stale

In the document each table sits between ``<!-- BEGIN schemadoc NAME -->`` and
``<!-- END schemadoc NAME -->``; tests/unit/test_docs_rules.py fails when a
table differs from the schema, so the reference cannot drift from the loader.
"""
from __future__ import annotations

import argparse
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Iterator

from alertd.core.json_types import JSONObject, JSONValue, as_text, member, objects
from alertd.schemas import schema

# A JSON Schema node as loaded from alertd/schemas/*.json.
Schema = JSONObject

# The rule language: sections of rule files, then the test file format.
SCHEMAS = ("xid-catalog", "recovery-actions", "sxid-catalog", "signals", "evidence", "correlation", "routing", "history",
           "rma", "remediation", "ruletest")
BLOCK = re.compile(r"(<!-- BEGIN schemadoc (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- END schemadoc (?P=name) -->)", re.S)


def available() -> list[str]:
    files = resources.files("alertd.schemas")
    return [n for n in SCHEMAS if files.joinpath(f"{n}.schema.json").is_file()]


def _resolve(node: Schema, root: Schema) -> tuple[Schema, str]:
    """Follow a local $ref; return the target and the name of the definition (or "")."""
    ref = as_text(node.get("$ref"))
    if ref.startswith("#/$defs/"):
        name = ref.rsplit("/", 1)[1]
        target = member(member(root, "$defs"), name)
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return merged, name
    return node, ""


def _list(value: JSONValue) -> list[JSONValue]:
    return value if isinstance(value, list) else []


def _type(node: Schema, root: Schema) -> str:
    node, ref = _resolve(node, root)
    if ref and node.get("type") != "object" and "properties" not in node:
        if node.get("type") == "array":
            return f"list of {_type(member(node, 'items'), root)}" if ref == "matchers" else ref
        return ref
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in _list(node["enum"]))
    if "const" in node:
        return f"`{node['const']}`"
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(dict.fromkeys(_type(alt, root) for alt in objects(node[key])))
    kind = node.get("type", "")
    if isinstance(kind, list):
        names = [str(k) for k in kind if k != "array"]
        out = " or ".join(names)
        if "array" in kind:
            out += f" or list of {_type(member(node, 'items'), root)}"
        return out
    if kind == "array":
        return f"list of {_type(member(node, 'items'), root)}"
    if kind == "object":
        if "properties" in node:
            return "mapping"
        extra = node.get("additionalProperties")
        return f"map of {_type(extra, root)}" if isinstance(extra, dict) else "mapping"
    if "not" in node and as_text(node.get("description")).startswith("RFC 3339"):
        return "time"
    return as_text(kind) or "any"


def _description(node: Schema, root: Schema) -> str:
    own = node.get("description")
    if own is None:
        resolved, _ = _resolve(node, root)
        own = resolved.get("description", "")
    flat = " ".join(str(own).split())
    return flat.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _rows(node: Schema, root: Schema, path: str, required: bool) -> Iterator[tuple[str, str, str]]:
    resolved, _ = _resolve(node, root)
    yield path, _type(node, root) + (" (required)" if required else ""), _description(node, root)
    yield from _children(resolved, root, path)


def _children(node: Schema, root: Schema, path: str) -> Iterator[tuple[str, str, str]]:
    kind = node.get("type")
    if kind == "array" or (isinstance(kind, list) and "array" in kind):
        items, _ = _resolve(member(node, "items"), root)
        if "properties" in items:
            yield from _properties(items, root, path + "[]")
    elif "properties" in node:
        yield from _properties(node, root, path)
    for alt in objects(node.get("oneOf")) + objects(node.get("anyOf")):  # e.g. slack: "#chan" or {channels: [...]}
        alt, _ = _resolve(alt, root)
        if "properties" in alt:
            yield from _properties(alt, root, path)


def _properties(node: Schema, root: Schema, prefix: str) -> Iterator[tuple[str, str, str]]:
    required = set(_list(node.get("required")))
    for name, sub in member(node, "properties").items():
        if not isinstance(sub, dict):
            continue
        path = f"{prefix}.{name}" if prefix else name
        yield from _rows(sub, root, path, name in required)


def rows(name: str) -> list[tuple[str, str, str]]:
    root = schema(name)
    return list(_properties(root, root, ""))


def table(name: str) -> str:
    lines = ["| Key | Type | Description |", "|---|---|---|"]
    for path, kind, described in rows(name):
        lines.append(f"| `{path}` | {kind} | {described} |")
    return "\n".join(lines) + "\n"


def property_names(name: str) -> set[str]:
    """Every property name a schema defines, at any depth (for the docs test)."""
    out: set[str] = set()

    def walk(value: JSONValue) -> None:
        if isinstance(value, dict):
            for key, sub in member(value, "properties").items():
                out.add(key)
                walk(sub)
            for key, sub in value.items():
                if key != "properties":
                    walk(sub)
        elif isinstance(value, list):
            for sub in value:
                walk(sub)

    walk(schema(name))
    return out


def render_all() -> str:
    return "\n".join(f"<!-- BEGIN schemadoc {n} -->\n{table(n)}<!-- END schemadoc {n} -->\n" for n in available())


def refresh(text: str) -> tuple[str, list[str]]:
    """The document with every schemadoc block regenerated, and the names of blocks that changed."""
    changed: list[str] = []

    def repl(m: re.Match[str]) -> str:
        name = m.group("name")
        body = table(name) if name in available() else m.group("body")
        if body != m.group("body"):
            changed.append(name)
        return m.group(1) + body + m.group(4)

    return BLOCK.sub(repl, text), changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m alertd.authoring.schemadoc", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="FILE", help="regenerate the schemadoc blocks of FILE in place")
    group.add_argument("--check", metavar="FILE", help="exit 1 if a schemadoc block of FILE is stale or missing")
    args = parser.parse_args(argv)
    if not args.write and not args.check:
        sys.stdout.write(render_all())
        return 0
    path = Path(args.write or args.check)
    text = path.read_text(encoding="utf-8")
    new, changed = refresh(text)
    missing = [n for n in available() if f"<!-- BEGIN schemadoc {n} -->" not in text]
    if args.write:
        if new != text:
            path.write_text(new, encoding="utf-8")
        for n in missing:
            print(f"{path}: no block for schema {n!r}; add <!-- BEGIN schemadoc {n} --> ... <!-- END schemadoc {n} -->",
                  file=sys.stderr)
        print(f"{path}: {len(changed)} table(s) updated", file=sys.stderr)
        return 1 if missing else 0
    for n in changed:
        print(f"{path}: the {n} table is stale; run python -m alertd.authoring.schemadoc --write {path}", file=sys.stderr)
    for n in missing:
        print(f"{path}: no table for schema {n!r}", file=sys.stderr)
    return 1 if changed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
