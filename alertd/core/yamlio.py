"""YAML loading that remembers where every value came from.

Rule authors get ``file:line:column`` in errors, so the loader keeps a map
from document path (``("routes", 2, "match")``) to the YAML position.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from alertd.core.errors import InvalidDocument, Problem

Path_ = tuple[Any, ...]
# Where each value of a loaded document starts: its path -> (line, column), both 1-based.
Marks = dict[Path_, tuple[int, int]]
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# libyaml's parser where PyYAML was built with it: composing the shipped Xid catalog takes 18 instead of 190 ms,
# and its nodes carry the same marks.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Located(dict[Any, Any]):
    """A loaded document: the data plus ``marks`` (path -> (line, column))."""


def _build(node: yaml.Node, path: Path_, marks: Marks, constructor: yaml.constructor.SafeConstructor) -> Any:
    marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        constructor.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = _scalar(key_node, constructor)
            if key in out:
                raise InvalidDocument(
                    [Problem("", f"duplicate key {key!r}", key_node.start_mark.line + 1, key_node.start_mark.column + 1)]
                )
            out[key] = _build(value_node, path + (key,), marks, constructor)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(child, path + (i,), marks, constructor) for i, child in enumerate(node.value)]
    return _scalar(node, constructor)


def _scalar(node: yaml.Node, constructor: yaml.constructor.SafeConstructor) -> Any:
    """A scalar's value; one YAML resolves to a value Python cannot hold (``2026-02-30T00:00:00Z``, a date
    without its day) is a problem at its place, not a crash."""
    try:
        return constructor.construct_object(node, deep=True)
    except ValueError as exc:
        kind = str(node.tag).rsplit(":", 1)[-1]
        raise InvalidDocument([Problem("", f"{node.value!r} is not a valid {kind}: {exc} (quote it to keep it as "
                                           "text)", node.start_mark.line + 1, node.start_mark.column + 1)]) from None


def parse_yaml(text: str, source: str = "<string>") -> tuple[Any, Marks]:
    marks: Marks = {}
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise InvalidDocument([Problem(source, f"YAML syntax: {exc.problem}", line, col)]) from None
    if node is None:
        return None, marks
    constructor = yaml.constructor.SafeConstructor()
    try:
        data = _build(node, (), marks, constructor)
    except InvalidDocument as exc:
        raise InvalidDocument([Problem(source, p.message, p.line, p.column) for p in exc.problems]) from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        raise InvalidDocument([Problem(source, str(exc.problem), mark.line + 1 if mark else 0)]) from None
    return data, marks


def load_yaml(path: Path | str, *, with_marks: bool = False) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidDocument([Problem(str(p), f"cannot read: {exc}")]) from None
    data, marks = parse_yaml(text, str(p))
    return (data, marks) if with_marks else data


def interpolate_env(value: Any, env: Mapping[str, str] | None = None, *, path: Path_ = (),
                    missing: list[tuple[Path_, str]] | None = None) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string (secrets stay out of files)."""
    env = os.environ if env is None else env
    if isinstance(value, dict):
        return {k: interpolate_env(v, env, path=path + (k,), missing=missing) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate_env(v, env, path=path + (i,), missing=missing) for i, v in enumerate(value)]
    if isinstance(value, str):
        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            if missing is not None:
                missing.append((path, name))
            return ""

        return _ENV.sub(repl, value)
    return value


def mark_for(marks: Marks, path: Path_) -> tuple[int, int]:
    """The closest known position for a path (falls back to its parents)."""
    p = tuple(path)
    while p not in marks and p:
        p = p[:-1]
    return marks.get(p, (0, 0))


def format_path(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
