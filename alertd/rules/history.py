"""History rules (rules/history.yml): what a GPU's and a node's past makes of a new or changed incident.

One definition serves both readers: the judge (alertd/engine/judge.py) turns the rules with an ``action``
into verdicts on incidents; the rules marked ``rma`` are the RMA candidate policy (alertd/rules/rma.py
evaluates them as ``RmaRule``s for /ui/rma, ``alertd rma`` and the report's lemon GPUs).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypedDict

from alertd.core.vocabulary import VerdictKind
from alertd.core.yamlio import Path_
from alertd.rules.rma import Condition, ConditionDoc, RmaRule, report_duplicate_names

REPEAT_OFFENDER, REPAIR_NOT_HELD, LEMON_NODE = VerdictKind
DEFAULT_WINDOW = timedelta(days=7)
DEFAULT_WITHIN = timedelta(days=7)
DEFAULT_COUNT = 3


class Checker(Protocol):
    """What parsing needs of the rule loader's checker (alertd/rules/ruleset.py)."""

    def problem(self, path: Path_, message: str) -> None: ...

    def duration(self, value: str | None, path: Path_, default: timedelta) -> timedelta: ...

    def where(self, path: Path_) -> str: ...


@dataclass(frozen=True, slots=True)
class HistoryRule:
    name: str
    kind: str
    description: str = ""
    scope: str = "gpu"  # repeat_offender: per GPU (UUID, across nodes) or per node
    window: timedelta = DEFAULT_WINDOW
    within: timedelta = DEFAULT_WITHIN  # repair_not_held: the same fault this soon after the repair
    count: int = DEFAULT_COUNT
    any_of: tuple[Condition, ...] = ()
    all_of: tuple[Condition, ...] = ()
    action: str = ""  # a ladder step; "" for a rule that only names RMA candidates
    severity: str = ""
    rma: bool = False
    where: str = ""  # file:line of the rule

    def counts(self, xids: tuple[int, ...], signals: tuple[str, ...], alertnames: tuple[str, ...]) -> bool:
        """Whether an incident showing these counts for the rule (every incident when it names no condition)."""
        conditions = self.any_of or self.all_of
        return not conditions or any(c.matches_facts(xids, signals, alertnames) for c in conditions)

    def as_rma(self) -> RmaRule:
        return RmaRule(name=self.name, description=self.description, window=self.window, any_of=self.any_of,
                       all_of=self.all_of, min_incidents=self.count)


class HistoryRuleDoc(TypedDict, total=False):
    """One entry of the ``history`` section as history.schema.json admits it (name and kind required)."""

    name: str
    kind: str
    description: str
    scope: str
    window: str
    within: str
    count: int
    any_of: list[ConditionDoc]
    all_of: list[ConditionDoc]
    action: str
    severity: str
    rma: bool


def parse_history(doc: list[HistoryRuleDoc], check: Checker) -> tuple[HistoryRule, ...]:
    """Schema-valid ``history`` section -> rules; duplicate names and bad durations are reported with positions."""
    out: list[HistoryRule] = []
    report_duplicate_names(doc, "history", "history", check)
    for i, entry in enumerate(doc):
        out.append(HistoryRule(
            name=entry["name"], kind=entry["kind"], description=entry.get("description", ""),
            scope=entry.get("scope", "gpu"),
            window=check.duration(entry.get("window"), ("history", i, "window"), DEFAULT_WINDOW),
            within=check.duration(entry.get("within"), ("history", i, "within"), DEFAULT_WITHIN),
            count=entry.get("count", DEFAULT_COUNT if entry.get("action") else 1),
            any_of=tuple(Condition(**c) for c in entry.get("any_of") or ()),
            all_of=tuple(Condition(**c) for c in entry.get("all_of") or ()),
            action=entry.get("action", ""), severity=entry.get("severity", ""), rma=bool(entry.get("rma")),
            where=check.where(("history", i))))
    return tuple(out)


def rma_rules(rules: tuple[HistoryRule, ...]) -> tuple[RmaRule, ...]:
    """The RMA candidate policy the history rules define."""
    return tuple(r.as_rma() for r in rules if r.rma)


def longest_lookback(rules: tuple[HistoryRule, ...]) -> timedelta:
    """How far back the judge must see: the longest window, or repair time plus its own window."""
    spans = [r.window for r in rules if r.action] + [r.within + r.window for r in rules
                                                     if r.action and r.kind == REPAIR_NOT_HELD]
    return max(spans, default=timedelta(0))
