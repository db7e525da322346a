"""What enrichment and the people on call found for an incident, as typed values: kernel-log evidence,
the Kubernetes context (alertd/core/kube_findings.py), the jobs a fault hit, the Alertmanager silence and
the remediation proposal. ``Incident.findings`` gives them, one field each; alertd/enrich writes them with
``to_json()`` (the annotation shapes documented in docs/enrichment.md).

The store keeps the annotations as JSON, unchanged. :meth:`Findings.from_annotations` is the one place that
reads them back, including the shapes earlier versions stored (text, a list of text, an owners object naming
the team): every reader after it sees the typed values only. A module of its own, so notify and enrich do
not import each other.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping

from alertd.core.json_types import (JSONObject, JSONValue, as_object, each, integer, number, objects, optional_integer,
                                    optional_text, string_map, strings, text)
from alertd.core.kube_findings import KubeNode, NodeEvent, Pod
from alertd.core.vocabulary import WAITING_STATES
from alertd.core.words import counted

# Annotation keys (documented in docs/enrichment.md).
LOG_EVIDENCE = "log_evidence"
LOGS_UNAVAILABLE = "logs_unavailable"
KUBE_NODE = "kube_node"
KUBE_NODES = "kube_nodes"
PODS = "pods"
OWNERS = "owners"
JOBS = "jobs"  # the jobs a fault hit: gang, owner, GPU-hours lost (alertd/enrich/jobs.py)
NODE_EVENTS = "node_events"
KUBE_UNAVAILABLE = "kube_unavailable"
SILENCE = "silence"  # the Alertmanager silence alertd created for the incident
REMEDIATION = "remediation"  # the remediation proposal shown on the incident (alertd/app/remediate.py)


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    """One kernel-log line found on the node (``log_evidence``); the Xid fields are None on other lines, the
    SXid fields (an NVSwitch fault, never a GPU's) None on lines that are not one."""

    line: str
    time: str | None = None  # UTC with milliseconds
    host: str = ""
    node: str = ""
    xid: int | None = None
    pci: str | None = None
    gpu_uuid: str | None = None
    pid: int | None = None
    process: str | None = None
    gpu_instance: int | None = None  # MIG
    compute_instance: int | None = None
    pod: str = ""
    sxid: int | None = None
    switch: str = ""  # the NVSwitch, "nvswitch0@0000:05:00"
    fatal: bool = False

    def display(self) -> str:
        """``time host line``."""
        return " ".join(p for p in (self.time or "", self.host, self.line) if p)

    def to_json(self) -> JSONObject:
        out: JSONObject = {"time": self.time, "host": self.host, "node": self.node, "line": self.line,
                           "xid": self.xid, "pci": self.pci, "gpu_uuid": self.gpu_uuid, "pid": self.pid,
                           "process": self.process}
        if self.gpu_instance is not None:
            out["mig"] = {"gpu_instance": self.gpu_instance, "compute_instance": self.compute_instance}
        if self.pod:
            out["pod"] = self.pod
        if self.sxid is not None:
            out.update(sxid=self.sxid, switch=self.switch, fatal=self.fatal)
        return out

    @classmethod
    def from_json(cls, d: JSONObject) -> "EvidenceLine":
        mig = as_object(d.get("mig"))
        return cls(line=text(d, "line") or text(d, "message"), time=optional_text(d, "time"), host=text(d, "host"),
                   node=text(d, "node"), xid=optional_integer(d, "xid"), pci=optional_text(d, "pci"),
                   gpu_uuid=optional_text(d, "gpu_uuid"), pid=optional_integer(d, "pid"),
                   process=optional_text(d, "process"), gpu_instance=optional_integer(mig, "gpu_instance"),
                   compute_instance=optional_integer(mig, "compute_instance"), pod=text(d, "pod"),
                   sxid=optional_integer(d, "sxid"), switch=text(d, "switch"), fatal=d.get("fatal") is True)


@dataclass(frozen=True, slots=True)
class Owner:
    """The top owner of pods on the incident's GPUs (a workload: PyTorchJob, Deployment, a bare Pod)."""

    kind: str = ""
    name: str = ""
    namespace: str = ""
    team: str = ""
    channel: str = ""
    pods: int = 0
    gpus: int = 0
    labels: tuple[tuple[str, str], ...] = ()  # earlier versions stored the owner's labels instead of its team

    def line(self) -> str:
        """kind namespace/name · team · channel · size."""
        name = "/".join(x for x in (self.namespace, self.name) if x)
        what = " ".join(x for x in (self.kind, name) if x)
        parts = [what] if what else []
        if self.team:
            parts.append(f"team {self.team}")
        if self.channel:
            parts.append(self.channel)
        if self.pods:
            size = counted(self.pods, "pod")
            if self.gpus:
                size += f", {counted(self.gpus, 'GPU')}"
            parts.append(size)
        return " · ".join(parts) or ", ".join(f"{k}: {v}" for k, v in self.labels) or "?"

    def teams(self, label_names: Iterable[str]) -> list[str]:
        if self.team:
            return [self.team]
        labels = dict(self.labels)
        return [labels[n] for n in label_names if labels.get(n)]

    def to_json(self) -> JSONObject:
        return {"kind": self.kind, "name": self.name, "namespace": self.namespace, "team": self.team,
                "channel": self.channel, "pods": self.pods, "gpus": self.gpus}

    @classmethod
    def from_json(cls, d: JSONObject) -> "Owner":
        return cls(kind=text(d, "kind"), name=text(d, "name"), namespace=text(d, "namespace"), team=text(d, "team"),
                   channel=text(d, "channel").strip(), pods=integer(d, "pods"), gpus=integer(d, "gpus"))


@dataclass(frozen=True, slots=True)
class Job:
    """One job a fault hit (``jobs``): its gang across nodes, its people, the GPU-hours it lost."""

    kind: str
    name: str
    namespace: str
    api_version: str = ""
    team: str = ""
    channel: str = ""
    owner: str = ""
    pods: int = 0
    gpus: int = 0
    nodes: int = 0
    hit_pods: tuple[str, ...] = ()
    time_lost_seconds: int = 0
    gpu_hours_lost: float = 0.0

    @property
    def key(self) -> tuple[str, str, str]:
        return self.namespace, self.kind, self.name

    def to_json(self) -> JSONObject:
        return {"kind": self.kind, "name": self.name, "namespace": self.namespace, "apiVersion": self.api_version,
                "team": self.team, "channel": self.channel, "owner": self.owner, "pods": self.pods,
                "gpus": self.gpus, "nodes": self.nodes, "hitPods": list[JSONValue](self.hit_pods),
                "timeLostSeconds": self.time_lost_seconds, "gpuHoursLost": self.gpu_hours_lost}

    @classmethod
    def from_json(cls, d: JSONObject) -> "Job":
        return cls(kind=text(d, "kind"), name=text(d, "name"), namespace=text(d, "namespace"),
                   api_version=text(d, "apiVersion"), team=text(d, "team"), channel=text(d, "channel"),
                   owner=text(d, "owner"), pods=integer(d, "pods"), gpus=integer(d, "gpus"), nodes=integer(d, "nodes"),
                   hit_pods=tuple(strings(d.get("hitPods"))), time_lost_seconds=integer(d, "timeLostSeconds"),
                   gpu_hours_lost=number(d, "gpuHoursLost"))


def jobs_line(jobs: Iterable[Job], limit: int = 2) -> str:
    """One line: the costliest jobs (gang size, nodes, owner, team), how many more, the GPU-hours lost."""
    ranked = sorted(jobs, key=lambda j: -j.gpu_hours_lost)
    if not ranked:
        return ""
    parts = []
    for j in ranked[:limit]:
        who = ", ".join(x for x in (f"owner {j.owner}" if j.owner else "", f"team {j.team}" if j.team else "") if x)
        parts.append(f"{j.kind} {j.namespace}/{j.name}: {counted(j.gpus, 'GPU')} on {counted(j.nodes, 'node')}" + (f" ({who})" if who else ""))
    more = f" and {len(ranked) - limit} more" if len(ranked) > limit else ""
    return "; ".join(parts) + more + f" ≈ {gpu_hours_lost(ranked):,.1f} GPU-hours lost"


def gpu_hours_lost(jobs: Iterable[Job]) -> float:
    return round(sum(j.gpu_hours_lost for j in jobs), 2)


@dataclass(frozen=True, slots=True)
class SilenceFinding:
    """The Alertmanager silence alertd created for the incident (``silence``)."""

    id: str
    starts_at: str = ""
    ends_at: str = ""
    created_by: str = ""
    matchers: tuple[JSONObject, ...] = ()  # as sent to Alertmanager (alertd/alertmanager/silences.py)

    def to_json(self) -> JSONObject:
        return {"id": self.id, "startsAt": self.starts_at, "endsAt": self.ends_at, "createdBy": self.created_by,
                "matchers": list[JSONValue](self.matchers)}

    @classmethod
    def from_json(cls, d: JSONObject) -> "SilenceFinding":
        return cls(text(d, "id"), text(d, "startsAt"), text(d, "endsAt"), text(d, "createdBy"),
                   tuple(objects(d.get("matchers"))))


@dataclass(frozen=True, slots=True)
class RemediationFinding:
    """The remediation shown on the incident (``remediation``): what alertd proposes and where it stands."""

    id: str
    kind: str = ""
    action: str = ""
    state: str = ""
    nodes: tuple[str, ...] = ()
    dry_run: bool = False
    text: str = ""
    approvals: tuple[str, ...] = ()
    approvals_needed: int = 1

    @property
    def waiting(self) -> bool:
        """Proposed, or held by the breaker: people may approve or cancel it."""
        return self.state in WAITING_STATES

    def to_json(self) -> JSONObject:
        return {"id": self.id, "kind": self.kind, "action": self.action, "state": self.state,
                "nodes": list[JSONValue](self.nodes), "dryRun": self.dry_run, "text": self.text,
                "approvals": list[JSONValue](self.approvals), "approvalsNeeded": self.approvals_needed}

    @classmethod
    def from_json(cls, d: JSONObject) -> "RemediationFinding":
        return cls(id=text(d, "id"), kind=text(d, "kind"), action=text(d, "action"), state=text(d, "state"),
                   nodes=tuple(strings(d.get("nodes"))), dry_run=d.get("dryRun") is True, text=text(d, "text"),
                   approvals=tuple(strings(d.get("approvals"))), approvals_needed=integer(d, "approvalsNeeded", 1))


@dataclass(frozen=True)  # no slots: log_evidence is a cached_property
class Findings:
    """Everything found for an incident, one field each (absent: empty, or None where "not looked" differs
    from "found nothing").

    The kernel-log lines are kept as stored and read when first asked for (:attr:`log_evidence`): they are
    most of the annotations (up to ``max_evidence`` lines of a dozen fields), and ``Incident.findings`` is
    read on every routing step and several times per Slack render by readers that want only the owners,
    the silence or the remediation."""

    stored_evidence: JSONValue = None  # the ``log_evidence`` annotation as stored
    logs_unavailable: str | None = None  # the reason logs are missing ("" when unknown); None when fine
    kube_node: KubeNode | None = None  # single-node incidents
    kube_nodes: tuple[KubeNode, ...] = ()  # fleet incidents
    pods: tuple[Pod, ...] = ()
    owners: tuple[Owner, ...] = ()
    jobs: tuple[Job, ...] = ()
    node_events: tuple[NodeEvent, ...] = ()
    kube_unavailable: str | None = None
    silence: SilenceFinding | None = None
    remediation: RemediationFinding | None = None

    @cached_property
    def log_evidence(self) -> tuple[EvidenceLine, ...] | None:
        """The kernel-log lines found on the node(s): None when not searched; () when searched, nothing found."""
        return _evidence(self.stored_evidence) if self.stored_evidence is not None else None

    @property
    def evidence(self) -> tuple[EvidenceLine, ...]:
        return self.log_evidence or ()

    @property
    def nodes(self) -> tuple[KubeNode, ...]:
        """The Kubernetes state of the incident's node(s), whichever key holds it."""
        return (self.kube_node,) if self.kube_node is not None else self.kube_nodes

    def log_lines(self) -> list[str]:
        return [e.display() for e in self.evidence]

    def pod_lines(self) -> list[str]:
        return [p.line() for p in self.pods]

    def owner_lines(self) -> list[str]:
        return [o.line() for o in self.owners]

    def teams(self, label_names: Iterable[str]) -> list[str]:
        """Teams named by the owners, in order."""
        names = tuple(label_names)
        return [t for o in self.owners for t in o.teams(names)]

    def channel(self) -> str:
        """The first owner's own channel (from its namespace/workload annotation), or ""."""
        return next((o.channel for o in self.owners if o.channel), "")

    def jobs_line(self, limit: int = 2) -> str:
        return jobs_line(self.jobs, limit)

    @property
    def gpu_hours_lost(self) -> float:
        return gpu_hours_lost(self.jobs)

    @classmethod
    def from_annotations(cls, ann: Mapping[str, JSONValue]) -> "Findings":
        """The findings in an incident's annotations, in the documented shapes or earlier versions' ones."""
        node = ann.get(KUBE_NODE)
        silence, remediation = as_object(ann.get(SILENCE)), as_object(ann.get(REMEDIATION))
        return cls(
            stored_evidence=ann.get(LOG_EVIDENCE),
            logs_unavailable=_reason(ann.get(LOGS_UNAVAILABLE)),
            kube_node=KubeNode.from_json(node) if isinstance(node, dict) else None,
            kube_nodes=each(KubeNode.from_json, ann.get(KUBE_NODES)),
            pods=tuple(Pod.from_text(p) if isinstance(p, str) else Pod.from_json(p)
                       for p in _items(ann.get(PODS)) if isinstance(p, (str, dict))),
            owners=_owners(ann.get(OWNERS)),
            jobs=each(Job.from_json, ann.get(JOBS)),
            node_events=each(NodeEvent.from_json, ann.get(NODE_EVENTS)),
            kube_unavailable=_reason(ann.get(KUBE_UNAVAILABLE)),
            silence=SilenceFinding.from_json(silence) if text(silence, "id") else None,
            remediation=RemediationFinding.from_json(remediation) if remediation else None)


def _items(value: JSONValue) -> list[JSONValue]:
    """A list as stored; an object listing its items under a key (earlier versions) gives those."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("items", "pods", "lines"):
            if isinstance(value.get(key), list):
                return _items(value[key])
    return []


def _reason(value: JSONValue) -> str | None:
    """An unavailability mark: a reason, True (earlier versions: no reason), or absent."""
    if value is None or value is False or value == "":
        return None
    return value if isinstance(value, str) else ""


def _evidence(value: JSONValue) -> tuple[EvidenceLine, ...]:
    if isinstance(value, str):  # earlier versions: the lines as text
        return tuple(EvidenceLine(line) for line in value.splitlines() if line.strip())
    return tuple(EvidenceLine(v) if isinstance(v, str) else EvidenceLine.from_json(v)
                 for v in _items(value) if isinstance(v, (str, dict)))


def _owners(value: JSONValue) -> tuple[Owner, ...]:
    """The documented list of owner objects; earlier versions stored text ("team-a, team-b"), an object naming
    the team (``team``/``teams``/``owner``/``owners``) or the owner's ``labels``."""
    if isinstance(value, str):
        return tuple(Owner(team=t.strip()) for t in value.split(",") if t.strip())
    if isinstance(value, list):
        return tuple(o for v in value for o in (_owners(v) if not isinstance(v, dict) or "labels" in v
                                                 or not ("kind" in v or "name" in v) else (Owner.from_json(v),)))
    if isinstance(value, dict):
        for key in ("team", "teams", "owner", "owners"):
            if value.get(key):
                return _owners(value[key])
        return (Owner(labels=tuple(string_map(value.get("labels") if isinstance(value.get("labels"), dict)
                                              else value).items())),)
    return ()


__all__ = ["JOBS", "KUBE_NODE", "KUBE_NODES", "KUBE_UNAVAILABLE", "LOGS_UNAVAILABLE", "LOG_EVIDENCE", "NODE_EVENTS",
           "OWNERS", "PODS", "REMEDIATION", "SILENCE", "EvidenceLine", "Findings", "Job", "Owner",
           "RemediationFinding", "SilenceFinding", "gpu_hours_lost", "jobs_line"]
