"""Blast radius: who a proposal hurts before anyone approves it. Pure: pods and PDBs in, a summary out.

For each node: its pods with the GPUs they hold and their owners up the chain (read by
alertd.enrich.kube_owners), what the action would evict (drain: every pod but DaemonSets', mirror and
finished pods, as ``kubectl drain --ignore-daemonsets``; drain-gpu: only the pods holding GPUs; cordon and
handoff: nothing), and the PodDisruptionBudgets that would refuse an eviction now. Gangs (all pods of one
distributed job, across nodes) come from a :class:`GangLookup`, so the job-impact model can answer them.
"""
from __future__ import annotations

from typing import Any, Protocol

from alertd.rules.remediation import CORDONING

FINISHED = ("Succeeded", "Failed")
MAX_PODS_SHOWN = 200  # per proposal; the counts stay exact


class GangLookup(Protocol):
    """The gang a pod belongs to: every pod of its distributed job, across nodes.

    ``gang(namespace, pod)`` answers ``{"name", "kind", "pods", "nodes"}`` (pods: its size; nodes: where its
    pods run) or None for a pod that is not part of a gang."""

    def gang(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None: ...


def evicts(action: str, pod: dict[str, Any]) -> tuple[bool, str]:
    """Whether the action evicts the pod, and why not when it does not."""
    if action not in CORDONING or action == "cordon":
        return False, ""
    if pod.get("phase") in FINISHED:
        return False, "finished"
    if pod.get("mirror"):
        return False, "mirror pod (static, managed by the kubelet)"
    if pod.get("daemonset"):
        return False, "DaemonSet pod (ignored by a drain)"
    if action in ("drain-gpu", "drain-handoff") and not pod.get("gpus"):
        return False, "holds no GPU (drain-gpu)"
    return True, ""


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) against labels; an empty selector selects all."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        present = key in labels
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and present and labels[key] in values) \
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def blocking_pdbs(pods: list[dict[str, Any]], pdbs: list[dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(namespace, pod) -> names of the PDBs that would refuse its eviction: a PDB covering more evicted pods
    than its status allows disruptions."""
    out: dict[tuple[str, str], list[str]] = {}
    for pdb in pdbs:
        meta, spec, status = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
        ns = meta.get("namespace", "")
        covered = [p for p in pods if p["namespace"] == ns and selects(spec.get("selector"), p.get("labels") or {})]
        allowed = int(status.get("disruptionsAllowed") or 0)
        for pod in covered[allowed:]:
            out.setdefault((ns, pod["name"]), []).append(meta.get("name", ""))
    return out


def build(action: str, pods: list[dict[str, Any]], pdbs: list[dict[str, Any]], gangs: GangLookup | None) -> dict[str, Any]:
    """The blast radius of ``action`` on the nodes these pods run on."""
    evicted = []
    for pod in pods:
        yes, why = evicts(action, pod)
        pod["evict"] = yes
        if why:
            pod["kept"] = why
        if yes:
            evicted.append(pod)
    blocked = blocking_pdbs(evicted, pdbs)
    owners: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pod in pods:
        if (pod["namespace"], pod["name"]) in blocked:
            pod["blockedBy"] = blocked[(pod["namespace"], pod["name"])]
        chain = pod.get("owner_chain") or []
        top = chain[-1] if chain else {"kind": "Pod", "name": pod["name"]}
        key = (pod["namespace"], top.get("kind", ""), top.get("name", ""))
        owner = owners.setdefault(key, {"namespace": key[0], "kind": key[1], "name": key[2], "pods": 0, "gpus": 0,
                                        "evicted": 0})
        owner["pods"] += 1
        owner["gpus"] += int(pod.get("gpus") or 0)
        owner["evicted"] += 1 if pod["evict"] else 0
        gang = gangs.gang(pod["namespace"], pod) if gangs is not None else None
        if gang is not None:
            owner["gang"] = gang
    shown = [{k: v for k, v in p.items() if k not in ("labels", "mirror", "daemonset")} for p in pods[:MAX_PODS_SHOWN]]
    return {"action": action, "pods": len(pods), "gpus": sum(int(p.get("gpus") or 0) for p in pods),
            "evictedPods": len(evicted), "evictedGpus": sum(int(p.get("gpus") or 0) for p in evicted),
            "blocked": [{"namespace": ns, "pod": name, "pdbs": names} for (ns, name), names in sorted(blocked.items())],
            "owners": sorted(owners.values(), key=lambda o: (-o["gpus"], o["namespace"], o["name"])),
            "podList": shown}


def summary(blast: dict[str, Any]) -> str:
    """One line for Slack and the timeline."""
    if not blast:
        return "blast radius unknown"
    gangs = [o for o in blast.get("owners") or [] if o.get("gang")]
    text = (f"{blast.get('pods', 0)} pods holding {blast.get('gpus', 0)} GPUs on the node(s); "
            f"evicts {blast.get('evictedPods', 0)} pods ({blast.get('evictedGpus', 0)} GPUs)")
    if blast.get("blocked"):
        text += f"; {len(blast['blocked'])} blocked by a PodDisruptionBudget"
    if gangs:
        text += "; gangs: " + ", ".join(f"{o['kind']} {o['namespace']}/{o['name']} ({o['gang'].get('pods')} pods on "
                                         f"{len(o['gang'].get('nodes') or [])} nodes)" for o in gangs[:5])
    if blast.get("error"):
        text += f"; {blast['error']}"
    return text
