"""Errors that name what is wrong and where, like ``promtool check``."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    source: str
    message: str
    line: int = 0  # 1-based; 0 when unknown
    column: int = 0
    path: str = ""  # JSON-pointer-like location inside the document, e.g. "routes[2].match[0]"

    def __str__(self) -> str:
        where = self.source
        if self.line:
            where += f":{self.line}:{self.column or 1}"
        where_in = f" (at {self.path})" if self.path and not self.message.startswith(self.path) else ""
        return f"{where}: {self.message}{where_in}"


class InvalidDocument(ValueError):
    """A config or rule file that cannot be used; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))
