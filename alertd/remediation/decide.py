"""What to propose for an incident, and what a click may do to a proposal: pure, with an injected ``now``.

The guards live here so they hold whoever asks (Slack, UI, API, a retry after a crash):

- one proposal per incident and kind; a node incident folded into a fleet incident gives its proposal up to
  the fleet's (one proposal for the fleet, not one per node);
- the circuit breaker: alertd's own cordons in a cluster may not pass ``max_share`` of its GPU nodes nor
  ``max_per_hour``; past either, the proposal is ``held`` and only an explicit override (act role) lifts it;
- a second, different approver above the blast-radius threshold: another principal (credentials), not another
  stated name;
- an uncordon is proposed only for nodes that still carry alertd's mark with this incident's id: a node
  someone else cordoned (or re-cordoned, or uncordoned) is never given back by alertd.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

from alertd.core.actor import Actor
from alertd.core.json_types import as_object, as_text, strings
from alertd.core.model import DOMAIN, DOMAIN_OF, Incident, iso
from alertd.gpu.recovery import XID_RECOVERY
from alertd.remediation.blast import BlastRadius
from alertd.remediation.model import (APPROVED, CANCELLED, HELD, PROPOSED, QUARANTINE, RUNNING, STOPPING,
                                      SUPERSEDED, UNCORDON, Remediation)
from alertd.remediation.ladder import Escalation, pick_step
from alertd.core.vocabulary import CORDONING
from alertd.rules.remediation import Policy, RemediationPolicy
from alertd.core.vocabulary import NOT_HARDWARE_ACTIONS, RMA_CATEGORIES, GpuAction, RemediationAction, SignalKind


DOMAIN_SIGNAL = SignalKind.DOMAIN  # what a remediation policy names to act on a bad failure domain


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the cluster looks like to the guards (read by alertd.remediation.kube.KubeRemediator.view)."""

    gpu_nodes: int = 0
    marked: dict[str, str] = field(default_factory=dict)  # node -> incident id of alertd's cordon mark
    cordoned: frozenset[str] = frozenset()  # nodes with spec.unschedulable, whoever did it
    cordons_last_hour: int = 0  # alertd's cordon marks set within the last hour


def remediation_id(incident_id: str, kind: str) -> str:
    return f"{incident_id}/{kind}"


def escalation_of(inc: Incident) -> Escalation | None:
    """What the incident's history says it needs (its verdict, when that names a ladder step), or None: what
    a proposal climbs the ladder with (alertd/remediation/ladder.py)."""
    return inc.verdict if inc.verdict is not None and inc.verdict.action else None


def policy_for(inc: Incident, policy: RemediationPolicy, escalation: Escalation | None = None) -> Policy | None:
    """The policy an incident proposes under; None for incidents that propose nothing themselves (no node,
    a node folded into a fleet incident, which proposes for all of them).

    ``escalation``: what the incident's history says it needs (a verdict). When it climbs the ladder above
    the rung of the incident's Xid catalog action, the ladder's step is proposed instead of the matching
    policy (alertd/remediation/ladder.py); otherwise the first matching policy, as without one.

    A bad failure domain (engine/domains.py: its incident, or the fleet that is its one incident) proposes
    under the policy for signal ``domain``, for all of its nodes."""
    if taken_by(inc):
        return None
    if domain_nodes(inc):
        chosen = policy.policy_for([], [DOMAIN_SIGNAL])
        return chosen if chosen is not None and chosen.action != RemediationAction.NONE else None
    if not (inc.nodes if inc.fleet else inc.node):
        return None
    choice = pick_step(policy.ladder, inc.primary.action if inc.primary else "", escalation)
    if choice is not None and choice.escalated:
        return choice.step.policy
    chosen = policy.policy_for(inc.xids, inc.signals, recovery_asked(inc))
    return chosen if chosen is not None and chosen.action != RemediationAction.NONE else None


