"""A copy of alert rules that fires and resolves within seconds, for tests against a real Prometheus."""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_RULES = REPO_ROOT / "deploy" / "prometheus" / "gpu-alerts.yml"

# Range windows of the shipped rules, shrunk so alerts fire and resolve within
# seconds at a 1 s scrape/evaluation interval. Unlisted durations are divided by 20
# (at least 5 s).
FAST_RANGES: dict[str, str] = {
    "1m": "5s",
    "2m": "10s",
    "5m": "15s",
    "10m": "30s",
    "15m": "30s",
    "30m": "1m",
    "1h": "1m",
}

_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = r"(?:\d+(?:ms|[smhdwy]))+"
# A range selector [5m] or a subquery range [1h:] / [1h:1m].
_RANGE_RE = re.compile(rf"\[({_DURATION})(?::({_DURATION})?)?\]")


def _seconds(duration: str) -> float:
    return sum(int(n) * _DURATION_UNITS[u] for n, u in re.findall(r"(\d+)(ms|[smhdwy])", duration))


def _fast_duration(duration: str, ranges: Mapping[str, str]) -> str:
    if duration in ranges:
        return ranges[duration]
    return f"{max(5, int(_seconds(duration) // 20))}s"


def fast_expr(expr: str, ranges: Mapping[str, str] = FAST_RANGES) -> str:
    """Shrink every range/subquery window in a PromQL expression; nothing else changes."""

    def sub(m: re.Match[str]) -> str:
        rng = _fast_duration(m.group(1), ranges)
        if ":" not in m.group(0):
            return f"[{rng}]"
        step = m.group(2)
        return f"[{rng}:{'1s' if step else ''}]"

    return _RANGE_RE.sub(sub, expr)


def derive_fast_rules(
    dst: str | Path,
    src: str | Path = SHIPPED_RULES,
    *,
    for_duration: str = "0s",
    ranges: Mapping[str, str] = FAST_RANGES,
) -> Path:
    """Write a copy of the alert rules for tests: every `for:` set to for_duration,
    range windows shrunk (see FAST_RANGES), group `interval` removed (the global
    evaluation interval applies). Expressions are otherwise identical."""
    doc = yaml.safe_load(Path(src).read_text())
    for group in doc.get("groups", []):
        group.pop("interval", None)
        for rule in group.get("rules", []):
            rule["expr"] = fast_expr(str(rule["expr"]), ranges)
            if "alert" in rule:
                rule["for"] = for_duration
                rule.pop("keep_firing_for", None)
    dst = Path(dst)
    dst.write_text(yaml.dump(doc, Dumper=_BlockDumper, sort_keys=False, width=1000))
    return dst


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (expressions) as `|` blocks, so the copy stays readable."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_representer)
