"""The remediation policy (rules/remediation.yml): which incidents propose which action on their nodes.

Pure data, loaded into the RuleSet like the other rule sections; alertd/remediation/ decides and acts on it.
Dry run is the default: a policy file that does not say ``dry_run: false`` computes and shows proposals
and acts on nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, ClassVar, Literal, Mapping

import msgspec
from msgspec import Meta

from alertd.core.json_types import JSONObject
from alertd.core.sections import Section, written
from alertd.core.vocabulary import CORDONING as CORDONING, DRAINING as DRAINING, HANDING_OFF as HANDING_OFF
from alertd.core.vocabulary import (CATALOG_ACTIONS, LADDER, REMEDIATION_ACTIONS, REMEDIATION_KINDS, STEP_ACTIONS, GpuAction,
                                    RemediationAction, SignalKind)
from alertd.core.yamlio import Path_
from alertd.rules.checker import Checker
from alertd.rules.declared import TextSpan, decode
from alertd.schemas.declared import in_order, word

RMA = RemediationAction.RMA.value  # open a ticket to return the incident's GPU(s) to the vendor (app/rma_handoff.py)
LADDER_POLICY = "ladder-"  # a ladder step's policy is named this + the step


Step = Annotated[str, word(LADDER)]
StepAction = Annotated[str, word(in_order(RemediationAction, STEP_ACTIONS))]
PolicyAction = Annotated[str, word(REMEDIATION_ACTIONS)]
CatalogAction = Annotated[str, word(in_order(GpuAction, CATALOG_ACTIONS))]
PolicySignal = Annotated[str, word(in_order(SignalKind, REMEDIATION_KINDS))]  # a signal kind a policy may act on


Approval = Literal["required", "automatic"]


class Handoff(Section, frozen=True):
    """What handoff and drain-handoff set on the node for an external remediator (besides alertd.dev/incident)."""

    labels: Annotated[dict[str, str], Meta(description="Node labels, e.g. the one your remediator watches.")] = \
        msgspec.field(default_factory=dict)
    annotations: Annotated[dict[str, str], Meta(description="Node annotations.")] = msgspec.field(default_factory=dict)


class LadderStepRule(Section, frozen=True, kw_only=True):
    SCHEMA: ClassVar[dict[str, object]] = {}

    step: Annotated[Step, Meta(description="The rung: the name an escalation's action and the Xid catalog use.")]
    description: Annotated[str, Meta(description="Why the step, in words.")] = ""
    action: Annotated[StepAction, Meta(description="What the step proposes, as a policy's action.")]
    catalog: Annotated[tuple[CatalogAction, ...], Meta(description=(
        "Xid catalog actions (rules/xid-catalog.yml) that stand on this rung by themselves."))] = ()
    approval: Annotated[Approval, Meta(description="Default required; action rma always needs a person.")] = \
        "required"
    handoff: Handoff | None = None


class PolicyRule(Section, frozen=True, kw_only=True):
    SCHEMA: ClassVar[dict[str, object]] = {"anyOf": [{"required": ["xids"]}, {"required": ["signals"]}, {"required": ["recovery"]}]}

    name: Annotated[str, Meta(pattern="^[a-z0-9][a-z0-9_.-]*$", description=(
        "Identifier, unique among the policies: a proposal names the policy it was made under."))]
    description: Annotated[str, Meta(description="Why the policy, in words.")] = ""
    xids: Annotated[tuple[Annotated[int, Meta(ge=1)], ...], Meta(min_length=1, description=(
        "The incident reports any of these Xid codes."))] = ()
    signals: Annotated[tuple[PolicySignal, ...], Meta(min_length=1, description=(
        "The incident shows any of these signal kinds. `domain`: a failure domain (NVLink clique, rack) with half "
        "or more of its nodes bad (correlation.domains); the proposal covers all of the domain's bad nodes."))] = ()
    recovery: Annotated[tuple[Annotated[str, Meta(pattern="^[a-z][a-z0-9_]*$")], ...], Meta(min_length=1, description=(
        "The incident's GPU asks for any of these recovery actions in an Xid 154 (keys of rules/gpu-recovery.yml: "
        "gpu_reset, node_reboot, drain_p2p, drain_and_reset)."))] = ()
    action: Annotated[PolicyAction, Meta(description=(
        "cordon; drain (cordon, then evict every pod but DaemonSets'); drain-gpu (cordon, evict only pods holding "
        "GPUs); handoff (label/annotate the node for an external remediator); drain-handoff (drain-gpu, then "
        "handoff); rma (open a ticket to return the incident's GPU to the vendor: Jira and/or a signed webhook, "
        "configuration section rma; always needs a person's approval); none."))]
    approval: Annotated[Approval, Meta(description="Default required: a human approves.")] = "required"
    handoff: Handoff | None = None


class Breaker(Section, frozen=True):
    """The circuit breaker, per cluster: past either limit a proposal waits for an explicit override."""

    max_share: Annotated[float, Meta(gt=0, le=1, description=(
        "Largest share of a cluster's GPU nodes alertd may hold cordoned at once (default 0.1)."))] = 0.1
    max_per_hour: Annotated[int, Meta(ge=0, description=(
        "Most nodes alertd may cordon in a cluster within an hour (default 5)."))] = 5


class SecondApprover(Section, frozen=True):
    """A proposal whose blast radius reaches any of these needs two different approvers."""

    gpus: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description="GPUs held by the pods a drain evicts.")] = None
    nodes: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description="Nodes the proposal acts on.")] = None


class Approvers(Section, frozen=True):
    """Who may approve a proposal."""

    slack_users: Annotated[tuple[Annotated[str, Meta(pattern="^[UW][A-Z0-9]+$")], ...], Meta(description=(
        "Slack user ids whose button clicks approve (nobody else's do)."))] = ()


class Drain(Section, frozen=True):
    """How a drain evicts the node's pods."""

    timeout: Annotated[TextSpan, Meta(description=(
        "Prometheus duration: how long a drain retries evictions a PodDisruptionBudget refuses (default 5m)."))] = \
        written(TextSpan.from_config, "5m")
    grace_period: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "Seconds each evicted pod gets to stop (default: the pod's own)."))] = None


