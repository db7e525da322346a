"""Is a label's value plausibly a node? What never is one, and why.

A wrong node is worse than an unknown one: the alert never meets its host's
other alerts, and the incident names a machine that does not exist. Real
scrapes put such values in the labels alertd reads for the node:

* dcgm-exporter in Docker without ``NODE_NAME`` sets ``Hostname`` to the
  container's hostname, which Docker makes the container ID (``5f3c9a1e7b2d``);
* Docker Compose targets are service names (``instance="dcgm-exporter:9400"``);
* a Kubernetes target's ``instance`` is its pod's IP: a node's only when the
  pod is a per-node agent (a DaemonSet pod, an exporter on the host network),
  never an operator's or kube-state-metrics' pod.

:func:`refusal` says why a value is no node ("" when it may be one). The
Kubernetes node list, when the service has it (:class:`NodeNames`), is the
last word on names in the weak labels (``Hostname``, ``hostname``,
``instance``): a name it does not hold is refused.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Mapping, Protocol

from alertd.core.vocabulary import WEAK_NODE_LABELS

# Docker's default hostname: the container ID, short (12) or full (64 hex digits).
CONTAINER_ID = re.compile(r"[0-9a-f]{12}|[0-9a-f]{64}")
# Compose service and container names of exporters: dcgm-exporter, nvidia-gpu-exporter, gpu_exporter_1.
NOT_NODE_PATTERN = r"(?i)[a-z0-9_.-]*exporter(?:[-_][0-9]+)?"
SERVICE_LABELS = ("job", "service", "container")  # a target named like these is a service, not a host


class NodeNames(Protocol):
    """The Kubernetes node list as the engine reads it (alertd/engine/identity.py's NodeLookup has it)."""

    def is_node(self, cluster: str, name: str) -> bool | None:
        """Whether a node has this name or address; None when the node list is not known."""


@lru_cache(maxsize=8)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@lru_cache(maxsize=65_536)  # hosts repeat across a fleet's alerts
def is_container_id(value: str) -> bool:
    return CONTAINER_ID.fullmatch(value) is not None


def service_name(value: str, labels: Mapping[str, str], pattern: str) -> str:
    """Why ``value`` names a service rather than a host ("" if it does not)."""
    for name in SERVICE_LABELS:
        if labels.get(name) and labels[name] == value:
            return f"the scrape's {name} (a service or container name, not a host)"
    if pattern and _compiled(pattern).fullmatch(value):
        return "an exporter's service or container name (Docker Compose), not a host"
    return ""


def refusal(name: str, value: str, labels: Mapping[str, str], cluster: str, pattern: str,
            nodes: NodeNames | None = None) -> str:
    """Why the value of node label ``name`` is no node; "" when it is plausibly one."""
    if is_container_id(value):
        return "a container ID (dcgm-exporter in Docker without NODE_NAME names its container)"
    if name not in WEAK_NODE_LABELS:
        return ""
    why = service_name(value, labels, pattern)
    if why:
        return why
    if nodes is not None and nodes.is_node(cluster, value) is False:
        return f"no node of cluster {cluster} has this name or address (Kubernetes node list)"
    return ""


__all__ = ["CONTAINER_ID", "NOT_NODE_PATTERN", "NodeNames", "is_container_id", "refusal",
           "service_name"]
