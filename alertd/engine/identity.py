"""Which node, GPU and workload pod an alert is about, and where each came from.

dcgm-exporter sets ``Hostname`` from ``NODE_NAME`` (4.0 and later, where its
chart or the GPU Operator set it to ``spec.nodeName``), else from its own
hostname: the pod's name (``dcgm-exporter-x7k2p``) on Kubernetes, the container
ID in Docker. ``instance`` is the pod's address; the exporter's
``pod``/``namespace`` are the exporter pod, the workload is ``exported_pod``.
Log alerts (Loki, Graylog) name the node only in ``host``/``source`` and carry
the kernel's NVRM line as text. This module reads all of that without I/O:

* a node label naming a node is taken as it is;
* an exporter pod's name (``exporter_pod_pattern``) is never a node: it is
  looked up in ``node_map``, then in a :class:`NodeLookup` (the Kubernetes
  pod -> node index the service fills at its edge, alertd/enrich/node_index.py);
* ``instance`` is looked up (map, then node addresses and per-node agents' pod
  IPs); an address nothing resolves stays the node only when no pod is in
  sight (a bare-metal or Docker host's node-exporter), never a pod's IP;
* a value that is plausibly no node (a container ID, a Compose service name,
  a name the Kubernetes node list lacks: alertd/engine/plausible.py) is
  refused, and the refusal kept with why, for `alertd explain` and the subject;
* an NVRM Xid line in the text gives the GPU's PCI address and the Xid code,
  through the kernel-log parser enrichment uses (alertd/gpu/nvrm.py).

When nothing names the node, the node stays unknown and ``origin`` says what
the alert pointed at, so two nodes' node-less alerts never share an incident.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Mapping, Protocol

from alertd.core.vocabulary import INSTANCE, WEAK_NODE_LABELS
from alertd.engine.plausible import refusal
from alertd.gpu.nvrm import XidLine, parse_gpu_at, split_lines, text_xid

# DaemonSet pods of NVIDIA's Helm chart (dcgm-exporter-x7k2p), of the GPU Operator
# (nvidia-dcgm-exporter-x7k2p) and of releases named otherwise (<release>-dcgm-exporter-x7k2p).
EXPORTER_POD_PATTERN = r"(?:[a-z0-9.-]+-)?dcgm-exporter-[a-z0-9]{5}"
LOG_LINE_FIELDS = ("description", "message", "summary", "line", "msg", "log")
POD_LABEL = "pod"  # the scrape target's pod: the exporter itself when it is one


class NodeLookup(Protocol):
    """What the engine reads from the service's Kubernetes index: answers already fetched, no I/O."""

    @property
    def generation(self) -> int:
        """Changes whenever an answer does: subjects worked out before are worked out again."""

    def node_of_pod(self, cluster: str, namespace: str, pod: str) -> str:
        """The node the pod runs on; "" when not known (yet)."""

    def node_of_address(self, cluster: str, address: str) -> str:
        """The node with this address (InternalIP, ExternalIP, Hostname) or running the per-node agent (DaemonSet
        or exporter pod, host network) with this pod IP; ""."""

    def is_node(self, cluster: str, name: str) -> bool | None:
        """Whether a node has this name or address; None when the node list is not known."""


