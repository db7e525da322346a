"""Labels -> Subject: which cluster, node, GPU and pod an alert is about (the rules: receive/identity.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from sys import intern
from typing import Mapping

from alertd.gpu.pci import normalize_pci
from alertd.core.model import GPU, Alert, Subject
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


@dataclass(frozen=True, slots=True)
class NormalizeConfig:
    cluster_label: str = "cluster"
    # Alerts without the label belong to this cluster, so grouping by cluster still works
    # for a single-cluster setup whose alerts carry no cluster label.
    cluster_default: str = "default"
    node_labels: tuple[str, ...] = NODE_LABELS  # first one naming a node wins
    xid_labels: tuple[str, ...] = XID_LABELS  # first one present wins
    xid_annotation: str = "xid"
    pod_labels: tuple[str, ...] = ("pod", "exported_pod")
    namespace_labels: tuple[str, ...] = ("namespace", "exported_namespace")
    container_labels: tuple[str, ...] = ("container", "exported_container")
    exporter_pod_pattern: str = EXPORTER_POD_PATTERN  # anchored regex; "" turns the check off
    node_map: Mapping[str, str] = field(default_factory=dict)  # exporter pod, instance or address -> node
    # Service and container names (Docker Compose) that are never a host: alertd/engine/plausible.py.
    not_node_pattern: str = NOT_NODE_PATTERN
    log_host_labels: tuple[str, ...] = LOG_HOST_LABELS  # node labels shown as "log host"
    log_line_fields: tuple[str, ...] = LOG_LINE_FIELDS  # annotations, then labels, read for an NVRM Xid line
    extra: dict[str, str] = field(default_factory=dict)


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


__all__ = ["NormalizeConfig", "normalize", "source_label", "strip_port", "subject_of", "xid_of", "xid_source"]
