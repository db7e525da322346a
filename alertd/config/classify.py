"""The ``classify`` section: where the recording rules that alerts' expressions use come from, parsed once
with the configuration (alertd/app/recording_rules.py reads them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from alertd.core.durations import parse_duration


class RulesApiDoc(TypedDict, total=False):
    prometheus: list[str]
    ttl: str
    retry: str
    timeout: str
    wait: str
    max_bytes: int


class ClassifyDoc(TypedDict, total=False):
    """The ``classify`` config section as classify.schema.json admits it."""

    prometheus_rules: list[str]
    rules_api: RulesApiDoc


@dataclass(frozen=True, slots=True)
class RulesApiSettings:
    """``classify.rules_api``: the Prometheus servers whose ``/api/v1/rules`` may be asked, and how."""

    prometheus: tuple[str, ...] = ()
    ttl: float = 600.0
    retry: float = 60.0
    timeout: float = 5.0
    wait: float = 2.0
    max_bytes: int = 8 * 1024 * 1024

    @classmethod
    def from_doc(cls, doc: RulesApiDoc | None) -> "RulesApiSettings":
        doc, base = doc or {}, cls()

        def secs(value: str | None, default: float) -> float:
            return parse_duration(value).total_seconds() if value is not None else default

        return cls(prometheus=tuple(str(p).rstrip("/") for p in doc.get("prometheus") or ()),
                   ttl=secs(doc.get("ttl"), base.ttl), retry=secs(doc.get("retry"), base.retry),
                   timeout=secs(doc.get("timeout"), base.timeout), wait=secs(doc.get("wait"), base.wait),
                   max_bytes=int(doc.get("max_bytes", base.max_bytes)))


@dataclass(frozen=True, slots=True)
class ClassifySettings:
    """``classify``: Prometheus rule files (globs, relative to the configuration file) and the rules API."""

    prometheus_rules: tuple[str, ...] = ()
    rules_api: RulesApiSettings = field(default_factory=RulesApiSettings)

    @classmethod
    def from_doc(cls, doc: ClassifyDoc | None) -> "ClassifySettings":
        doc = doc or {}
        return cls(prometheus_rules=tuple(str(p) for p in doc.get("prometheus_rules") or ()),
                   rules_api=RulesApiSettings.from_doc(doc.get("rules_api")))


__all__ = ["ClassifySettings", "RulesApiSettings"]
