"""What a section's parser reports to while it builds typed rules from a schema-valid document
(alertd.rules.ruleset's checker: problems with the file's line and column)."""
from __future__ import annotations

from typing import Iterable, Protocol

from alertd.core.matchers import Matcher
from alertd.core.yamlio import Path_


class Checker(Protocol):
    def where(self, path: Path_) -> str:
        """``file:line`` of the value at ``path``."""

    def problem(self, path: Path_, message: str) -> None: ...

    def matchers(self, items: Iterable[str] | None, path: Path_) -> tuple[Matcher, ...]:
        """Alertmanager matcher strings, parsed; a bad one is a problem at its index."""


__all__ = ["Checker"]
