"""The Prometheus text exposition format, as the simulated exporters write it."""
from __future__ import annotations

from collections.abc import Iterable


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{_escape(str(v))}"' for k, v in pairs)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class Exposition:
    """One scrape's body in the Prometheus text format, built family by family."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: Iterable[tuple[str, str]], value: float) -> None:
        self._lines.append(f"{name}{{{_labels(labels)}}} {_num(value)}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
