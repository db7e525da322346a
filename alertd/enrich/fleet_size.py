"""How big the fleet is, measured: the GPU nodes of a cluster from the Kubernetes API.

Read from the API rather than from Prometheus: allocatable ``nvidia.com/gpu`` is what the scheduler can
hand out (a GPU the device plugin dropped is already gone from it), ``spec.unschedulable`` is the cordon
itself, and the node's labels name its type; kube-state-metrics carries the same numbers only where it is
installed with those labels allowed. One paginated list of nodes per sample.
"""
from __future__ import annotations

from alertd.core.fleet import NodeSample
from alertd.core.json_types import JSONObject, as_object, integer, objects, string_map, text
from alertd.enrich.kube import KubeContext
from alertd.enrich.kube_api import metadata

PAGE = 500
MAX_PAGES = 200  # 100,000 nodes


def node_type(kube: KubeContext, labels: dict[str, str]) -> str:
    for key in (*kube.settings.gpu_product_labels, *kube.settings.instance_type_labels):
        if labels.get(key):
            return labels[key]
    return "unknown"


def sample_of(kube: KubeContext, obj: JSONObject) -> NodeSample | None:
    """A node with allocatable GPUs -> its sample; None for a node without GPUs."""
    gpus = integer(as_object(as_object(obj.get("status")).get("allocatable")), "nvidia.com/gpu")
    if gpus <= 0:
        return None
    m = metadata(obj)
    return NodeSample(text(m, "name"), node_type(kube, string_map(m.get("labels"))), gpus,
                      bool(as_object(obj.get("spec")).get("unschedulable")))


async def sample_fleet(kube: KubeContext) -> list[NodeSample]:
    """Every GPU node of the cluster now (raises KubeUnavailable when the API does not answer)."""
    out: list[NodeSample] = []
    token = ""
    for _ in range(MAX_PAGES):
        page = await kube.list_nodes(PAGE, token)
        out += [s for s in (sample_of(kube, n) for n in objects(page.get("items"))) if s is not None]
        token = text(metadata(page), "continue")
        if not token:
            break
    return sorted(out, key=lambda s: s.node)


__all__ = ["node_type", "sample_fleet", "sample_of"]
