"""History rules (rules/history.yml): what a GPU's and a node's past makes of a new or changed incident.

One definition serves both readers: the judge (alertd/engine/judge.py) turns the rules with an ``action``
into verdicts on incidents; the rules marked ``rma`` are the RMA candidate policy (alertd/rules/rma.py
evaluates them as ``RmaRule``s for /ui/rma, ``alertd rma`` and the report's lemon GPUs).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, ClassVar, Protocol

from msgspec import Meta

from alertd.core.durations import parse_duration
from alertd.core.json_types import JSONObject
from alertd.core.sections import Section, written
from alertd.core.vocabulary import HISTORY_KINDS, LADDER, HistoryScope, SignalKind, VerdictKind
from alertd.core.yamlio import Path_
from alertd.schemas.declared import SEVERITY_WORDS, RuleFile, in_order, word
from alertd.rules.declared import TextSpan
from alertd.rules.rma import Condition, RmaRule, report_duplicate_names

REPEAT_OFFENDER, REPAIR_NOT_HELD, LEMON_NODE = VerdictKind
WINDOW, WITHIN = "7d", "7d"  # as a rule file writes them
DEFAULT_WINDOW = parse_duration(WINDOW)
DEFAULT_WITHIN = parse_duration(WITHIN)
DEFAULT_COUNT = 3


class Checker(Protocol):
    """What parsing needs of the rule loader's checker (alertd/rules/ruleset.py)."""

    def problem(self, path: Path_, message: str) -> None: ...

    def where(self, path: Path_) -> str: ...


@dataclass(frozen=True, slots=True)
class HistoryRule:
    name: str
    kind: str
    description: str = ""
    scope: str = HistoryScope.GPU.value  # repeat_offender: per GPU (UUID, across nodes) or per node
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


class HistoryCondition(Section, frozen=True):
    """What an incident must show to count: an Xid code, a signal kind, or an alert name (all given keys must
    hold)."""

    SCHEMA: ClassVar[dict[str, object]] = {"minProperties": 1}

    xid: Annotated[int, Meta(ge=1, description="An Xid code the incident reported, e.g. 79.")] | None = None
    signal: Annotated[str, word(in_order(SignalKind, HISTORY_KINDS), (
        "A signal kind the incident reported (rules/signals.yml)."))] = ""
    alertname: Annotated[str, Meta(min_length=1, description=(
        "An alert of this name fired in the incident, e.g. GPURowRemapFailure."))] = ""

    def condition(self) -> Condition:
        return Condition(xid=self.xid or 0, signal=self.signal, alertname=self.alertname)


def _without(*keys: str) -> JSONObject:
    """A condition: none of these keys is given."""
    return {"not": {"anyOf": [{"required": [k]} for k in keys]}}


def _kind_is(kind: VerdictKind) -> JSONObject:
    return {"properties": {"kind": {"const": kind.value}}}


