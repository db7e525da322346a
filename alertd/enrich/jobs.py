"""Which jobs a fault hit, how big they are, whose they are, and what the fault cost them.

A failing GPU kills the whole gang of a distributed training run: every pod of
the job, on every node, restarts from its last checkpoint. So the impact of an
incident is read per *job*, not per pod:

1. the GPU pods on the affected node (:class:`~alertd.enrich.kube.KubeContext` already reads
   them, with their owner chains);
2. each pod's top owner is the job (PyTorchJob, MPIJob, JobSet, RayJob, Job, Deployment ...);
3. the job's gang: every pod of the namespace whose owner chain ends at the same top
   owner, with its GPUs and node (one list of the namespace; owner reads are cached);
4. the cost, from :class:`CostModel` (docs/reliability-report.md, "Job impact")::

       lost work   = min(checkpoint_interval / 2, time the job had run at the fault)
                     (the whole run so far when checkpoint_interval is 0: no checkpoints)
       time lost   = lost work + restart_time
       GPU-hours   = gang GPUs x time lost

   Half an interval is the expected loss when a fault falls anywhere between two checkpoints.

:class:`JobImpactReader` is the reusable part: ``jobs_on_node(node)`` answers the same
question for a drain that has not happened yet, and :func:`owner_gangs` turns it into the gang lookup a
remediation's blast radius takes (``alertd.remediation.blast.GangLookup``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Mapping

from alertd.core.findings import Job
from alertd.core.json_types import JSONObject, JSONValue, as_object, string_map, text
from alertd.core.kube_findings import Pod
from alertd.core.model import Incident, parse_iso
from alertd.enrich.kube_api import KubeUnavailable, NotFound, metadata
from alertd.enrich.kube_owners import top_owner
from alertd.enrich.kube import KubeContext
from alertd.enrich.settings import CostModel, JobCostSettings

MAX_GANG_PODS = 4096  # pods of one namespace read to find a gang
MAX_SIZE_NODES = 2048  # nodes a job incident's ``job_size`` lists


@dataclass(frozen=True, slots=True)
class GangPod:
    namespace: str
    name: str
    node: str
    gpus: int
    phase: str = ""
    started: str = ""


@dataclass(slots=True)
class JobImpact:
    """One job a fault hits (or a drain would hit): its gang across nodes, its people, its cost."""

    kind: str
    name: str
    namespace: str
    api_version: str = ""
    team: str = ""
    channel: str = ""
    owner: str = ""
    gang: list[GangPod] = field(default_factory=list)
    hit_pods: list[str] = field(default_factory=list)  # pods of the gang on the affected node(s)
    time_lost: timedelta = timedelta(0)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.gang)

    @property
    def nodes(self) -> list[str]:
        return sorted({p.node for p in self.gang if p.node})

    @property
    def gpu_hours_lost(self) -> float:
        return round(self.gpus * self.time_lost.total_seconds() / 3600, 2)

    def started(self) -> datetime | None:
        times = [t for t in (parse_iso(p.started) for p in self.gang if p.started) if t is not None]
        return min(times) if times else None

    def to_finding(self) -> Job:
        """The ``jobs`` finding the incident shows."""
        return Job(kind=self.kind, name=self.name, namespace=self.namespace, api_version=self.api_version,
                   team=self.team, channel=self.channel, owner=self.owner, pods=len(self.gang), gpus=self.gpus,
                   nodes=len(self.nodes), hit_pods=tuple(self.hit_pods),
                   time_lost_seconds=int(self.time_lost.total_seconds()), gpu_hours_lost=self.gpu_hours_lost)


class JobImpactReader:
    """Jobs of pods on a node, their gangs and cost, from the Kubernetes API (reads only, cached)."""

    def __init__(self, kube: KubeContext, costs: JobCostSettings):
        self.kube = kube
        self.costs = costs

    async def jobs_for_pods(self, pods: list[Pod], at: datetime) -> list[JobImpact]:
        """``pods``: described GPU pods (KubeContext's shape: namespace, name, node, owner_chain, team,
        channel) on the affected node(s) -> one JobImpact per top owner, with its gang and cost at ``at``."""
        jobs: dict[tuple[str, str, str], JobImpact] = {}
        for pod in pods:
            key, top = top_owner(pod)
            job = jobs.get(key)
            if job is None:
                job = jobs[key] = JobImpact(kind=key[1], name=key[2], namespace=key[0],
                                            api_version=top.api_version, team=pod.team, channel=pod.channel)
            job.hit_pods.append(pod.name)
        for job in jobs.values():
            await self._fill(job, pods, at)
        return sorted(jobs.values(), key=lambda j: (-j.gpus, j.namespace, j.name))

    async def jobs_on_node(self, node: str, at: datetime) -> list[JobImpact]:
        """What draining ``node`` now (or a fault on it at ``at``) interrupts: the blast radius."""
        ctx = await self.kube.node_context(node)
        return await self.jobs_for_pods(list(ctx.pods), at)

    async def _fill(self, job: JobImpact, hit: list[Pod], at: datetime) -> None:
        if job.kind == "Pod":
            job.gang = [_gang_pod(p) for p in hit if p.name == job.name]
        else:
            try:
                job.gang = await self.gang(job.namespace, job.kind, job.name)
            except KubeUnavailable:
                job.gang = []
            if not job.gang:  # the list failed or the job is gone: what the node showed is all we know
                job.gang = [_gang_pod(p) for p in hit if p.name in job.hit_pods]
        top = await self._top_object(job)
        if top is not None:
            job.owner = job.owner or self._owner(top)
            if not job.team or not job.channel:
                team, channel = self.kube.team_and_channel([top])
                job.team, job.channel = job.team or team, job.channel or channel
        started = job.started()
        job.time_lost = self.costs.for_namespace(job.namespace).time_lost(at - started if started else timedelta(0))

    async def gang(self, ns: str, kind: str, name: str) -> list[GangPod]:
        """Every unfinished GPU pod of namespace ``ns`` whose owner chain ends at ``kind``/``name``."""
        out: list[GangPod] = []
        for pod in await self.kube.namespace_pods(ns, MAX_GANG_PODS):
            gpus = self.kube.gpu_count(pod)[0]
            if not gpus:
                continue
            chain, _ = await self.kube.owner_chain(ns, pod)
            if not chain or (chain[-1].kind, chain[-1].name) != (kind, name):
                continue
            spec, status = as_object(pod.get("spec")), as_object(pod.get("status"))
            out.append(GangPod(ns, text(metadata(pod), "name"), text(spec, "nodeName"), gpus, text(status, "phase"),
                               text(status, "startTime")))
        return sorted(out, key=lambda p: p.name)

    async def size(self, ns: str, kind: str, name: str) -> JSONObject | None:
        """A job's pods as the API lists them, for its incident (``job_size``): their GPUs (``nvidia.com/gpu``
        limits, else requests), pods and nodes; None for a job the API shows no GPU pod of."""
        gang = await self.gang(ns, kind, name)
        if not gang:
            return None
        nodes: list[JSONValue] = list(sorted({p.node for p in gang if p.node})[:MAX_SIZE_NODES])
        return {"gpus": sum(p.gpus for p in gang), "pods": len(gang), "nodes": nodes}

    async def _top_object(self, job: JobImpact) -> JSONObject | None:
        if job.kind == "Pod" or not job.api_version:
            return None
        try:
            return await self.kube.owner(job.namespace, {"apiVersion": job.api_version, "kind": job.kind,
                                                         "name": job.name})
        except (NotFound, KubeUnavailable):
            return None

    def _owner(self, obj: JSONObject) -> str:
        m = metadata(obj)
        labels, annotations = string_map(m.get("labels")), string_map(m.get("annotations"))
        return next((annotations.get(k) or labels.get(k) for k in self.costs.owner_keys
                     if annotations.get(k) or labels.get(k)), "") or ""


def job_of(inc: Incident) -> tuple[str, str, str] | None:
    """The namespace, owner kind and name a job incident's alerts name (the job rules' ``owner_kind`` and
    ``owner_name`` labels); None when they name no controller (a bare pod is its own, single-pod job)."""
    for m in inc.members.values():
        kind, name = m.labels.get("owner_kind", ""), m.labels.get("owner_name", "")
        ns = inc.namespace or m.subject.namespace or m.labels.get("namespace", "")
        if kind and name and ns and kind != "Pod":
            return ns, kind, name
    return None


def _gang_pod(p: Pod) -> GangPod:
    return GangPod(p.namespace, p.name, p.node, p.gpus or 0, p.phase, p.started)


class OwnerGangs:
    """A drain's gang lookup (``alertd.remediation.blast.GangLookup``) answered by owner chains: a pod's gang
    is every GPU pod of its job, with the job's size, nodes, owner and the GPU-hours a restart would cost.
    Built by :func:`owner_gangs` from the pods a blast radius lists."""

    def __init__(self, jobs: list[JobImpact]):
        self._by_pod = {(j.namespace, name): j for j in jobs for name in j.hit_pods}

    def gang(self, namespace: str, pod: Mapping[str, object]) -> JSONObject | None:
        job = self._by_pod.get((namespace, str(pod.get("name", ""))))
        if job is None or len(job.gang) < 2:
            return None
        nodes: list[JSONValue] = list(job.nodes)
        return {"kind": job.kind, "name": job.name, "pods": len(job.gang), "nodes": nodes, "gpus": job.gpus,
                "owner": job.owner, "team": job.team, "gpuHoursLost": job.gpu_hours_lost}


async def owner_gangs(reader: JobImpactReader, pods: list[Pod], at: datetime) -> OwnerGangs:
    """``pods``: described pods (with their owner chains) on the nodes an action touches."""
    return OwnerGangs(await reader.jobs_for_pods([p for p in pods if p.gpus], at))


__all__ = ["CostModel", "GangPod", "JobCostSettings", "JobImpact", "JobImpactReader", "OwnerGangs", "job_of", "owner_gangs"]
