"""What enrichment found, as its readers (notify, the web UI) see it: typed views of the incident
annotations that alertd/enrich writes (their shapes are documented in docs/enrichment.md).

The store keeps the annotations as JSON, unchanged; these views read them. Incidents stored by earlier
versions may carry other shapes (text, a dict, a list of text), so each reader here accepts those too,
in one place instead of in every renderer. A module of its own, so notify and enrich do not import
each other.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

# Annotation keys (documented in docs/enrichment.md).
LOG_EVIDENCE = "log_evidence"
LOGS_UNAVAILABLE = "logs_unavailable"
PODS = "pods"
OWNERS = "owners"
JOBS = "jobs"  # the jobs a fault hit: gang, owner, GPU-hours lost (alertd/enrich/jobs.py)


def as_lines(value: Any) -> list[str]:
    """Any annotation value as display lines: text, lists of text or lists of small dicts."""
    if value is None or value is False:
        return []
    if isinstance(value, str):
        return [line for line in value.splitlines() if line.strip()]
    if isinstance(value, dict):
        for key in ("lines", "items", "entries", "hits", "pods", "owners"):
            if isinstance(value.get(key), list):
                return as_lines(value[key])
        return [", ".join(f"{k}: {v}" for k, v in value.items() if not isinstance(v, (dict, list)))]
    if isinstance(value, (list, tuple)):
        return [_item_line(item) for item in value]
    return [str(value)]


def _item_line(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    text = item.get("message") or item.get("line") or item.get("text")
    if text is not None:
        at = item.get("timestamp") or item.get("at") or item.get("time") or ""
        host = item.get("host") or item.get("source") or ""
        return " ".join(str(p) for p in (at, host, text) if p)
    if item.get("name") or item.get("pod"):
        ns = item.get("namespace", "")
        name = item.get("name") or item.get("pod")
        extra = ", ".join(f"{k}={v}" for k, v in item.items()
                          if k not in ("namespace", "name", "pod") and isinstance(v, (str, int)))
        return f"{ns + '/' if ns else ''}{name}" + (f" ({extra})" if extra else "")
    return ", ".join(f"{k}: {v}" for k, v in item.items() if not isinstance(v, (dict, list)))


def _dicts(value: Any) -> list[dict[str, Any]] | None:
    """The documented shape (a list of objects), or None for anything else."""
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    return None


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

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Owner":
        return cls(kind=str(d.get("kind") or ""), name=str(d.get("name") or ""),
                   namespace=str(d.get("namespace") or ""), team=str(d.get("team") or ""),
                   channel=str(d.get("channel") or ""), pods=_int(d.get("pods")), gpus=_int(d.get("gpus")))

    def line(self) -> str:
        """kind namespace/name · team · channel · size."""
        name = "/".join(x for x in (self.namespace, self.name) if x)
        parts = [" ".join(x for x in (self.kind, name) if x) or (self.team or "?")]
        if self.team:
            parts.append(f"team {self.team}")
        if self.channel:
            parts.append(self.channel)
        if self.pods:
            size = f"{self.pods} pod{'s' if self.pods != 1 else ''}"
            if self.gpus:
                size += f", {self.gpus} GPUs"
            parts.append(size)
        return " · ".join(parts)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True, slots=True)
class Owners:
    """Who owns what runs on the incident's GPUs: the ``owners`` annotation."""

    owners: tuple[Owner, ...] = ()
    stored: Any = None  # the annotation as stored: payloads (PagerDuty details, webhook) carry it unchanged

    @classmethod
    def of(cls, annotations: Mapping[str, Any]) -> "Owners":
        value = annotations.get(OWNERS)
        entries = _dicts(value)
        return cls(tuple(Owner.from_dict(o) for o in entries or ()), value)

    def __bool__(self) -> bool:
        return bool(self.stored)

    def lines(self) -> list[str]:
        return [o.line() for o in self.owners] if _dicts(self.stored) is not None else as_lines(self.stored)

    def teams(self, label_names: Iterable[str]) -> list[str]:
        """Teams named by the owners, in order (older shapes: text, ``{"team": ...}``, ``{"labels": {...}}``)."""
        return _teams(self.stored, tuple(label_names))

    def channel(self) -> str:
        """The first owner's own channel (from its namespace/workload annotation), or ""."""
        value = self.stored
        for o in value if isinstance(value, list) else [value]:
            if isinstance(o, dict) and isinstance(o.get("channel"), str) and o["channel"].strip():
                return str(o["channel"]).strip()
        return ""