class HistoryEntry(Section, frozen=True):
    """One history rule."""

    SCHEMA: ClassVar[dict[str, object]] = {"allOf": [
        {"not": {"required": ["any_of", "all_of"]}},
        {"if": _kind_is(REPAIR_NOT_HELD), "then": _without("count", "all_of", "scope")},
        {"if": _kind_is(LEMON_NODE), "then": _without("any_of", "all_of", "scope", "within", "rma")},
        {"if": _kind_is(REPEAT_OFFENDER), "then": {"anyOf": [{"required": ["any_of"]}, {"required": ["all_of"]}],
                                                   "not": {"required": ["within"]}}},
        {"if": {"required": ["rma"], "properties": {"rma": {"const": True}}},
         "then": {"properties": {"kind": {"const": REPEAT_OFFENDER.value}, "scope": {"const": HistoryScope.GPU.value}}}},
        {"if": {"not": {"required": ["action"]}}, "then": {"required": ["rma"], "properties": {"rma": {"const": True}}}},
    ]}

    name: Annotated[str, Meta(pattern="^[a-z0-9][a-z0-9_.-]*$", description=(
        "Identifier, shown with each verdict and RMA candidate."))]
    kind: Annotated[str, word(VerdictKind, (
        "repeat_offender: `count` incidents matching `any_of` (or each of `all_of`) on one GPU (or node, with scope: "
        "node) within `window`, the new one included. repair_not_held: the new incident's fault (an Xid or signal "
        "matching `any_of`, or any fault when it is left out) was the fault of an earlier incident of the same GPU "
        "or node, and comes back within `within` of that incident's repair (its uncordon, or the end of a "
        "remediation). lemon_node: `count` remediations of the node that ran to their end (not dry runs) within "
        "`window`."))]
    description: Annotated[str, Meta(description="Why the rule exists (shown in the UI and the RMA export).")] = ""
    scope: Annotated[str, word(HistoryScope, (
        "repeat_offender only: count per GPU (its UUID, across nodes; default) or per node."))] = HistoryScope.GPU.value
    window: Annotated[TextSpan, Meta(description=(
        "Prometheus duration: only incidents (or remediations) this recent count (default 7d)."))] = \
        written(TextSpan.from_config, WINDOW)
    within: Annotated[TextSpan, Meta(description=(
        "repair_not_held only: the Prometheus duration after a repair within which the same fault means the repair "
        "did not hold (default 7d)."))] = written(TextSpan.from_config, WITHIN)
    count: Annotated[int, Meta(ge=1, description=(
        "repeat_offender, lemon_node: how many it takes, the new incident included (default 3; RMA-only rules "
        "default to 1)."))] | None = None
    any_of: Annotated[tuple[HistoryCondition, ...], Meta(min_length=1, description=(
        "Incidents that count: matching any of these conditions."))] = ()
    all_of: Annotated[tuple[HistoryCondition, ...], Meta(min_length=2, description=(
        "repeat_offender only: every condition must be met by some incident within the window (e.g. Xid 48 and "
        "Xid 63)."))] = ()
    action: Annotated[str, word(LADDER, (
        "The action the verdict asks for. Without it the rule makes no verdict and only names RMA candidates "
        "(rma: true)."))] = ""
    severity: Annotated[str, word(SEVERITY_WORDS, "The incident's severity is raised to this (never lowered).")] = ""
    rma: Annotated[bool, Meta(description=(
        "repeat_offender with scope gpu: a GPU the rule matches is an RMA candidate (/ui/rma, `alertd rma`, the "
        "report's lemon GPUs)."))] = False


class HistoryFile(Section, frozen=True):
    """Rules (rules/history.yml) that turn a GPU's and a node's past into a verdict on a new or changed incident:
    a repeat offender, a repair that did not hold, a lemon node. A verdict raises the incident's action
    (reboot_node < reset_gpu < drain_and_handoff < replace_gpu) and optionally its severity, and says why in one
    line. Rules marked rma name the GPUs of the RMA candidate list (/ui/rma, alertd rma) and the report's
    lemons."""

    history: Annotated[tuple[HistoryEntry, ...], Meta(min_length=1, description=(
        "History rules; names must be unique across rule files. The first rule (in file order) whose verdict "
        "climbs highest on the action ladder wins."))]


HISTORY = RuleFile("history", "alertd history rules", HistoryFile, {HistoryCondition: "condition", HistoryEntry: "rule"})


def parse_history(doc: tuple[HistoryEntry, ...], check: Checker) -> tuple[HistoryRule, ...]:
    """Decoded ``history`` section -> rules; duplicate names and bad durations are reported with positions."""
    out: list[HistoryRule] = []
    report_duplicate_names([{"name": entry.name} for entry in doc], "history", "history", check)
    for i, entry in enumerate(doc):
        out.append(HistoryRule(
            name=entry.name, kind=entry.kind, description=entry.description, scope=entry.scope,
            window=entry.window, within=entry.within,
            count=entry.count or (DEFAULT_COUNT if entry.action else 1),
            any_of=tuple(c.condition() for c in entry.any_of), all_of=tuple(c.condition() for c in entry.all_of),
            action=entry.action, severity=entry.severity, rma=entry.rma, where=check.where(("history", i))))
    return tuple(out)


def rma_rules(rules: tuple[HistoryRule, ...]) -> tuple[RmaRule, ...]:
    """The RMA candidate policy the history rules define."""
    return tuple(r.as_rma() for r in rules if r.rma)


def longest_lookback(rules: tuple[HistoryRule, ...]) -> timedelta:
    """How far back the judge must see: the longest window, or repair time plus its own window."""
    spans = [r.window for r in rules if r.action] + [r.within + r.window for r in rules
                                                     if r.action and r.kind == REPAIR_NOT_HELD]
    return max(spans, default=timedelta(0))
