"""Where the shipped rules live, and which rules directory a service uses when none is configured."""
from __future__ import annotations

from pathlib import Path

SHIPPED_RULES = Path(__file__).resolve().parents[2] / "rules"


def default_rule_paths() -> list[str]:
    for candidate in (Path("rules"), SHIPPED_RULES, Path("/etc/alertd/rules")):
        if candidate.is_dir():
            return [str(candidate)]
    return ["rules"]
