"""The job as an incident subject, and failure domains above the node: ``correlation.job`` and
``correlation.domains`` (correlation.schema.json), read into rules the engine takes (engine/jobs.py,
engine/domains.py)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Protocol

import msgspec
from msgspec import Meta

from alertd.core.matchers import Matcher
from alertd.core.sections import Section, Span, written, written_each
from alertd.core.vocabulary import SUSPECT_CHOICES, SUSPECT_KINDS, SignalKind, SignalKind as K, signal_is
from alertd.core.yamlio import Path_
from alertd.rules.declared import Matchers, matchers
from alertd.schemas.declared import in_order, word

FieldName = Annotated[str, Meta(pattern="^[A-Za-z_][A-Za-z0-9_]*$")]


SuspectKind = Annotated[str, word(in_order(SignalKind, SUSPECT_CHOICES))]


class Suspects(Section, frozen=True):
    """Node incidents on the job's nodes that began shortly before the stall."""

    before: Annotated[Span, Meta(description="A suspect began at most this long before the stall. Default 30m.")] = \
        written(Span.from_config, "30m")
    after: Annotated[Span, Meta(description=(
        "... or at most this long after it: a suspect's alert fires after its own `for:` (a GPU gone quiet 7 "
        "minutes in), possibly after the stall began. Default 10m."))] = written(Span.from_config, "10m")
    kinds: Annotated[tuple[SuspectKind, ...], Meta(min_length=1, extra_json_schema={"uniqueItems": True}, description=(
        "The signal kinds that make a node incident a suspect, most telling first. Suspects that began by the "
        "stall (their alert's `for:` allowed: 5 minutes) rank first, then by this order, then nearest the stall "
        "first."))] = written_each(str, SUSPECT_KINDS)


@dataclass(frozen=True, slots=True)
class JobRule:
    """What makes an alert a symptom of its job (it folds into the job's incident), what makes the job hung
    (its incident pages and takes over its suspects' pages), and which node incidents are its suspects
    (``correlation.job``, declared by :class:`Job`)."""

    enabled: bool
    match: tuple[Matcher, ...]
    by: tuple[str, ...]
    hang: tuple[Matcher, ...]
    before: timedelta  # a suspect began at most this long before the stall
    after: timedelta  # ... or this long after it: a suspect alert that fired before the stall's
    kinds: tuple[str, ...]


class Job(Section, frozen=True):
    """The job as an incident subject (engine/jobs.py): a job's own symptoms (a stall, a straggler) fold into ONE
    incident per job, keyed by `by`, listing the job's nodes and GPUs. A stalled job links the node incidents on
    its nodes that began shortly before the stall as suspects, names the first in its title, pages once, and
    takes over its suspects' pages."""

    enabled: Annotated[bool, Meta(description=(
        "false: the job's symptoms fold like any other alert (correlation groups). Default true."))] = True
    match: Annotated[Matchers, Meta(description=(
        "What makes an alert a symptom of its job. Default signal=~\"job_stalled|straggler\"."))] = \
        matchers(signal_is(K.JOB_STALLED, K.STRAGGLER))
    by: Annotated[tuple[FieldName, ...], Meta(min_length=1, description=(
        "The fields naming the job (labels every job alert carries: the rules join kube_pod_owner's top owner). "
        "An alert missing one folds by the groups instead. Default [cluster, namespace, owner_kind, owner_name]."))] \
        = ("cluster", "namespace", "owner_kind", "owner_name")
    hang: Annotated[Matchers, Meta(description=(
        "What makes the job hung, not just slow: such a job's incident looks for suspects, pages, and takes over "
        "their pages. Default signal=\"job_stalled\"."))] = matchers(signal_is(K.JOB_STALLED))
    suspects: Suspects = msgspec.field(default_factory=Suspects)