class IdentitySettings(Protocol):
    """The identity part of the ``normalize`` config section (alertd/engine/normalize.py's NormalizeConfig)."""

    @property
    def node_labels(self) -> tuple[str, ...]: ...
    @property
    def exporter_pod_pattern(self) -> str: ...
    @property
    def node_map(self) -> Mapping[str, str]: ...
    @property
    def log_host_labels(self) -> tuple[str, ...]: ...
    @property
    def pod_labels(self) -> tuple[str, ...]: ...
    @property
    def namespace_labels(self) -> tuple[str, ...]: ...
    @property
    def container_labels(self) -> tuple[str, ...]: ...
    @property
    def not_node_pattern(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Pointer:
    """Something in an alert's labels that names a node only through a lookup."""

    kind: str  # "pod" | "address" | "node" (a name the node list must hold)
    namespace: str  # pods: "" when the labels do not say
    name: str  # pod name, or address without port


@dataclass(frozen=True, slots=True)
class NodeFound:
    node: str = ""
    source: str = ""  # "label node", "log host (label host)", "map Hostname=...", "instance ...", "kubernetes pod ..."
    origin: str = ""  # node unknown: what the alert pointed at instead
    refused: tuple[str, ...] = ()  # "Hostname=5f3c9a1e7b2d: a container ID ...": values that are no node, and why


@lru_cache(maxsize=8)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@lru_cache(maxsize=65_536)  # node, pod and host names repeat across a fleet's alerts
def is_exporter_pod(value: str, pattern: str) -> bool:
    return bool(pattern) and _compiled(pattern).fullmatch(value) is not None


def strip_port(instance: str) -> str:
    """``10.0.3.17:9400`` -> ``10.0.3.17``; ``[::1]:9400`` -> ``::1``; a bare host or IPv6 address unchanged."""
    host, sep, port = instance.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return instance
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    return instance if ":" in host else host  # a bare IPv6 address has colons of its own


def is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def exporter_pod(labels: Mapping[str, str], node_labels: tuple[str, ...], pattern: str) -> Pointer | None:
    """The dcgm-exporter pod the labels name (Hostname or the target's pod), with its namespace if known."""
    pod = labels.get(POD_LABEL, "")
    if pod and is_exporter_pod(pod, pattern):
        return Pointer("pod", labels.get("namespace", ""), pod)
    for name in node_labels:
        value = labels.get(name, "")
        if name != INSTANCE and value and is_exporter_pod(value, pattern):
            return Pointer("pod", "", value)
    return None


def pointers(labels: Mapping[str, str], node_labels: tuple[str, ...], pattern: str) -> list[Pointer]:
    """What the service's index must know to place this alert: its exporter pod and its ``instance``
    address, unless a node label already names the node (then nothing); a name in a weak label
    (``Hostname``) is checked against the node list."""
    exporter = exporter_pod(labels, node_labels, pattern)
    out: list[Pointer] = [exporter] if exporter is not None else []
    for name in node_labels:
        value = labels.get(name, "")
        if not value or (exporter is not None and value == exporter.name):
            continue
        if name in WEAK_NODE_LABELS and name != INSTANCE and not is_exporter_pod(value, pattern):
            out.append(Pointer("node", "", value))
            continue
        if name != INSTANCE:
            return [] if exporter is None or not is_exporter_pod(value, pattern) else out
        out.append(Pointer("address", "", strip_port(value)))
        break
    return out


def find_node(labels: Mapping[str, str], cluster: str, cfg: IdentitySettings,
              lookup: NodeLookup | None = None) -> NodeFound:
    """The first of ``cfg.node_labels`` that plausibly names a node, resolving exporter pods and addresses;
    what was refused on the way is kept, with why. The exporter pod is worked out only when needed: most
    alerts have a node label, and this runs for each."""
    pattern = cfg.exporter_pod_pattern
    if cfg.node_map:
        mapped = _mapped(labels, cfg, exporter_pod(labels, cfg.node_labels, pattern))
        if mapped.node:
            return mapped
    refused: list[str] = []
    for name in cfg.node_labels:
        value = labels.get(name, "")
        if not value:
            continue
        if name == INSTANCE:
            found = _instance(value, labels, cluster, cfg, lookup, refused)
            if found.node:
                return replace(found, refused=tuple(refused))
            continue
        if is_exporter_pod(value, pattern):
            found = _pod_node(Pointer("pod", labels.get("namespace", "") if labels.get(POD_LABEL) == value else "",
                                      value), cluster, lookup)
            if found.node:
                return replace(found, refused=tuple(refused))
            continue
        why = refusal(name, value, labels, cluster, cfg.not_node_pattern, lookup)
        if why:
            refused.append(f"{name}={value}: {why}")
            continue
        source = f"log host (label {name})" if name in cfg.log_host_labels else f"label {name}"
        return NodeFound(value, source, refused=tuple(refused))
    exporter = exporter_pod(labels, cfg.node_labels, pattern)
    if exporter is not None:
        found = _pod_node(exporter, cluster, lookup)
        return found if found.node else NodeFound(origin=found.origin, refused=tuple(refused))
    target = labels.get(INSTANCE, "")
    return NodeFound(origin=f"target {target}" if refused and target else "", refused=tuple(refused))


def _instance(value: str, labels: Mapping[str, str], cluster: str, cfg: IdentitySettings,
              lookup: NodeLookup | None, refused: list[str]) -> NodeFound:
    """``instance``: a node's address or a per-node agent's pod IP (asked of the index); else the host itself
    unless it is a pod's address, a service name or, by the node list, no node's (appended to ``refused``)."""
    host = strip_port(value)
    node = lookup.node_of_address(cluster, host) if lookup is not None else ""
    if node:
        return NodeFound(node, f"instance {value} (node address or per-node agent's pod IP)")
    if is_address(host):
        if exporter_pod(labels, cfg.node_labels, cfg.exporter_pod_pattern) is not None:
            return NodeFound()  # the exporter's pod IP: resolved through its pod, if at all
        target_pod = labels.get(POD_LABEL, "")
        if target_pod:
            refused.append(f"instance={value}: the IP of the scrape target's pod {target_pod}, not a node; only a "
                           "per-node agent's pod IP names its node (through the Kubernetes API)")
            return NodeFound()
    why = refusal(INSTANCE, host, labels, cluster, cfg.not_node_pattern, lookup)
    if why:
        refused.append(f"instance={value}: {why}")
        return NodeFound()
    return NodeFound(host, f"label instance{' (port stripped)' if host != value else ''}")


def _mapped(labels: Mapping[str, str], cfg: IdentitySettings, exporter: Pointer | None) -> NodeFound:
    """``node_map`` first, whatever else the labels say: the site's own word on its exporters."""
    if not cfg.node_map:
        return NodeFound()
    for name in cfg.node_labels:
        value = labels.get(name, "")
        mapped = cfg.node_map.get(value) or (cfg.node_map.get(strip_port(value)) if name == INSTANCE else "")
        if value and mapped:
            return NodeFound(mapped, f"map {name}={value}")
    if exporter is not None and cfg.node_map.get(exporter.name):
        return NodeFound(cfg.node_map[exporter.name], f"map {POD_LABEL}={exporter.name}")
    return NodeFound()


def _pod_node(pod: Pointer, cluster: str, lookup: NodeLookup | None) -> NodeFound:
    where = f"{pod.namespace}/{pod.name}" if pod.namespace else pod.name
    node = lookup.node_of_pod(cluster, pod.namespace, pod.name) if lookup is not None else ""
    if node:
        return NodeFound(node, f"kubernetes pod {where}")
    return NodeFound(origin=f"exporter pod {where}")


def workload(labels: Mapping[str, str], cfg: IdentitySettings) -> tuple[str, str, str]:
    """(namespace, pod, container) of the workload: the first pod label that is not an exporter pod, with
    the namespace and container labels at the same place in their lists (``exported_pod`` goes with
    ``exported_namespace``), so the exporter's own namespace is never read as the workload's."""
    skipped = False
    for i, name in enumerate(cfg.pod_labels):
        pod = labels.get(name, "")
        if not pod:
            continue
        if is_exporter_pod(pod, cfg.exporter_pod_pattern):
            skipped = True
            continue
        ns = labels.get(cfg.namespace_labels[i], "") if i < len(cfg.namespace_labels) else ""
        ctr = labels.get(cfg.container_labels[i], "") if i < len(cfg.container_labels) else ""
        return ns or _first(labels, cfg.namespace_labels), pod, ctr or _first(labels, cfg.container_labels)
    if skipped:
        return "", "", ""
    return _first(labels, cfg.namespace_labels), "", _first(labels, cfg.container_labels)


def _first(labels: Mapping[str, str], names: tuple[str, ...]) -> str:
    return next((v for n in names if (v := labels.get(n, ""))), "")


def nvrm_line(labels: Mapping[str, str], annotations: Mapping[str, str],
              fields: tuple[str, ...]) -> tuple[XidLine, str] | None:
    """The first Xid report of the kernel in the alert's text (annotations first, then labels of those names):
    an ``NVRM: Xid`` line or a lost-GPU report (alertd/gpu/nvrm.py's text_xid), and where it was
    ("annotation description")."""
    for kind, source in (("annotation", annotations), ("label", labels)):
        for name in fields:
            text = source.get(name, "")
            found = text_xid(text) if "NVRM" in text else None
            if found is not None:
                return found, f"{kind} {name}"
    return None


def gpu_at_line(labels: Mapping[str, str], annotations: Mapping[str, str],
                fields: tuple[str, ...]) -> tuple[str, str] | None:
    """(PCI address, GPU UUID) of the driver's ``NVRM: GPU at PCI:0000:3b:00: GPU-<uuid>`` line in the alert's
    text (annotations first, then labels of those names): a log alert's GPU by its UUID."""
    for source in (annotations, labels):
        for name in fields:
            text = source.get(name, "")
            found = next((at for part in split_lines(text) if (at := parse_gpu_at(part))), None) \
                if "GPU at" in text else None
            if found is not None:
                return found
    return None


__all__ = ["EXPORTER_POD_PATTERN", "IdentitySettings", "NodeFound", "NodeLookup", "Pointer", "exporter_pod",
           "find_node", "gpu_at_line", "is_exporter_pod", "nvrm_line", "pointers", "strip_port", "workload"]