def recovery_asked(inc: Incident) -> frozenset[str]:
    """What the incident's GPUs ask for (Xid 154 signals: their recovery key, rules/gpu-recovery.yml)."""
    signals = [m.signal for m in inc.members.values()] + ([inc.primary] if inc.primary is not None else [])
    return frozenset(s.detail for s in signals if s.xid == XID_RECOVERY and s.detail)


def taken_by(inc: Incident) -> str:
    """The fleet, or the bad domain's incident, that proposes for this incident's node; "" when none does."""
    return inc.parent_id or as_text(inc.annotations.get(DOMAIN_OF))


def domain_nodes(inc: Incident) -> list[str]:
    """The nodes of the bad failure domain the incident stands for, if it stands for one."""
    return sorted(strings(as_object(inc.annotations.get(DOMAIN)).get("nodes")))


def target_nodes(inc: Incident) -> list[str]:
    return domain_nodes(inc) or (sorted(inc.nodes) if inc.fleet else [inc.node])


def breaker(policy: RemediationPolicy, view: ClusterView, nodes: list[str]) -> str:
    """Why acting on ``nodes`` would pass the circuit breaker, or "" when it would not."""
    new = [n for n in nodes if n not in view.marked]
    if not new:
        return ""
    held = len(view.marked) + len(new)
    if view.gpu_nodes <= 0:
        return "the cluster's GPU node count is unknown, so the share alertd may cordon cannot be checked"
    limit = int(policy.max_share * view.gpu_nodes)
    if held > limit:
        return (f"circuit breaker: {held} of {view.gpu_nodes} GPU nodes would be cordoned by alertd "
                f"(limit {policy.max_share:.0%} = {limit})")
    if view.cordons_last_hour + len(new) > policy.max_per_hour:
        return (f"circuit breaker: {view.cordons_last_hour + len(new)} cordons within an hour "
                f"(limit {policy.max_per_hour} per hour)")
    return ""


def approvals_needed(policy: RemediationPolicy, nodes: list[str], blast: BlastRadius) -> int:
    gpus = int(blast.get("evictedGpus") or 0)
    if policy.second_approver_gpus is not None and gpus >= policy.second_approver_gpus:
        return 2
    if policy.second_approver_nodes is not None and len(nodes) >= policy.second_approver_nodes:
        return 2
    return 1


def propose(inc: Incident, chosen: Policy, policy: RemediationPolicy, view: ClusterView, blast: BlastRadius,
            now: datetime) -> Remediation:
    """A new quarantine proposal for the incident's nodes, held when it would pass the circuit breaker."""
    nodes = target_nodes(inc)
    guard = breaker(policy, view, nodes) if chosen.action in CORDONING else ""
    state = HELD if guard else (APPROVED if chosen.automatic else PROPOSED)
    return Remediation(
        id=remediation_id(inc.id, QUARANTINE), incident_id=inc.id, cluster=inc.cluster, nodes=nodes,
        kind=QUARANTINE, action=chosen.action, policy=chosen.name, state=state, created_at=now, updated_at=now,
        dry_run=policy.dry_run, automatic=chosen.automatic, reason=guard,
        approvals=[{"actor": "policy " + chosen.name, "at": iso(now), "via": "automatic"}] if state == APPROVED else [],
        approvals_needed=approvals_needed(policy, nodes, blast), blast=blast)


def propose_uncordon(done: Remediation, view: ClusterView, policy: RemediationPolicy,
                     now: datetime) -> tuple[Remediation | None, str]:
    """After the incident resolves: give back the nodes alertd cordoned for it, and no other.

    Returns the proposal (None when no node qualifies) and what was left out and why."""
    ours = [n for n in done.nodes if view.marked.get(n) == done.incident_id]
    skipped = [n for n in done.nodes if n not in ours]
    why = (f"not proposed for {', '.join(skipped)}: no longer carries alertd's cordon mark for {done.incident_id} "
           "(cordoned by someone else, or already uncordoned)") if skipped else ""
    if not ours or done.action not in CORDONING:
        return None, why or "nothing alertd cordoned to give back"
    rem = Remediation(id=remediation_id(done.incident_id, UNCORDON), incident_id=done.incident_id,
                      cluster=done.cluster, nodes=ours, kind=UNCORDON, action=UNCORDON, policy=done.policy,
                      state=PROPOSED, created_at=now, updated_at=now, dry_run=policy.dry_run, reason=why)
    return rem, why


