"""The job as an incident subject, and failure domains above the node: ``correlation.job`` and
``correlation.domains`` (correlation.schema.json), read into rules the engine takes (engine/jobs.py,
engine/domains.py)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypedDict

from alertd.core.matchers import Matcher, parse_matchers
from alertd.core.vocabulary import SUSPECT_KINDS, SignalKind as K, signal_is
from alertd.core.yamlio import Path_


@dataclass(frozen=True, slots=True)
class JobRule:
    """What makes an alert a symptom of its job (it folds into the job's incident), what makes the job hung
    (its incident pages and takes over its suspects' pages), and which node incidents are its suspects."""

    enabled: bool = True
    match: tuple[Matcher, ...] = parse_matchers([signal_is(K.JOB_STALLED, K.STRAGGLER)])
    by: tuple[str, ...] = ("cluster", "namespace", "owner_kind", "owner_name")
    hang: tuple[Matcher, ...] = parse_matchers([signal_is(K.JOB_STALLED)])
    before: timedelta = timedelta(minutes=30)  # a suspect began at most this long before the stall
    after: timedelta = timedelta(minutes=10)  # ... or this long after it: a suspect alert that fired before the stall's
    kinds: tuple[str, ...] = SUSPECT_KINDS


@dataclass(frozen=True, slots=True)
class Domain:
    """One failure domain above the node (a rack, an NVLink clique, a zone): the alert labels that name a
    node's value of it, first present wins (a node label, or the form the rules join from kube_node_labels)."""

    name: str
    labels: tuple[str, ...]


# NVIDIA's nvidia.com/gpu.clique, a rack label, topology.kubernetes.io/zone as the rules join them, then as the
# node carries them (added from the Kubernetes API to an alert that names none of the others)
DEFAULT_DOMAINS = (
    Domain("NVLink domain", ("label_nvidia_com_gpu_clique", "clique", "nvidia.com/gpu.clique")),
    Domain("rack", ("label_rack", "rack", "label_topology_kubernetes_io_rack", "topology.kubernetes.io/rack")),
    Domain("zone", ("label_topology_kubernetes_io_zone", "zone", "topology.kubernetes.io/zone")),
)


@dataclass(frozen=True, slots=True)
class DomainRule:
    """Failure domains, narrowest first: a storm whose nodes share one is named by it, and a domain where
    ``share`` of its nodes (at least ``min_nodes``) are bad is an incident of its own."""

    domains: tuple[Domain, ...] = DEFAULT_DOMAINS
    min_nodes: int = 2
    share: float = 0.5
    # Nodes in one domain of a kind (an NVL72 rack's clique: 18), by kind, where the Kubernetes API's node
    # labels do not count them
    sizes: tuple[tuple[str, int], ...] = ()
    window: timedelta = timedelta(minutes=30)  # bad nodes of one domain count together this long

    def size(self, kind: str) -> int:
        return dict(self.sizes).get(kind, 0)


class SuspectsDoc(TypedDict, total=False):
    before: str
    after: str
    kinds: list[str]


class JobDoc(TypedDict, total=False):
    """``correlation.job`` as its schema admits it."""

    enabled: bool
    match: list[str]
    by: list[str]
    hang: list[str]
    suspects: SuspectsDoc


class DomainKindDoc(TypedDict, total=False):
    name: str
    labels: list[str]
    size: int


class DomainDoc(TypedDict, total=False):
    """``correlation.domains`` as its schema admits it."""

    kinds: list[DomainKindDoc]
    min_nodes: int
    share: float
    window: str


class Checks(Protocol):
    """What parsing needs of the rule loader: matchers and durations read with file:line problems."""

    def matchers(self, items: Any, path: Path_) -> tuple[Matcher, ...]: ...

    def duration(self, value: Any, path: Path_, default: timedelta) -> timedelta: ...

    def problem(self, path: Path_, message: str) -> None: ...


def parse_job(doc: JobDoc, check: Checks) -> JobRule:
    base, root = JobRule(), ("correlation", "job")
    suspects: SuspectsDoc = doc.get("suspects") or {}
    return JobRule(
        enabled=doc.get("enabled", True),
        match=check.matchers(doc["match"], root + ("match",)) if "match" in doc else base.match,
        by=tuple(doc.get("by") or base.by),
        hang=check.matchers(doc["hang"], root + ("hang",)) if "hang" in doc else base.hang,
        before=check.duration(suspects.get("before"), root + ("suspects", "before"), base.before),
        after=check.duration(suspects.get("after"), root + ("suspects", "after"), base.after),
        kinds=tuple(suspects.get("kinds") or base.kinds),
    )


def parse_domains(doc: DomainDoc, check: Checks) -> DomainRule:
    base, root = DomainRule(), ("correlation", "domains")
    kinds = doc.get("kinds")
    domains = tuple(Domain(k["name"], tuple(k["labels"])) for k in kinds) if kinds is not None else base.domains
    if len({d.name for d in domains}) != len(domains):
        check.problem(root + ("kinds",), "duplicate domain name")
    sizes = tuple((k["name"], k["size"]) for k in kinds or () if k.get("size"))
    return DomainRule(
        domains=domains,
        min_nodes=doc.get("min_nodes", base.min_nodes),
        share=doc.get("share", base.share),
        sizes=sizes,
        window=check.duration(doc.get("window"), root + ("window",), base.window),
    )


__all__ = ["Checks", "Domain", "DomainDoc", "DomainRule", "JobDoc", "JobRule", "parse_domains", "parse_job"]
