"""GPU nodes in the shape the kubelet, the node controller and the GPU operator leave them.

:class:`NodeObjects` adds, cordons and takes down nodes with the taints, conditions,
managedFields and events that go with each state.
"""
from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from testkit.kube_objects import UID_NAMESPACE, ClusterObjects, rfc3339, utc_now
from testkit.kube_resources import KUBE_VERSION


def _set_managed(entries: list[dict], manager: str, fields: dict, when: datetime, *,
                 subresource: str | None = None) -> None:
    """Record (or refresh) ``manager``'s managedFields entry, as server-side field tracking does."""
    entries[:] = [e for e in entries if not (e.get("manager") == manager and e.get("subresource") == subresource
                                             and e.get("fieldsV1") == fields)]
    entry: dict[str, Any] = {"manager": manager, "operation": "Update", "apiVersion": "v1",
                             "time": rfc3339(when), "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        entry["subresource"] = subresource
    entries.append(entry)


class NodeObjects(ClusterObjects):
    """Node builders of a :class:`~testkit.kube_server.KubeTestServer`."""

    def add_node(self, name: str, *, unschedulable: bool = False, taints: Iterable[Any] = (),
                 ready: bool | str = True, labels: Mapping[str, str] | None = None,
                 gpus: int = 8, gpu_product: str = "NVIDIA-H100-80GB-HBM3",
                 instance_type: str = "p5.48xlarge", zone: str = "us-east-1a",
                 mig: Mapping[str, int] | None = None, annotations: Mapping[str, str] | None = None,
                 internal_ip: str | None = None, created: datetime | None = None) -> dict:
        """A GPU node as the kubelet, node controller and GPU operator leave it.

        ``ready``: True, False or "Unknown" (kubelet stopped posting status); not-ready and
        unreachable taints follow, as does the unschedulable taint of a cordoned node.
        ``taints``: dicts, or ``(key, effect)`` / ``(key, value, effect)`` tuples.
        ``mig``: MIG profile -> count exposed (mixed strategy), e.g. ``{"1g.10gb": 56}``.
        """
        created = created or (utc_now() - timedelta(days=30))
        now = utc_now()
        index = int(hashlib.sha1(name.encode()).hexdigest(), 16) % 200 + 10
        ip = internal_ip or f"10.0.{index // 250}.{index % 250 + 1}"
        node_labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": instance_type,
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/region": zone[:-1],
            "topology.kubernetes.io/zone": zone,
        }
        if gpus:
            node_labels.update({
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": gpu_product,
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.memory": "81559" if "80GB" in gpu_product else "40960",
                "nvidia.com/cuda.driver.major": "550",
                "nvidia.com/mig.capable": "true" if ("A100" in gpu_product or "H100" in gpu_product) else "false",
                "nvidia.com/mig.strategy": "mixed" if mig else "single",
            })
        node_labels.update(labels or {})
        all_taints = [self._taint(t, now) for t in taints]
        if unschedulable:
            all_taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                               "timeAdded": rfc3339(now)})
        all_taints += self._readiness_taints(ready, now)
        capacity = {"cpu": "192", "ephemeral-storage": "7499362124Ki", "hugepages-1Gi": "0",
                    "hugepages-2Mi": "0", "memory": "2097017876Ki", "pods": "110"}
        allocatable = {"cpu": "191450m", "ephemeral-storage": "6910472826887", "hugepages-1Gi": "0",
                       "hugepages-2Mi": "0", "memory": "2070483476Ki", "pods": "110"}
        if mig:
            for profile, count in mig.items():
                capacity[f"nvidia.com/mig-{profile}"] = allocatable[f"nvidia.com/mig-{profile}"] = str(count)
            capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = "0"
        elif gpus:
            capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(gpus)
        spec: dict[str, Any] = {"podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"],
                                "providerID": f"aws:///{zone}/i-0{hashlib.sha1(name.encode()).hexdigest()[:16]}"}
        if unschedulable:
            spec["unschedulable"] = True  # omitted (not false) on a schedulable node, like the real API
        if all_taints:
            spec["taints"] = all_taints
        node_annotations = {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                            **(annotations or {})}
        managed: list[dict] = []
        _set_managed(managed, "kubelet", {"f:metadata": {"f:labels": {}, "f:annotations": {}}}, created)
        _set_managed(managed, "kubelet", {"f:status": {"f:conditions": {}, "f:nodeInfo": {}}}, now,
                     subresource="status")
        if all_taints:
            _set_managed(managed, "kube-controller-manager", {"f:spec": {"f:taints": {}}}, now)
        if unschedulable:
            _set_managed(managed, "kubectl-cordon", {"f:spec": {"f:unschedulable": {}}}, now)
        return self.add_object({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels, "annotations": node_annotations,
                         "creationTimestamp": rfc3339(created), "managedFields": managed},
            "spec": spec,
            "status": {
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "allocatable": allocatable,
                "capacity": capacity,
                "conditions": self._node_conditions(ready, now, created),
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": str(uuid.uuid5(UID_NAMESPACE, "boot/" + name)),
                    "containerRuntimeVersion": "containerd://1.7.20",
                    "kernelVersion": "5.15.0-1063-aws",
                    "kubeProxyVersion": KUBE_VERSION["gitVersion"],
                    "kubeletVersion": KUBE_VERSION["gitVersion"],
                    "machineID": hashlib.md5(name.encode()).hexdigest(),
                    "operatingSystem": "linux",
                    "osImage": "Ubuntu 22.04.4 LTS",
                    "systemUUID": str(uuid.uuid5(UID_NAMESPACE, "system/" + name)).upper(),
                },
            },
        })

    @staticmethod
    def _taint(t: Any, now: datetime) -> dict:
        if isinstance(t, Mapping):
            return dict(t)
        if len(t) == 2:
            taint = {"key": t[0], "effect": t[1]}
        else:
            taint = {"key": t[0], "value": t[1], "effect": t[2]}
        if taint["effect"] == "NoExecute":
            taint["timeAdded"] = rfc3339(now)
        return taint

    @staticmethod
    def _readiness_taints(ready: bool | str, now: datetime) -> list[dict]:
        if ready is True or str(ready).lower() == "true":
            return []
        key = "node.kubernetes.io/unreachable" if str(ready).lower() == "unknown" else "node.kubernetes.io/not-ready"
        return [{"key": key, "effect": "NoSchedule", "timeAdded": rfc3339(now)},
                {"key": key, "effect": "NoExecute", "timeAdded": rfc3339(now)}]

    @staticmethod
    def _node_conditions(ready: bool | str, now: datetime, created: datetime) -> list[dict]:
        state = "True" if ready is True or str(ready).lower() == "true" else (
            "Unknown" if str(ready).lower() == "unknown" else "False")
        beat = rfc3339(now - timedelta(minutes=5) if state == "Unknown" else now)
        since = rfc3339(created) if state == "True" else rfc3339(now - timedelta(minutes=4))
        conds = []
        for ctype, reason, msg in (
                ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available")):
            if state == "Unknown":
                conds.append({"type": ctype, "status": "Unknown", "reason": "NodeStatusUnknown",
                              "message": "Kubelet stopped posting node status.",
                              "lastHeartbeatTime": beat, "lastTransitionTime": since})
            else:
                conds.append({"type": ctype, "status": "False", "reason": reason, "message": msg,
                              "lastHeartbeatTime": beat, "lastTransitionTime": rfc3339(created)})
        if state == "True":
            ready_cond = {"reason": "KubeletReady", "message": "kubelet is posting ready status"}
        elif state == "Unknown":
            ready_cond = {"reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
        else:
            ready_cond = {"reason": "KubeletNotReady",
                          "message": "container runtime network not ready: NetworkReady=false "
                                     "reason:NetworkPluginNotReady message:Network plugin returns error: "
                                     "cni plugin not initialized"}
        conds.append({"type": "Ready", "status": state, **ready_cond,
                      "lastHeartbeatTime": beat, "lastTransitionTime": since})
        return conds

    def cordon(self, name: str, *, event: bool = True) -> dict:
        """What ``kubectl cordon`` leads to: spec.unschedulable (managedFields manager
        ``kubectl-cordon``), the node controller's unschedulable taint and the kubelet's
        ``NodeNotSchedulable`` event."""
        node = copy.deepcopy(self._require("v1", "Node", name))
        now = utc_now()
        node["spec"]["unschedulable"] = True
        taints = node["spec"].setdefault("taints", [])
        if not any(t["key"] == "node.kubernetes.io/unschedulable" for t in taints):
            taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                           "timeAdded": rfc3339(now)})
        managed = node["metadata"].setdefault("managedFields", [])
        _set_managed(managed, "kubectl-cordon", {"f:spec": {"f:unschedulable": {}}}, now)
        _set_managed(managed, "kube-controller-manager", {"f:spec": {"f:taints": {}}}, now)
        stored = self.add_object(node)
        if event:
            self.add_event("default", "Node", name, "NodeNotSchedulable",
                           f"Node {name} status is now: NodeNotSchedulable", component="kubelet")
        return stored

    def set_node_ready(self, name: str, ready: bool | str, *, event: bool = True) -> dict:
        """Change the Ready condition (True, False, "Unknown") with its taints; a node going
        not-ready gets the node controller's ``NodeNotReady`` event."""
        node = copy.deepcopy(self._require("v1", "Node", name))
        now = utc_now()
        created = datetime.strptime(node["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=timezone.utc)
        node["status"]["conditions"] = self._node_conditions(ready, now, created)
        taints = [t for t in node["spec"].get("taints", [])
                  if t["key"] not in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
        taints += self._readiness_taints(ready, now)
        if taints:
            node["spec"]["taints"] = taints
        else:
            node["spec"].pop("taints", None)
        managed = node["metadata"].setdefault("managedFields", [])
        _set_managed(managed, "kube-controller-manager", {"f:spec": {"f:taints": {}}}, now)
        _set_managed(managed, "kube-controller-manager", {"f:status": {"f:conditions": {}}}, now,
                     subresource="status")
        stored = self.add_object(node)
        if event and not (ready is True or str(ready).lower() == "true"):
            self.add_event("default", "Node", name, "NodeNotReady",
                           f"Node {name} status is now: NodeNotReady", component="node-controller")
        return stored
