"""A default is chosen once, where its option is declared (a Section field). A runtime type that holds the same
option (the settings a notifier reads, the model a section builds) takes the declared value or no default at
all; it never writes the value again, where the two could drift."""
from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import pkgutil
import textwrap
from collections.abc import Iterable, Iterator
from datetime import timedelta

import msgspec

import alertd
from alertd.core.sections import Section, declared_default


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def _declared() -> dict[str, list[tuple[str, object]]]:
    """Field name -> (section, default) of every declared option with a default worth comparing."""
    out: dict[str, list[tuple[str, object]]] = {}
    for cls in _subclasses(Section):
        for f in msgspec.structs.fields(cls):
            if f.default_factory is not msgspec.NODEFAULT:
                value = f.default_factory()
            elif f.default is not msgspec.NODEFAULT:
                value = f.default
            else:
                continue
            if isinstance(value, (bool, int, float, str, timedelta, enum.Enum)) and value not in (0, "", False, None):
                out.setdefault(f.name, []).append((cls.__name__, value))
    return out


def _written(node: ast.expr, names: dict[str, object]) -> bool:
    """A value written out: a constant, timedelta(...) of constants, or an enum member (``Role.READ``)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _written(node.operand, names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "timedelta":
        return all(_written(a, names) for a in (*node.args, *(k.value for k in node.keywords)))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        root = names.get(node.value.id)
        return inspect.isclass(root) and issubclass(root, enum.Enum)
    return False


def _defaults_written(source: str) -> dict[str, ast.expr]:
    (body,) = [n for n in ast.parse(textwrap.dedent(source)).body if isinstance(n, ast.ClassDef)]
    return {n.target.id: n.value for n in body.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None}


def written_again(classes: Iterable[tuple[type, str, dict[str, object]]]) -> list[str]:
    """``classes``: each dataclass with its source and the names its module defines."""
    classes = list(classes)  # (importing them first: the declarations are those of every module imported)
    declared = _declared()
    found = []
    for cls, source, names in classes:
        written = _defaults_written(source)
        for f in dataclasses.fields(cls):
            if f.default is dataclasses.MISSING or f.name not in written or not _written(written[f.name], names):
                continue
            found += [f"{cls.__module__}.{cls.__name__}.{f.name} = {f.default!r}: declared by {section}"
                      for section, value in declared.get(f.name, []) if value == f.default]
    return found


def _dataclasses() -> Iterator[tuple[type, str, dict[str, object]]]:
    for m in pkgutil.walk_packages(alertd.__path__, "alertd."):
        module = importlib.import_module(m.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__:
                yield cls, inspect.getsource(cls), vars(module)


def test_no_runtime_type_writes_a_declared_default_again():
    assert written_again(_dataclasses()) == []


FIXTURE = """
@dataclasses.dataclass
class RuntimeSettings:
    timeout: float = 10.0  # RequestOptions declares 10s
    lifetime: timedelta = timedelta(days=7)  # SlackLinks declares 7d
    default_role: Role = Role.READ  # TrustedProxySettings declares read
    debounce: timedelta = SlackSection().debounce  # read from the declaration: not written again
"""


def test_a_default_written_again_is_found():
    from alertd.config.credentials import Role
    from alertd.integrations.slack.integration import SlackSection

    names: dict[str, object] = {"dataclasses": dataclasses, "timedelta": timedelta, "Role": Role,
                                "SlackSection": SlackSection}
    exec(FIXTURE, names)
    found = written_again([(names["RuntimeSettings"], FIXTURE, names)])  # type: ignore[list-item]
    named = {f.split(" = ")[0].rsplit(".", 1)[-1] + " by " + f.rsplit(" ", 1)[-1] for f in found}
    assert {"timeout by RequestOptions", "lifetime by SlackLinks", "default_role by TrustedProxySettings"} <= named
    assert not any(".debounce" in f for f in found)


def test_declared_default_reads_the_declaration():
    from alertd.integrations.slack.integration import SlackLinks

    assert declared_default(SlackLinks, "lifetime", timedelta) == timedelta(days=7)
