"""The remediation policy (rules/remediation.yml): which incidents propose which action on their nodes.

Pure data, loaded into the RuleSet like the other rule sections; alertd/remediation/ decides and acts on it.
Dry run is the default: a policy file that does not say ``dry_run: false`` computes and shows proposals
and acts on nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Mapping, TypedDict

from alertd.core.vocabulary import CORDONING as CORDONING, DRAINING as DRAINING, HANDING_OFF as HANDING_OFF
from alertd.core.vocabulary import LADDER, RemediationAction
from alertd.core.yamlio import Path_
from alertd.rules.checker import Checker

RMA = RemediationAction.RMA.value  # open a ticket to return the incident's GPU(s) to the vendor (app/rma_handoff.py)
DEFAULT_TAINT = ("alertd.dev/quarantine", "NoSchedule")
LADDER_POLICY = "ladder-"  # a ladder step's policy is named this + the step


@dataclass(frozen=True, slots=True)
class Policy:
    """One entry of ``policies``: an incident with any of ``xids``, ``signals`` or ``recovery`` (what the GPU asks
    for in an Xid 154: rules/gpu-recovery.yml keys) proposes ``action``."""

    name: str
    action: str
    xids: frozenset[int] = frozenset()
    signals: frozenset[str] = frozenset()
    recovery: frozenset[str] = frozenset()
    automatic: bool = False
    description: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)  # handoff: set on the node
    annotations: Mapping[str, str] = field(default_factory=dict)

    def matches(self, xids: list[int], signals: list[str], recovery: frozenset[str] = frozenset()) -> bool:
        return bool(self.xids.intersection(xids) or self.signals.intersection(signals)
                    or self.recovery.intersection(recovery))


@dataclass(frozen=True, slots=True)
class LadderStep:
    """One rung of the action ladder: ``step`` (a LADDER name, alertd/core/verdict.py) proposes ``policy``
    (named ``ladder-<step>``: the ladder chose it); ``catalog``: the Xid catalog actions that stand on this rung
    by themselves (an incident whose signal says reset_gpu)."""

    step: str
    policy: Policy
    catalog: frozenset[str] = frozenset()

    @property
    def action(self) -> str:
        return self.policy.action


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
    ladder: tuple[LadderStep, ...] = ()

    def policy_for(self, xids: list[int], signals: list[str], recovery: frozenset[str] = frozenset()) -> Policy | None:
        return next((p for p in self.policies if p.matches(xids, signals, recovery)), None)

    @property
    def proposes(self) -> bool:
        """Whether anything can be proposed: a policy, or a ladder step a verdict climbs to."""
        return bool(self.policies or self.ladder)

    def by_name(self, name: str) -> Policy | None:
        """The policy or the ladder step's policy a proposal was made under (Remediation.policy)."""
        return next((p for p in (*self.policies, *(s.policy for s in self.ladder)) if p.name == name), None)


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
    recovery: list[str]


class LadderStepDoc(TypedDict, total=False):
    """One ``remediation.ladder`` step (remediation.schema.json; step and action required)."""

    step: str
    description: str
    catalog: list[str]
    action: str
    approval: str
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
    ladder: list[LadderStepDoc]


def parse_remediation(doc: RemediationDoc, check: Checker) -> RemediationPolicy:
    """Schema-valid ``remediation`` section -> policy; duplicate names and bad durations reported with positions."""
    policies: list[Policy] = []
    names: set[str] = set()
    for i, entry in enumerate(doc.get("policies") or []):
        if entry["name"] in names:
            check.problem(("remediation", "policies", i, "name"), f"duplicate remediation policy {entry['name']!r}")
        names.add(entry["name"])
        policies.append(_proposal(
            entry, entry["name"], ("remediation", "policies", i), check, xids=frozenset(entry.get("xids") or ()),
            signals=frozenset(entry.get("signals") or ()), recovery=frozenset(entry.get("recovery") or ())))
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
        policies=tuple(policies), ladder=parse_ladder(doc.get("ladder") or [], check))


def parse_ladder(entries: list[LadderStepDoc], check: Checker) -> tuple[LadderStep, ...]:
    """Schema-valid ``ladder`` -> its steps, in the file's order; a step named twice, a step out of the
    ladder's order, a handoff without labels or an automatic RMA is reported at its position."""
    steps: list[LadderStep] = []
    for i, entry in enumerate(entries):
        path = ("remediation", "ladder", i)
        if any(s.step == entry["step"] for s in steps):
            check.problem(path + ("step",), f"ladder step {entry['step']!r} named twice")
        elif steps and LADDER.index(entry["step"]) < LADDER.index(steps[-1].step):
            check.problem(path + ("step",), f"ladder step {entry['step']!r} comes after {steps[-1].step!r}; "
                          f"the ladder climbs {' -> '.join(LADDER)}")
        steps.append(LadderStep(entry["step"], _proposal(entry, LADDER_POLICY + entry["step"], path, check),
                                catalog=frozenset(entry.get("catalog") or ())))
    return tuple(steps)


def _proposal(entry: PolicyDoc | LadderStepDoc, name: str, path: Path_, check: Checker, *,
              xids: frozenset[int] = frozenset(), signals: frozenset[str] = frozenset(),
              recovery: frozenset[str] = frozenset()) -> Policy:
    """What a policy or a ladder step proposes (action, approval, handoff), checked the same for both: a
    handoff needs labels or annotations, an RMA a person's approval."""
    handoff = entry.get("handoff") or {}
    if entry["action"] in HANDING_OFF and not handoff:
        check.problem(path, f"action {entry['action']} needs handoff.labels or handoff.annotations")
    if entry["action"] == RMA and entry.get("approval") == "automatic":
        check.problem((*path, "approval"), "action rma always needs a person's approval")
    return Policy(name=name, action=entry["action"], xids=xids, signals=signals, recovery=recovery,
                  automatic=entry.get("approval") == "automatic", description=entry.get("description", ""),
                  labels=dict(handoff.get("labels") or {}), annotations=dict(handoff.get("annotations") or {}))
