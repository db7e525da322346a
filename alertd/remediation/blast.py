"""Blast radius: who a proposal hurts before anyone approves it. Pure: pods and PDBs in, a summary out.

For each node: its pods with the GPUs they hold and their owners up the chain (read by
alertd.enrich.kube_owners), what the action would evict (drain: every pod but DaemonSets', mirror and
finished pods, as ``kubectl drain --ignore-daemonsets``; drain-gpu: only the pods holding GPUs; cordon and
handoff: nothing), and the PodDisruptionBudgets that would refuse an eviction now. Gangs (all pods of one
distributed job, across nodes) come from a :class:`GangLookup`, so the job-impact model can answer them.
"""
from __future__ import annotations

from typing import NotRequired, Protocol, TypedDict

from alertd.core.kube_objects import LabelSelector, PodDisruptionBudget
from alertd.core.vocabulary import CORDONING, RemediationAction
from alertd.core.words import counted

FINISHED = ("Succeeded", "Failed")
MAX_PODS_SHOWN = 200  # per proposal; the counts stay exact


class Gang(TypedDict, total=False):
    """A distributed job's pods across nodes: by owner chain (kind, name and the job's cost) or by a job-name
    label (label, name)."""

    kind: str
    label: str
    name: str
    pods: int  # its size
    nodes: list[str]  # where its pods run
    gpus: int
    owner: str
    team: str
    gpuHoursLost: float


class OwnerLink(TypedDict, total=False):
    """One link of a pod's owner chain as alertd.enrich.kube_owners reads it."""

    kind: str
    name: str
    apiVersion: str
    missing: bool
    unresolved: str


class BlastPod(TypedDict, total=False):
    """A pod on a node an action touches: described by alertd.enrich.kube (namespace ... started), then marked
    here (labels, daemonset, mirror: read from the pod; evict, kept, blockedBy: the verdict)."""

    namespace: str
    name: str
    node: str
    phase: str
    gpus: int
    owner_chain: list[OwnerLink]
    gpu_resources: dict[str, int]
    team: str
    channel: str
    started: str
    labels: dict[str, str]
    daemonset: bool
    mirror: bool
    evict: bool
    kept: str
    blockedBy: list[str]


class Owner(TypedDict):
    """The top of an owner chain and what the action does to its pods."""

    namespace: str
    kind: str
    name: str
    pods: int
    gpus: int
    evicted: int
    gang: NotRequired[Gang]


class Blocked(TypedDict):
    namespace: str
    pod: str
    pdbs: list[str]


class BlastRadius(TypedDict, total=False):
    """Who a proposal hurts, as stored on the remediation and shown in the UI; {} when unknown."""

    action: str
    pods: int
    gpus: int
    evictedPods: int
    evictedGpus: int
    blocked: list[Blocked]
    owners: list[Owner]
    podList: list[BlastPod]  # at most MAX_PODS_SHOWN, without labels, mirror and daemonset
    error: str


class GangLookup(Protocol):
    """The gang a pod belongs to: every pod of its distributed job, across nodes, or None for a pod that is
    not part of a gang."""

    def gang(self, namespace: str, pod: BlastPod) -> Gang | None: ...


def evicts(action: str, pod: BlastPod) -> tuple[bool, str]:
    """Whether the action evicts the pod, and why not when it does not."""
    if action not in CORDONING or action == RemediationAction.CORDON:
        return False, ""
    if pod.get("phase") in FINISHED:
        return False, "finished"
    if pod.get("mirror"):
        return False, "mirror pod (static, managed by the kubelet)"
    if pod.get("daemonset"):
        return False, "DaemonSet pod (ignored by a drain)"
    if action in (RemediationAction.DRAIN_GPU, RemediationAction.DRAIN_HANDOFF) and not pod.get("gpus"):
        return False, "holds no GPU (drain-gpu)"
    return True, ""


def selects(selector: LabelSelector | None, labels: dict[str, str]) -> bool:
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