class Domain(Section, frozen=True):
    """One failure domain above the node (a rack, an NVLink clique, a zone): the alert labels that name a
    node's value of it, first present wins (a node label, or the form the rules join from kube_node_labels)."""

    name: Annotated[str, Meta(min_length=1, description="How titles name it: rack, NVLink domain.")]
    labels: Annotated[tuple[Annotated[str, Meta(min_length=1)], ...], Meta(min_length=1, description=(
        "Alert labels naming a node's domain of this kind, first present wins. A Kubernetes node label key "
        "(nvidia.com/gpu.clique, topology.kubernetes.io/rack) is read from the API where enrich.kube is set, and "
        "added to an alert naming none of the others."))]
    size: Annotated[int, Meta(ge=1, description=(
        "Nodes in one such domain (an NVL72 rack's NVLink clique: 18), where the Kubernetes API does not count "
        "them (the nodes carrying the domain's value of one of its node label keys). A kind with neither names "
        "storms only."))] = 0


# NVIDIA's nvidia.com/gpu.clique, a rack label, topology.kubernetes.io/zone as the rules join them, then as the
# node carries them (added from the Kubernetes API to an alert that names none of the others)
DEFAULT_DOMAINS = (
    Domain(name="NVLink domain", labels=("label_nvidia_com_gpu_clique", "clique", "nvidia.com/gpu.clique")),
    Domain(name="rack", labels=("label_rack", "rack", "label_topology_kubernetes_io_rack",
                                "topology.kubernetes.io/rack")),
    Domain(name="zone", labels=("label_topology_kubernetes_io_zone", "zone", "topology.kubernetes.io/zone")),
)


class DomainRule(Section, frozen=True):
    """Failure domains above the node (an NVLink clique, a rack, a zone), read from node labels the alerts carry
    (the label itself, or its kube_node_labels form joined in the rules). A storm whose nodes share one is named
    by it; a domain where `share` of its nodes are bad is an incident of its own (engine/domains.py)."""

    kinds: Annotated[tuple[Domain, ...], Meta(description=(
        "Domain kinds, narrowest first: a storm is named by the narrowest domain all its nodes share. Default: "
        "NVLink domain (nvidia.com/gpu.clique), rack, zone (topology.kubernetes.io/zone)."))] = DEFAULT_DOMAINS
    min_nodes: Annotated[int, Meta(ge=1, description="A domain incident needs at least this many bad nodes. Default 2.")] = 2
    share: Annotated[float, Meta(gt=0, le=1, description=(
        "A domain incident opens once this share of the domain's nodes are bad. Default 0.5."))] = 0.5
    window: Annotated[Span, Meta(description=(
        "Node incidents of one domain opened within this of each other count together. Default 30m."))] = \
        written(Span.from_config, "30m")

    @property
    def domains(self) -> tuple[Domain, ...]:
        return self.kinds

    @property
    def sizes(self) -> tuple[tuple[str, int], ...]:
        """Nodes in one domain of a kind, by kind, where the Kubernetes API's node labels do not count them."""
        return tuple((k.name, k.size) for k in self.kinds if k.size)

    def size(self, kind: str) -> int:
        return dict(self.sizes).get(kind, 0)


class Checks(Protocol):
    """What parsing needs of the rule loader: matchers read with file:line problems."""

    def matchers(self, items: Any, path: Path_) -> tuple[Matcher, ...]: ...

    def problem(self, path: Path_, message: str) -> None: ...


def parse_job(doc: Job, check: Checks) -> JobRule:
    root = ("correlation", "job")
    return JobRule(enabled=doc.enabled, match=check.matchers(doc.match, root + ("match",)), by=doc.by,
                   hang=check.matchers(doc.hang, root + ("hang",)), before=doc.suspects.before,
                   after=doc.suspects.after, kinds=tuple(map(str, doc.suspects.kinds)))


def check_domains(rule: DomainRule, check: Checks) -> DomainRule:
    """The rule, its kinds' names checked unique."""
    if len({d.name for d in rule.kinds}) != len(rule.kinds):
        check.problem(("correlation", "domains", "kinds"), "duplicate domain name")
    return rule


__all__ = ["Checks", "Domain", "DomainRule", "Job", "JobRule", "Suspects", "check_domains", "parse_job"]
