"""Labels -> Subject: which cluster, node, GPU and pod an alert is about (the rules: receive/identity.py)."""
from __future__ import annotations

from sys import intern
from typing import Annotated, Mapping

import msgspec
from msgspec import Meta

from alertd.gpu.pci import normalize_pci
from alertd.core.model import GPU, Alert, Subject
from alertd.core.sections import Section
from alertd.core.vocabulary import LOG_HOST_LABELS, NODE_LABELS, XID_LABELS
from alertd.engine.plausible import NOT_NODE_PATTERN
from alertd.engine.identity import (
    EXPORTER_POD_PATTERN,
    LOG_LINE_FIELDS,
    NodeLookup,
    find_node,
    gpu_at_line,
    nvrm_line,
    strip_port,
    workload,
)


Labels = tuple[str, ...]
Regex = Annotated[str, Meta(extra_json_schema={"format": "regex"})]


class NormalizeSettings(Section, frozen=True):
    """Which labels name an alert's cluster, node and Xid: the ``normalize`` section of alertd.yml (besides its
    Kubernetes lookups, alertd/enrich/settings.py)."""

    cluster_label: Annotated[str, Meta(description="Label naming the cluster.")] = "cluster"
    # Alerts without the label belong to this cluster, so grouping by cluster still works
    # for a single-cluster setup whose alerts carry no cluster label.
    cluster_default: Annotated[str, Meta(description="Cluster name for alerts without the cluster label.")] = \
        msgspec.field(default="default", name="cluster")
    node_labels: Annotated[Labels, Meta(min_length=1, description=(
        "Labels tried in order for the node. A value matching exporter_pod_pattern is never a node: it is resolved "
        "(node_map, the Kubernetes API) or skipped; instance is looked up among the nodes' addresses and pod IPs, "
        "port stripped."))] = NODE_LABELS
    exporter_pod_pattern: Annotated[Regex, Meta(description=(
        "Anchored regex matching dcgm-exporter pod names (the pod label of a dcgm-exporter target, and Hostname "
        "where dcgm-exporter runs without NODE_NAME: 3.x, or 4.x outside its chart and the GPU Operator). Such a "
        "name is resolved to its node (node_map, then the pod's spec.nodeName through the Kubernetes API of "
        "enrich.kube) and never used as a node itself. Empty turns the check off."))] = EXPORTER_POD_PATTERN
    not_node_pattern: Annotated[Regex, Meta(description=(
        "Anchored regex matching service and container names that are never a host (Docker Compose targets such "
        "as instance=\"dcgm-exporter:9400\"): such a value in Hostname, hostname or instance is refused as a "
        "node, and the refusal shown. Empty turns the check off. Container IDs (12 or 64 hex digits) and values "
        "equal to the job, service or container label are always refused."))] = NOT_NODE_PATTERN
    node_map: Annotated[dict[str, Annotated[str, Meta(min_length=1)]], Meta(description=(
        "Exporter pod name, instance (with or without port) or address -> node name, tried before the "
        "Kubernetes API."))] = msgspec.field(default_factory=dict)
    log_host_labels: Annotated[Labels, Meta(description=(
        "Node labels that come from log pipelines (Loki, Graylog): shown as 'log host' in node_source."))] = \
        LOG_HOST_LABELS
    log_line_fields: Annotated[Labels, Meta(description=(
        "Annotations, then labels, of these names are read for an NVRM Xid line ('NVRM: Xid (PCI:0000:3b:00): "
        "79, ...'): it gives the GPU's PCI address and the Xid code."))] = LOG_LINE_FIELDS
    xid_labels: Annotated[Labels, Meta(description="Labels holding the Xid code.")] = XID_LABELS
    xid_annotation: Annotated[str, Meta(description="Annotation holding the Xid code when no label does.")] = "xid"


class NormalizeConfig(NormalizeSettings, frozen=True):
    """The section's options and the labels alertd reads as they are (pods, namespaces, containers)."""

    pod_labels: Labels = ("pod", "exported_pod")
    namespace_labels: Labels = ("namespace", "exported_namespace")
    container_labels: Labels = ("container", "exported_container")
    extra: dict[str, str] = msgspec.field(default_factory=dict)

    @classmethod
    def of(cls, settings: NormalizeSettings) -> "NormalizeConfig":
        return cls(**{name: getattr(settings, name) for name in NormalizeSettings.__struct_fields__})