def blocking_pdbs(pods: list[BlastPod], pdbs: list[PodDisruptionBudget]) -> dict[tuple[str, str], list[str]]:
    """(namespace, pod) -> names of the PDBs that would refuse its eviction: a PDB covering more evicted pods
    than its status allows disruptions."""
    out: dict[tuple[str, str], list[str]] = {}
    for pdb in pdbs:
        meta, spec, status = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
        ns = meta.get("namespace", "")
        covered = [p for p in pods if p.get("namespace") == ns and selects(spec.get("selector"), p.get("labels") or {})]
        allowed = int(status.get("disruptionsAllowed") or 0)
        for pod in covered[allowed:]:
            out.setdefault((ns, pod.get("name", "")), []).append(meta.get("name", ""))
    return out


def build(action: str, pods: list[BlastPod], pdbs: list[PodDisruptionBudget], gangs: GangLookup | None) -> BlastRadius:
    """The blast radius of ``action`` on the nodes these pods run on."""
    evicted: list[BlastPod] = []
    for pod in pods:
        yes, why = evicts(action, pod)
        pod["evict"] = yes
        if why:
            pod["kept"] = why
        if yes:
            evicted.append(pod)
    blocked = blocking_pdbs(evicted, pdbs)
    owners: dict[tuple[str, str, str], Owner] = {}
    for pod in pods:
        ns, name = pod.get("namespace", ""), pod.get("name", "")
        if (ns, name) in blocked:
            pod["blockedBy"] = blocked[(ns, name)]
        chain = pod.get("owner_chain") or []
        top: OwnerLink = chain[-1] if chain else {"kind": "Pod", "name": name}
        key = (ns, top.get("kind", ""), top.get("name", ""))
        owner = owners.setdefault(key, {"namespace": key[0], "kind": key[1], "name": key[2], "pods": 0, "gpus": 0,
                                        "evicted": 0})
        owner["pods"] += 1
        owner["gpus"] += int(pod.get("gpus") or 0)
        owner["evicted"] += 1 if pod.get("evict") else 0
        gang = gangs.gang(ns, pod) if gangs is not None else None
        if gang is not None:
            owner["gang"] = gang
    shown = [_shown(p) for p in pods[:MAX_PODS_SHOWN]]
    return {"action": action, "pods": len(pods), "gpus": sum(int(p.get("gpus") or 0) for p in pods),
            "evictedPods": len(evicted), "evictedGpus": sum(int(p.get("gpus") or 0) for p in evicted),
            "blocked": [{"namespace": ns, "pod": name, "pdbs": names} for (ns, name), names in sorted(blocked.items())],
            "owners": sorted(owners.values(), key=lambda o: (-o["gpus"], o["namespace"], o["name"])),
            "podList": shown}


def _shown(pod: BlastPod) -> BlastPod:
    shown = pod.copy()
    shown.pop("labels", None)
    shown.pop("mirror", None)
    shown.pop("daemonset", None)
    return shown


def summary(blast: BlastRadius) -> str:
    """One line for Slack and the timeline."""
    if not blast:
        return "blast radius unknown"
    gangs = [(o, o["gang"]) for o in blast.get("owners") or [] if o.get("gang")]
    text = (f"{counted(blast.get('pods', 0), 'pod')} holding {counted(blast.get('gpus', 0), 'GPU')} on the node(s); "
            f"evicts {counted(blast.get('evictedPods', 0), 'pod')} ({counted(blast.get('evictedGpus', 0), 'GPU')})")
    if blast.get("blocked"):
        text += f"; {len(blast['blocked'])} blocked by a PodDisruptionBudget"
    if gangs:
        text += "; gangs: " + ", ".join(f"{o['kind']} {o['namespace']}/{o['name']} ({counted(g.get('pods') or 0, 'pod')} on "
                                         f"{counted(len(g.get('nodes') or []), 'node')})" for o, g in gangs[:5])
    if blast.get("error"):
        text += f"; {blast['error']}"
    return text
