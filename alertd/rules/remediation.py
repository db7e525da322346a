"""The remediation policy (rules/remediation.yml): which incidents propose which action on their nodes.

Pure data, loaded into the RuleSet like the other rule sections; alertd/remediation/ decides and acts on it.
Dry run is the default: a policy file that does not say ``dry_run: false`` computes and shows proposals
and acts on nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Mapping, TypedDict

from alertd.rules.checker import Checker

ACTIONS = ("cordon", "drain", "drain-gpu", "handoff", "none")
CORDONING = ("cordon", "drain", "drain-gpu")  # actions that cordon the node first
DEFAULT_TAINT = ("alertd.dev/quarantine", "NoSchedule")


@dataclass(frozen=True, slots=True)
class Policy:
    """One entry of ``policies``: an incident with any of ``xids`` or ``signals`` proposes ``action``."""

    name: str
    action: str
    xids: frozenset[int] = frozenset()
    signals: frozenset[str] = frozenset()
    automatic: bool = False
    description: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)  # handoff: set on the node
    annotations: Mapping[str, str] = field(default_factory=dict)

    def matches(self, xids: list[int], signals: list[str]) -> bool:
        return bool(self.xids.intersection(xids) or self.signals.intersection(signals))


@dataclass(frozen=True, slots=True)
class RemediationPolicy:
    dry_run: bool = True
    max_share: float = 0.1
    max_per_hour: int = 5
    second_approver_gpus: int | None = None
    second_approver_nodes: int | None = None
    slack_approvers: frozenset[str] = frozenset()
    drain_timeout: timedelta = timedelta(minutes=5)
    grace_period: int | None = None
    taint: tuple[str, str] = DEFAULT_TAINT
    policies: tuple[Policy, ...] = ()

    def policy_for(self, xids: list[int], signals: list[str]) -> Policy | None:
        return next((p for p in self.policies if p.matches(xids, signals)), None)


class HandoffDoc(TypedDict, total=False):
    labels: dict[str, str]
    annotations: dict[str, str]


class PolicyDoc(TypedDict, total=False):
    """One ``remediation.policies`` entry (remediation.schema.json; name and action required)."""

    name: str
    description: str
    xids: list[int]
    signals: list[str]
    action: str
    approval: str  # required, automatic
    handoff: HandoffDoc


class BreakerDoc(TypedDict, total=False):
    max_share: float
    max_per_hour: int


class SecondApproverDoc(TypedDict, total=False):
    gpus: int
    nodes: int


class ApproversDoc(TypedDict, total=False):
    slack_users: list[str]


class DrainDoc(TypedDict, total=False):
    timeout: str
    grace_period: int


class TaintDoc(TypedDict, total=False):
    key: str  # required
    effect: str


class RemediationDoc(TypedDict, total=False):
    """The ``remediation`` section as remediation.schema.json admits it."""

    dry_run: bool
    breaker: BreakerDoc
    second_approver: SecondApproverDoc
    approvers: ApproversDoc
    drain: DrainDoc
    taint: TaintDoc
    policies: list[PolicyDoc]


def parse_remediation(doc: RemediationDoc, check: Checker) -> RemediationPolicy:
    """Schema-valid ``remediation`` section -> policy; duplicate names and bad durations reported with positions."""
    policies: list[Policy] = []
    names: set[str] = set()
    for i, entry in enumerate(doc.get("policies") or []):
        if entry["name"] in names:
            check.problem(("remediation", "policies", i, "name"), f"duplicate remediation policy {entry['name']!r}")
        names.add(entry["name"])
        handoff = entry.get("handoff") or {}
        if entry["action"] == "handoff" and not handoff:
            check.problem(("remediation", "policies", i), "action handoff needs handoff.labels or handoff.annotations")
        policies.append(Policy(
            name=entry["name"], action=entry["action"], xids=frozenset(entry.get("xids") or ()),
            signals=frozenset(entry.get("signals") or ()), automatic=entry.get("approval") == "automatic",
            description=entry.get("description", ""), labels=dict(handoff.get("labels") or {}),
            annotations=dict(handoff.get("annotations") or {})))
    breaker, second = doc.get("breaker") or {}, doc.get("second_approver") or {}
    drain, taint = doc.get("drain") or {}, doc.get("taint") or {}
    base = RemediationPolicy()
    return RemediationPolicy(
        dry_run=doc.get("dry_run", True),
        max_share=breaker.get("max_share", base.max_share),
        max_per_hour=breaker.get("max_per_hour", base.max_per_hour),
        second_approver_gpus=second.get("gpus"), second_approver_nodes=second.get("nodes"),
        slack_approvers=frozenset((doc.get("approvers") or {}).get("slack_users") or ()),
        drain_timeout=check.duration(drain.get("timeout"), ("remediation", "drain", "timeout"), base.drain_timeout),
        grace_period=drain.get("grace_period"),
        taint=(taint["key"], taint.get("effect", "NoSchedule")) if taint else DEFAULT_TAINT,
        policies=tuple(policies))