class Taint(Section, frozen=True):
    """The taint a cordon adds besides spec.unschedulable (default alertd.dev/quarantine:NoSchedule)."""

    key: Annotated[str, Meta(min_length=1, description="The taint's key.")]
    effect: Annotated[Literal["NoSchedule", "PreferNoSchedule", "NoExecute"], Meta(description=(
        "The taint's effect (default NoSchedule)."))] = "NoSchedule"


class Remediation(Section, frozen=True):
    """The remediation policy (docs/remediation.md)."""

    dry_run: Annotated[bool, Meta(description="Compute and show proposals, act on nothing (default true).")] = True
    breaker: Breaker = msgspec.field(default_factory=Breaker)
    second_approver: SecondApprover = msgspec.field(default_factory=SecondApprover)
    approvers: Approvers = msgspec.field(default_factory=Approvers)
    drain: Drain = msgspec.field(default_factory=Drain)
    taint: Taint = msgspec.field(default_factory=lambda: Taint(key="alertd.dev/quarantine"))
    policies: Annotated[tuple[PolicyRule, ...], Meta(description=(
        "First match wins: an incident whose Xids or signals meet a policy gets its action proposed."))] = ()
    ladder: Annotated[tuple[LadderStepRule, ...], Meta(description=(
        "The action ladder, lowest first: reboot_node -> reset_gpu -> drain_and_handoff -> replace_gpu. An "
        "incident's Xid catalog action stands on a rung (a step's catalog list); an escalation (a history verdict "
        "naming a step) may only climb above it, and then that step's action is proposed instead of the matching "
        "policy's, under the same approval, circuit breaker and dry run."))] = ()


class RemediationFile(Section, frozen=True):
    """What alertd proposes to do to a node when an incident names it (rules/remediation.yml): cordon, drain, or
    hand it to an external remediator, after a human's approval by default, within a circuit breaker. dry_run
    (the shipped default) computes and shows everything and acts on nothing."""

    remediation: Remediation


