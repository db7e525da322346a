"""Running one claimed remediation against the Kubernetes API: per node, what was done and what was not.

Dry run computes the same steps and writes nothing. Errors are sorted by what helps: 403 (RBAC: the
account lacks a right; retrying will not help) fails the node; 409 is retried inside the node patch; 429
inside the drain until its timeout; an API server that cannot be reached makes the whole remediation
``retry`` (it goes back to approved and is tried again, up to a limit).
"""
from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Callable, cast

from alertd.core.json_types import JSONObject, text
from alertd.core.model import iso

from alertd.remediation.kube import ApiError, KubeRemediator
from alertd.remediation.model import DONE, FAILED, UNCORDON, Remediation
from alertd.core.vocabulary import CORDONING, DRAINING, HANDING_OFF, RemediationAction, RemediationStep as Step
from alertd.rules.remediation import RemediationPolicy
from alertd.core.words import counted


async def execute(kube: KubeRemediator, policy: RemediationPolicy, rem: Remediation, stopped: Callable[[], bool],
                  monotonic: Callable[[], float],
                  wall: Callable[[], datetime]) -> tuple[list[JSONObject], str, str]:
    """(results, state, reason): state DONE, FAILED or "retry". Each node's cordon and drain carry the wall
    time they finished (``at``), which docs/remediation.md's approval-to-drained figures are read from."""
    results: list[JSONObject] = []
    for node in rem.nodes:
        if stopped():
            results.append({"node": node, "step": rem.action, "ok": False, "result": "not started: stopped"})
            continue
        try:
            results.extend(await _node(kube, policy, rem, node, stopped, monotonic, wall))
        except ApiError as exc:
            results.append({"node": node, "step": rem.action, "ok": False, "result": str(exc), "status": exc.status})
            if exc.status == 0:
                return results, "retry", f"Kubernetes API unreachable: {exc.reason}"
    failed = [r for r in results if not r.get("ok")]
    forbidden = [r for r in failed if r.get("status") == 403]
    reason = ("forbidden by RBAC: " + "; ".join(text(r, "result") for r in forbidden[:3])) if forbidden else \
        (f"{len(failed)} step(s) not done" if failed else "")
    return results, (FAILED if forbidden else DONE), reason


async def _node(kube: KubeRemediator, policy: RemediationPolicy, rem: Remediation, node: str,
                stopped: Callable[[], bool], monotonic: Callable[[], float],
                wall: Callable[[], datetime]) -> list[JSONObject]:
    if rem.kind == UNCORDON:
        if rem.dry_run:
            return [{"node": node, "step": Step.UNCORDON.value, "ok": True, "result": "dry run: would uncordon"}]
        why = await kube.uncordon(node, rem.incident_id, policy.taint)
        return [{"node": node, "step": Step.UNCORDON.value, "ok": not why, "result": why or "uncordoned"}]
    if rem.action == RemediationAction.HANDOFF:
        return [await _handoff(kube, policy, rem, node)]
    out: list[JSONObject] = []
    if rem.action in CORDONING:
        if rem.dry_run:
            out.append({"node": node, "step": Step.CORDON.value, "ok": True, "result": "dry run: would cordon"})
        else:
            why = await kube.cordon(node, rem.incident_id, policy.taint, rem.updated_at)
            out.append({"node": node, "step": Step.CORDON.value, "ok": True, "result": why or "cordoned",
                        "at": iso(wall())})
    if rem.action in DRAINING:
        if rem.dry_run:
            evict = [p for p in rem.blast.get("podList") or [] if p.get("evict") and p.get("node") == node]
            out.append({"node": node, "step": Step.DRAIN.value, "ok": True,
                        "result": f"dry run: would evict {counted(len(evict), 'pod')}"})
        else:
            deadline = monotonic() + policy.drain_timeout.total_seconds()
            pods = await kube.drain(node, rem.action, grace=policy.grace_period, deadline=deadline, clock=monotonic,
                                    pause=asyncio.sleep, stopped=stopped)
            drained = all(p["result"].startswith("evicted") for p in pods)
            out.extend({"node": node, "step": Step.EVICT.value, "ok": p["result"].startswith("evicted"),
                        **cast(JSONObject, p)} for p in pods)
            out.append({"node": node, "step": Step.DRAIN.value, "ok": drained, "result": "drained" if drained
                        else "drain incomplete", "at": iso(wall())})
    if rem.action in HANDING_OFF:  # drain-handoff: the external remediator gets a drained node
        out.append(await _handoff(kube, policy, rem, node))
    return out


async def _handoff(kube: KubeRemediator, policy: RemediationPolicy, rem: Remediation, node: str) -> JSONObject:
    """Label and annotate the node for an external remediator (the policy's or the ladder step's handoff)."""
    chosen = policy.by_name(rem.policy)
    labels, annotations = (dict(chosen.labels), dict(chosen.annotations)) if chosen else ({}, {})
    annotations.setdefault("alertd.dev/incident", rem.incident_id)
    if rem.dry_run:
        return {"node": node, "step": Step.HANDOFF.value, "ok": True, "result": f"dry run: would label {labels}"}
    why = await kube.handoff(node, labels, annotations)
    return {"node": node, "step": Step.HANDOFF.value, "ok": True, "result": why or "handed off"}
