"""No function in alertd/ runs past 60 lines unless a reason is written beside it.

A long function hides its steps; splitting it names them. Where one really is better read
in one piece (one table, one dispatch), a ``# long: <why>`` comment on its ``def`` line or
the line above says so, and a reader sees the reason where the length is.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "alertd"
LIMIT = 60
REASON = re.compile(r"#\s*long:\s*\S")


def long_functions(path: Path) -> list[tuple[int, str, int]]:
    """(line of the def, name, length in lines) of each function in ``path`` longer than LIMIT."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(node.lineno, node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > LIMIT]


def has_reason(lines: list[str], def_line: int, decorators: int = 0) -> bool:
    """A ``# long:`` comment on the def line (1-based) or the line just above it or its decorators."""
    candidates = [def_line, def_line - 1 - decorators]
    return any(1 <= n <= len(lines) and REASON.search(lines[n - 1]) for n in candidates)


def offenders(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines), filename=rel)
        decorated = {node.lineno: len(node.decorator_list) for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for line, name, length in long_functions(path):
            if not has_reason(lines, line, decorated.get(line, 0)):
                found.append(f"{rel}:{line} {name} ({length} lines)")
    return found


def test_no_function_over_the_limit_without_a_reason() -> None:
    found = offenders()
    assert not found, (f"functions over {LIMIT} lines without a '# long: <why>' comment on or above "
                       "their def line (split them into named steps, or say why not):\n  " + "\n  ".join(found))


def test_the_check_sees_a_long_function_and_its_reason(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "pkg").mkdir()
    bare = tmp_path / "pkg" / "bare.py"
    bare.write_text(f"def big():\n{body}\n\n\ndef small():\n    return 1\n")
    reasoned = tmp_path / "pkg" / "reasoned.py"
    reasoned.write_text(f"# long: one table of cases\n@staticmethod\ndef big():\n{body}\n")
    inline = tmp_path / "pkg" / "inline.py"
    inline.write_text(f"def big():  # long: one dispatch over every section\n{body}\n")
    assert offenders(tmp_path / "pkg") == [f"pkg/bare.py:1 big ({LIMIT + 1} lines)"]