DECLARED = Remediation()  # what a file that says nothing gets
DEFAULT_TAINT = (DECLARED.taint.key, DECLARED.taint.effect)


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
    """The section read (its defaults the declaration's), for alertd/remediation/ to decide and act on."""

    dry_run: bool = DECLARED.dry_run
    max_share: float = DECLARED.breaker.max_share
    max_per_hour: int = DECLARED.breaker.max_per_hour
    second_approver_gpus: int | None = DECLARED.second_approver.gpus
    second_approver_nodes: int | None = DECLARED.second_approver.nodes
    slack_approvers: frozenset[str] = frozenset(DECLARED.approvers.slack_users)
    drain_timeout: timedelta = DECLARED.drain.timeout
    grace_period: int | None = DECLARED.drain.grace_period
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


def parse_remediation(body: JSONObject, check: Checker) -> RemediationPolicy:
    """Schema-valid ``remediation`` section -> policy; duplicate names and bad durations reported with positions."""
    doc = decode(RemediationFile, {"remediation": body}, (), check).remediation
    policies: list[Policy] = []
    names: set[str] = set()
    for i, entry in enumerate(doc.policies):
        if entry.name in names:
            check.problem(("remediation", "policies", i, "name"), f"duplicate remediation policy {entry.name!r}")
        names.add(entry.name)
        policies.append(_proposal(entry, entry.name, ("remediation", "policies", i), check, xids=frozenset(entry.xids),
                                  signals=frozenset(map(str, entry.signals)), recovery=frozenset(entry.recovery)))
    return RemediationPolicy(
        dry_run=doc.dry_run, max_share=doc.breaker.max_share, max_per_hour=doc.breaker.max_per_hour,
        second_approver_gpus=doc.second_approver.gpus, second_approver_nodes=doc.second_approver.nodes,
        slack_approvers=frozenset(doc.approvers.slack_users), drain_timeout=doc.drain.timeout,
        grace_period=doc.drain.grace_period, taint=(doc.taint.key, doc.taint.effect),
        policies=tuple(policies), ladder=parse_ladder(doc.ladder, check))


def parse_ladder(entries: tuple[LadderStepRule, ...], check: Checker) -> tuple[LadderStep, ...]:
    """The declared ``ladder`` -> its steps, in the file's order; a step named twice, a step out of the
    ladder's order, a handoff without labels or an automatic RMA is reported at its position."""
    steps: list[LadderStep] = []
    for i, entry in enumerate(entries):
        path = ("remediation", "ladder", i)
        if any(s.step == entry.step for s in steps):
            check.problem(path + ("step",), f"ladder step {entry.step!r} named twice")
        elif steps and LADDER.index(entry.step) < LADDER.index(steps[-1].step):
            check.problem(path + ("step",), f"ladder step {entry.step!r} comes after {steps[-1].step!r}; "
                          f"the ladder climbs {' -> '.join(LADDER)}")
        steps.append(LadderStep(str(entry.step), _proposal(entry, LADDER_POLICY + entry.step, path, check),
                                catalog=frozenset(map(str, entry.catalog))))
    return tuple(steps)


def _proposal(entry: PolicyRule | LadderStepRule, name: str, path: Path_, check: Checker, *,
              xids: frozenset[int] = frozenset(), signals: frozenset[str] = frozenset(),
              recovery: frozenset[str] = frozenset()) -> Policy:
    """What a policy or a ladder step proposes (action, approval, handoff), checked the same for both: a
    handoff needs labels or annotations, an RMA a person's approval."""
    handoff, action = entry.handoff or Handoff(), str(entry.action)
    if action in HANDING_OFF and not (handoff.labels or handoff.annotations):
        check.problem(path, f"action {action} needs handoff.labels or handoff.annotations")
    if action == RMA and entry.approval == "automatic":
        check.problem((*path, "approval"), "action rma always needs a person's approval")
    return Policy(name=name, action=action, xids=xids, signals=signals, recovery=recovery,
                  automatic=entry.approval == "automatic", description=entry.description,
                  labels=dict(handoff.labels), annotations=dict(handoff.annotations))
