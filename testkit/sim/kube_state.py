"""What node-exporter and kube-state-metrics expose about the simulated nodes, in their series and labels."""
from __future__ import annotations

from testkit.sim.cluster_state import Node
from testkit.sim.exposition import Exposition

REMEDIATION_TAINT = "alertd.dev/quarantine"  # the taint alertd's own cordon sets (rules/remediation.yml)


def node_exporter_text(n: Node) -> str:
    """node-exporter's /metrics for one node: enough for a target that is up."""
    out = Exposition()
    out.family("node_uname_info", "gauge", "Labeled system information as provided by the uname system call.")
    out.sample(
        "node_uname_info",
        [("machine", "x86_64"), ("nodename", n.name), ("release", "5.15.0-105-generic"), ("sysname", "Linux")],
        1,
    )
    out.family("node_boot_time_seconds", "gauge", "Node boot time, in unixtime.")
    out.sample("node_boot_time_seconds", [], 1_700_000_000 + n.index)
    return out.text()


def ksm_text(nodes: list[Node], cluster: str) -> str:
    """kube-state-metrics' node series for the whole cluster."""
    out = Exposition()
    out.family("kube_node_info", "gauge", "Information about a cluster node.")
    for n in nodes:
        out.sample(
            "kube_node_info",
            [
                ("node", n.name),
                ("kernel_version", "5.15.0-105-generic"),
                ("os_image", "Ubuntu 22.04.4 LTS"),
                ("container_runtime_version", "containerd://1.7.13"),
                ("kubelet_version", "v1.29.4"),
                ("kubeproxy_version", "deprecated"),
                ("provider_id", f"sim://{cluster}/{n.name}"),
                ("pod_cidr", f"10.244.{n.index}.0/24"),
                ("system_uuid", "%08x-0000-4000-8000-%012x" % (n.index, n.index)),
                ("internal_ip", n.internal_ip),
            ],
            1,
        )
    out.family("kube_node_spec_unschedulable", "gauge", "Whether a node can schedule new pods.")
    for n in nodes:
        out.sample("kube_node_spec_unschedulable", [("node", n.name)], int(n.cordoned))
    out.family("kube_node_spec_taint", "gauge", "The taint of a cluster node.")
    for n in nodes:
        for key, value, effect in taints(n):
            out.sample(
                "kube_node_spec_taint",
                [("node", n.name), ("key", key), ("value", value), ("effect", effect)],
                1,
            )
    out.family(
        "kube_node_status_condition", "gauge", "The condition of a cluster node."
    )
    for n in nodes:
        conditions = {"Ready": n.ready, "MemoryPressure": "false", "DiskPressure": "false", "PIDPressure": "false"}
        if n.ready == "unknown":
            conditions = dict.fromkeys(conditions, "unknown")
        for condition, current in conditions.items():
            for status in ("true", "false", "unknown"):
                out.sample(
                    "kube_node_status_condition",
                    [("node", n.name), ("condition", condition), ("status", status)],
                    int(status == current),
                )
    for family in ("kube_node_status_capacity", "kube_node_status_allocatable"):
        out.family(family, "gauge", "The resources of a node.")
        for n in nodes:
            out.sample(
                family,
                [("node", n.name), ("resource", "nvidia_com_gpu"), ("unit", "integer")],
                len(n.gpus),
            )
    return out.text()


def taints(n: Node) -> list[tuple[str, str, str]]:
    """The taints Kubernetes puts on a GPU node in the node's state (cordoned, NotReady, unreachable)."""
    found = [("nvidia.com/gpu", "present", "NoSchedule")]
    if n.cordoned:
        found.append(("node.kubernetes.io/unschedulable", "", "NoSchedule"))
    if n.marked_for:
        found.append((REMEDIATION_TAINT, n.marked_for, "NoSchedule"))
    if n.ready == "false":
        found += [("node.kubernetes.io/not-ready", "", "NoSchedule"), ("node.kubernetes.io/not-ready", "", "NoExecute")]
    elif n.ready == "unknown":
        found += [("node.kubernetes.io/unreachable", "", "NoSchedule"), ("node.kubernetes.io/unreachable", "", "NoExecute")]
    return found