def approve(rem: Remediation, actor: Actor, via: str, now: datetime, *, override: bool = False) -> tuple[Remediation, str]:
    """One approval. Returns the new remediation and "" or the unchanged one and why not.

    Approvers are counted by principal: a stated name (``?by=``, a Slack display name) never makes a second one."""
    if rem.state == HELD and not override:
        return rem, f"{rem.id} is held: {rem.reason}; it needs an explicit override"
    if rem.state not in (PROPOSED, HELD):
        return rem, f"{rem.id} is {rem.state}, not waiting for approval"
    if actor.principal in rem.approvers():
        return rem, (f"{actor.principal} already approved {rem.id}; it needs a second approver who signs in "
                     "with other credentials")
    approvals = rem.approvals + [{"actor": actor.shown, "principal": actor.principal, "at": iso(now), "via": via,
                                  **({"override": "yes"} if override else {})}]
    state = APPROVED if len(approvals) >= rem.approvals_needed else PROPOSED
    return dataclasses.replace(rem, approvals=approvals, state=state, updated_at=now), ""


def cancel(rem: Remediation, now: datetime, *, reason: str) -> tuple[Remediation, str]:
    if rem.state not in (PROPOSED, HELD, APPROVED):
        return rem, f"{rem.id} is {rem.state}; only a proposal not yet running can be cancelled (stop it instead)"
    return dataclasses.replace(rem, state=CANCELLED, reason=reason, updated_at=now), ""


def stop(rem: Remediation, now: datetime, *, reason: str) -> tuple[Remediation, str]:
    if rem.state != RUNNING:
        return rem, f"{rem.id} is {rem.state}, not running"
    return dataclasses.replace(rem, state=STOPPING, reason=reason, updated_at=now), ""


def supersede(rem: Remediation, fleet_id: str, now: datetime) -> Remediation | None:
    """A waiting node proposal gives way when its incident folds into a fleet incident (or a bad domain's);
    None if it ran."""
    if rem.state not in (PROPOSED, HELD):
        return None
    return dataclasses.replace(rem, state=SUPERSEDED, reason=f"folded into incident {fleet_id}", updated_at=now)


HARDWARE_CATEGORIES = RMA_CATEGORIES
HANDOFF_VERDICTS = frozenset({GpuAction.DRAIN_AND_HANDOFF, GpuAction.REPLACE_GPU})


def rma_refusal(inc: Incident) -> str:
    """Why the incident's GPUs are not for an RMA handoff, or "" when they are: a history verdict that asks
    for the vendor, or a hardware fault (its catalog category hardware, memory or NVLink and its action not
    the application's, a watch or nothing). Heat is the room's, not the GPU's; an Xid 13 leaves the GPU
    healthy."""
    if inc.verdict is not None and inc.verdict.action in HANDOFF_VERDICTS:
        return ""
    p = inc.primary
    if p is None or p.kind == SignalKind.THERMAL:
        return f"{inc.id} is {'heat' if p else 'no fault'}, not a hardware fault: nothing to return to the vendor"
    if p.category not in HARDWARE_CATEGORIES or p.action in NOT_HARDWARE_ACTIONS:
        return (f"{inc.id} is not a hardware fault ({p.category}, action {p.action or 'none'}): "
                "nothing to return to the vendor")
    if not (inc.gpus or inc.node or inc.fleet):
        return f"{inc.id} names no GPU or node to return"
    return ""