def _teams(value: Any, label_names: tuple[str, ...]) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, dict):
        for key in ("team", "teams", "owner", "owners"):
            if value.get(key):
                return _teams(value[key], label_names)
        labels: dict[str, Any] = value["labels"] if isinstance(value.get("labels"), dict) else value
        return [str(labels[n]) for n in label_names if isinstance(labels.get(n), str) and labels.get(n)]
    if isinstance(value, list):
        out: list[str] = []
        for v in value:
            out.extend(_teams(v, label_names))
        return out
    return []


@dataclass(frozen=True, slots=True)
class Jobs:
    """The ``jobs`` annotation: one object per job a fault hit (kind, namespace, name, owner, team, pods,
    gpus, nodes, hitPods, timeLostSeconds, gpuHoursLost)."""

    jobs: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, annotations: Mapping[str, Any]) -> "Jobs":
        return cls(tuple(_dicts(annotations.get(JOBS)) or ()))

    def __bool__(self) -> bool:
        return bool(self.jobs)

    @property
    def gpu_hours_lost(self) -> float:
        return round(sum(_float(j.get("gpuHoursLost")) for j in self.jobs), 2)

    def line(self, limit: int = 2) -> str:
        """One line: the costliest jobs (gang size, nodes, owner, team), how many more, the GPU-hours lost."""
        if not self.jobs:
            return ""
        ranked = sorted(self.jobs, key=lambda j: -_float(j.get("gpuHoursLost")))
        parts = []
        for j in ranked[:limit]:
            who = ", ".join(x for x in (f"owner {j['owner']}" if j.get("owner") else "",
                                        f"team {j['team']}" if j.get("team") else "") if x)
            parts.append(f"{j.get('kind', '')} {j.get('namespace', '')}/{j.get('name', '')}: {_int(j.get('gpus'))} GPUs"
                         f" on {_int(j.get('nodes'))} nodes" + (f" ({who})" if who else ""))
        more = f" and {len(ranked) - limit} more" if len(ranked) > limit else ""
        return "; ".join(parts) + more + f" ≈ {self.gpu_hours_lost:,.1f} GPU-hours lost"


def _float(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


@dataclass(frozen=True, slots=True)
class Evidence:
    """What enrichment found on the node(s): kernel log lines, the pods on the GPUs, and why logs are missing."""

    log: Any = None  # ``log_evidence``: a list of line objects (older: text or a list of text)
    pods: Any = None  # ``pods``: a list of pod objects
    logs_unavailable: Any = None  # the reason, absent when logs are fine

    @classmethod
    def of(cls, annotations: Mapping[str, Any]) -> "Evidence":
        return cls(annotations.get(LOG_EVIDENCE), annotations.get(PODS), annotations.get(LOGS_UNAVAILABLE))

    def log_lines(self) -> list[str]:
        """Each kernel log line as ``time host line``."""
        return as_lines(self.log)

    def pod_lines(self) -> list[str]:
        """namespace/name · phase · GPUs · team."""
        pods = _dicts(self.pods)
        if pods is None:
            return as_lines(self.pods)
        out = []
        for p in pods:
            name = "/".join(x for x in (p.get("namespace", ""), p.get("name") or p.get("pod", "")) if x)
            parts = [name or "?"]
            if p.get("phase"):
                parts.append(str(p["phase"]))
            if p.get("gpus"):
                parts.append(f"{p['gpus']} GPU{'s' if p['gpus'] != 1 else ''}")
            if p.get("team"):
                parts.append(f"team {p['team']}")
            out.append(" · ".join(parts))
        return out

    def unavailable_reasons(self) -> list[str]:
        return as_lines(self.logs_unavailable)


__all__ = ["JOBS", "LOGS_UNAVAILABLE", "LOG_EVIDENCE", "OWNERS", "PODS", "Evidence", "Jobs", "Owner", "Owners",
           "as_lines"]
