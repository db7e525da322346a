"""Labels -> Subject: which cluster, node, GPU and pod an alert is about."""
from __future__ import annotations

import re
from sys import intern
from dataclasses import dataclass, field

from alertd.gpu.pci import normalize_pci
from alertd.model import GPU, Alert, Subject

_PORT = re.compile(r"^(?P<host>\[[^\]]+\]|[^:]+):\d+$")


@dataclass(frozen=True, slots=True)
class NormalizeConfig:
    cluster_label: str = "cluster"
    # Alerts without the label belong to this cluster, so grouping by cluster still works
    # for a single-cluster setup whose alerts carry no cluster label.
    cluster_default: str = "default"
    # First non-empty wins. Hostname comes after node: dcgm-exporter may set it to its own pod's name.
    node_labels: tuple[str, ...] = ("node", "kubernetes_node", "Hostname", "hostname", "instance")
    xid_labels: tuple[str, ...] = ("xid", "err_code")
    xid_annotation: str = "xid"
    pod_labels: tuple[str, ...] = ("pod", "exported_pod")
    namespace_labels: tuple[str, ...] = ("namespace", "exported_namespace")
    container_labels: tuple[str, ...] = ("container", "exported_container")
    extra: dict[str, str] = field(default_factory=dict)


def strip_port(instance: str) -> str:
    m = _PORT.match(instance)
    if not m:
        return instance
    host = m.group("host")
    return host[1:-1] if host.startswith("[") else host


def _first(labels: dict[str, str], names: tuple[str, ...]) -> tuple[str, str]:
    for name in names:
        value = labels.get(name)
        if value:
            return name, value
    return "", ""


def source_label(labels: dict[str, str], names: tuple[str, ...]) -> str:
    """Which of ``names`` gave the value (the first non-empty one), "" if none: for `alertd explain`."""
    return _first(labels, names)[0]


def subject_of(labels: dict[str, str], cfg: NormalizeConfig) -> Subject:
    """Interned: the engine keeps a subject per alert, and their strings repeat across alerts (cluster, node,
    GPU model)."""
    source, node = _first(labels, cfg.node_labels)
    if source == "instance":
        node = strip_port(node)
    uuid = labels.get("UUID") or labels.get("uuid") or labels.get("gpu_uuid") or ""
    index = labels.get("gpu", "")
    pci = normalize_pci(labels.get("pci_bus_id") or labels.get("pci") or "")
    serial = labels.get("serial") or labels.get("gpu_serial") or ""
    gpu = GPU(uuid=intern(uuid), index=intern(index), pci_bus_id=intern(pci), model=intern(labels.get("modelName", "")),
              serial=intern(serial)) if (uuid or index or pci) else None
    return Subject(
        cluster=intern(labels.get(cfg.cluster_label) or cfg.cluster_default),
        node=intern(node),
        gpu=gpu,
        namespace=intern(_first(labels, cfg.namespace_labels)[1]),
        pod=intern(_first(labels, cfg.pod_labels)[1]),
        container=intern(_first(labels, cfg.container_labels)[1]),
    )


def xid_source(alert: Alert, cfg: NormalizeConfig) -> tuple[int | None, str]:
    """The Xid code in the alert's labels or `xid` annotation, and where it was found ("label xid=79")."""
    name, raw = _first(alert.labels, cfg.xid_labels)
    where = f"label {name}={raw}"
    if not raw:
        raw = alert.annotations.get(cfg.xid_annotation, "")
        where = f"annotation {cfg.xid_annotation}={raw}"
    try:
        code = int(float(raw))
    except (TypeError, ValueError, OverflowError):
        return None, ""
    return (code, where) if code > 0 else (None, "")


def xid_of(alert: Alert, cfg: NormalizeConfig) -> int | None:
    return xid_source(alert, cfg)[0]


def normalize(alert: Alert, cfg: NormalizeConfig) -> Alert:
    alert.subject = subject_of(alert.labels, cfg)
    return alert