def _first(labels: dict[str, str], names: tuple[str, ...]) -> tuple[str, str]:
    for name in names:
        value = labels.get(name)
        if value:
            return name, value
    return "", ""


def source_label(labels: dict[str, str], names: tuple[str, ...]) -> str:
    """Which of ``names`` gave the value (the first non-empty one), "" if none: for `alertd explain`."""
    return _first(labels, names)[0]


def _gpu(labels: dict[str, str], annotations: Mapping[str, str], cfg: NormalizeConfig) -> GPU | None:
    """The GPU from dcgm-exporter's labels; the PCI address of an NVRM Xid line in the text fills a gap."""
    uuid = labels.get("UUID") or labels.get("uuid") or labels.get("gpu_uuid") or ""  # dcgm, nvidia_gpu_exporter
    index = labels.get("gpu") or labels.get("minor_number") or labels.get("deviceid") or ""  # OpenPAI, Autopilot
    pci = normalize_pci(labels.get("pci_bus_id") or labels.get("pci") or "")
    if not pci:
        line = nvrm_line(labels, annotations, cfg.log_line_fields)
        pci = line[0].pci if line is not None else ""
    if not uuid:  # a log alert's "NVRM: GPU at PCI:...: GPU-<uuid>" line, when it names the same GPU (or none other)
        at = gpu_at_line(labels, annotations, cfg.log_line_fields)
        uuid, pci = (at[1], at[0]) if at is not None and pci in ("", at[0]) else (uuid, pci)
    if not (uuid or index or pci):
        return None
    return GPU(uuid=intern(uuid), index=intern(index), pci_bus_id=intern(pci), model=intern(labels.get("modelName", "")),
               serial=intern(labels.get("serial") or labels.get("gpu_serial") or ""))


def subject_of(labels: dict[str, str], cfg: NormalizeConfig, annotations: Mapping[str, str] | None = None,
               lookup: NodeLookup | None = None) -> Subject:
    """Interned: the engine keeps a subject per alert, and their strings repeat across alerts (cluster, node,
    GPU model). ``lookup`` is the service's Kubernetes index (already filled: no I/O here)."""
    cluster = labels.get(cfg.cluster_label) or cfg.cluster_default
    found = find_node(labels, cluster, cfg, lookup)
    gpu = _gpu(labels, annotations or {}, cfg)
    origin = found.origin or (f"gpu {gpu.uuid}" if not found.node and gpu is not None and gpu.uuid else "")
    namespace, pod, container = workload(labels, cfg)
    return Subject(
        cluster=intern(cluster),
        node=intern(found.node),
        gpu=gpu,
        namespace=intern(namespace),
        pod=intern(pod),
        container=intern(container),
        node_source=intern(found.source),
        origin=intern(origin),
        node_refused=intern("\n".join(found.refused)),
    )


def xid_source(alert: Alert, cfg: NormalizeConfig) -> tuple[int | None, str]:
    """The Xid code in the alert's labels or `xid` annotation, and where it was found ("label xid=79")."""
    name, raw = _first(alert.labels, cfg.xid_labels)
    where = f"label {name}={raw}"
    if not raw:
        raw = alert.annotations.get(cfg.xid_annotation, "")
        where = f"annotation {cfg.xid_annotation}={raw}"
    if not raw:
        line = nvrm_line(alert.labels, alert.annotations, cfg.log_line_fields)
        if line is not None:
            return line[0].xid, f"NVRM line in {line[1]}"
    try:
        code = int(float(raw))
    except (TypeError, ValueError, OverflowError):
        return None, ""
    return (code, where) if code > 0 else (None, "")


def xid_of(alert: Alert, cfg: NormalizeConfig) -> int | None:
    return xid_source(alert, cfg)[0]


def normalize(alert: Alert, cfg: NormalizeConfig, lookup: NodeLookup | None = None) -> Alert:
    alert.subject = subject_of(alert.labels, cfg, alert.annotations, lookup)
    return alert


__all__ = ["NormalizeConfig", "NormalizeSettings", "normalize", "source_label", "strip_port", "subject_of", "xid_of", "xid_source"]
