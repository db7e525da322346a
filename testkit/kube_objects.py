"""Kubernetes objects in the shape the API returns them, stored in the test server.

:class:`ClusterObjects` stores any object (uid, resourceVersion and creationTimestamp
filled in) and builds namespaces, pods, Jobs and events as the kubelet and controllers
leave them; uids are derived from the object's identity (:func:`uid_for`).
"""
from __future__ import annotations

import copy
import hashlib
import time
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from testkit.kube_resources import Resource, plural_of

# Kubernetes' random-suffix alphabet (no vowels, no look-alikes).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
UID_NAMESPACE = uuid.UUID("6f2d1c0e-8a4b-4f51-9a57-1d1e5b0c7a11")


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def rfc3339(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def suffix(seed: str, length: int = 5) -> str:
    """A Kubernetes-style random suffix, stable for ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:length])


def uid_for(api_version: str, kind: str, namespace: str | None, name: str) -> str:
    """The uid the server gives the object with this identity (unless it brings its own)."""
    return str(uuid.uuid5(UID_NAMESPACE, f"{api_version}/{kind}/{namespace or ''}/{name}"))


def pod_template_spec(image: str, gpus: int, *, restart_policy: str, container: str = "main",
                       mig: str | None = None) -> dict:
    resources: dict[str, Any] = {}
    if gpus:
        key = f"nvidia.com/mig-{mig}" if mig else "nvidia.com/gpu"
        resources = {"limits": {key: str(gpus)}}
    return {"containers": [{"name": container, "image": image, "resources": resources}],
            "restartPolicy": restart_policy}


class ClusterObjects:
    """Builders of a :class:`~testkit.kube_server.KubeTestServer`'s objects."""

    objects: dict[tuple[str, str, str, str], dict]  # (apiVersion, kind, namespace, name)
    _resources: dict[tuple[str, str, str], Resource]  # (group, version, plural)
    _by_kind: dict[tuple[str, str], Resource]  # (apiVersion, kind)
    _rv: int

    if TYPE_CHECKING:
        def register_resource(self, resource: Resource) -> Resource: ...

        def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None: ...

    def _resource_for(self, api_version: str, kind: str) -> Resource:
        res = self._by_kind.get((api_version, kind))
        if res is None:
            group, _, version = api_version.rpartition("/")
            res = self.register_resource(Resource(group, version, plural_of(kind), kind, builtin=False))
        return res

    def add_object(self, obj: Mapping[str, Any]) -> dict:
        """Store a full object (``apiVersion``, ``kind``, ``metadata.name`` required). Missing
        ``metadata.namespace`` of a namespaced kind becomes ``default``; uid, resourceVersion and
        creationTimestamp are filled in when absent. Replaces an object of the same identity."""
        obj = copy.deepcopy(dict(obj))
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        meta = obj.setdefault("metadata", {})
        if not api_version or not kind or not meta.get("name"):
            raise ValueError("an object needs apiVersion, kind and metadata.name")
        res = self._resource_for(api_version, kind)
        if res.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        ns = meta.get("namespace", "")
        meta.setdefault("uid", uid_for(api_version, kind, ns, meta["name"]))
        meta.setdefault("creationTimestamp", rfc3339(utc_now()))
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self.objects[(api_version, kind, ns, meta["name"])] = obj
        return obj

    def owner_reference(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        """A controller ownerReference to the object (its uid, present or future)."""
        existing = self.get(api_version, kind, name, namespace)
        res = self._resource_for(api_version, kind)
        ns = namespace if res.namespaced else None
        uid = existing["metadata"]["uid"] if existing else uid_for(api_version, kind, ns, name)
        return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
                "controller": True, "blockOwnerDeletion": True}

    def add_namespace(self, name: str, labels: Mapping[str, str] | None = None,
                      annotations: Mapping[str, str] | None = None, *,
                      created: datetime | None = None) -> dict:
        meta: dict[str, Any] = {"name": name,
                                "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}
        if annotations:
            meta["annotations"] = dict(annotations)
        if created:
            meta["creationTimestamp"] = rfc3339(created)
        return self.add_object({"apiVersion": "v1", "kind": "Namespace", "metadata": meta,
                                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})

    def _require(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        obj = self.get(api_version, kind, name, namespace)
        if obj is None:
            raise KeyError(f"no {kind} {namespace + '/' if namespace else ''}{name}")
        return obj

    def add_pod(self, ns: str, name: str, node: str | None, gpus: int = 8,
                owner: tuple[str, str, str] | None = None, labels: Mapping[str, str] | None = None,
                mig: str | None = None, *, phase: str = "Running", image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
                container: str = "main", annotations: Mapping[str, str] | None = None,
                restart_policy: str = "Never", created: datetime | None = None) -> dict:
        """A pod as the scheduler and kubelet leave it.

        ``gpus``: the ``nvidia.com/gpu`` limit, or with ``mig="1g.10gb"`` the
        ``nvidia.com/mig-1g.10gb`` limit (0: no GPU resources). ``owner``:
        ``(apiVersion, kind, name)`` of its controller in the same namespace.
        ``node=None`` leaves the pod Pending and unscheduled.
        """
        created = created or (utc_now() - timedelta(hours=2))
        started = created + timedelta(seconds=20)
        meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": dict(labels or {}),
                                "creationTimestamp": rfc3339(created)}
        if annotations:
            meta["annotations"] = dict(annotations)
        if owner is not None:
            meta["ownerReferences"] = [self.owner_reference(*owner, namespace=ns)]
        limits: dict[str, str] = {}
        requests: dict[str, str] = {"cpu": "4", "memory": "16Gi"}
        if gpus:
            resource = f"nvidia.com/mig-{mig.removeprefix('mig-')}" if mig else "nvidia.com/gpu"
            limits[resource] = requests[resource] = str(gpus)
            if mig:
                requests.update({"cpu": "4", "memory": "32Gi"})
            else:
                requests.update({"cpu": str(12 * gpus), "memory": f"{128 * gpus}Gi"})
            limits["memory"] = requests["memory"]
        if node is None:
            phase = "Pending"
        spec: dict[str, Any] = {
            "containers": [{
                "name": container, "image": image, "imagePullPolicy": "IfNotPresent",
                "resources": {"limits": limits, "requests": requests} if limits else {"requests": requests},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            }],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "restartPolicy": restart_policy,
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
            ] + ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] if gpus else []),
        }
        status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
        if node is not None:
            spec["nodeName"] = node
            host_obj = self.get("v1", "Node", node)
            host_ip = next((a["address"] for a in (host_obj or {}).get("status", {}).get("addresses", [])
                            if a["type"] == "InternalIP"), "10.0.0.1")
            pod_ip = f"10.244.{int(hashlib.sha1(node.encode()).hexdigest(), 16) % 200 + 10}." \
                     f"{int(hashlib.sha1(name.encode()).hexdigest(), 16) % 250 + 2}"
            running = phase == "Running"
            done = phase in ("Succeeded", "Failed")
            cstate: dict[str, Any]
            if running:
                cstate = {"running": {"startedAt": rfc3339(started)}}
            elif done:
                code = 0 if phase == "Succeeded" else 1
                cstate = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                         "startedAt": rfc3339(started),
                                         "finishedAt": rfc3339(started + timedelta(minutes=10)),
                                         "containerID": f"containerd://{hashlib.sha256(name.encode()).hexdigest()}"}}
            else:
                cstate = {"waiting": {"reason": "ContainerCreating"}}
            status.update({
                "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
                "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
                "startTime": rfc3339(created + timedelta(seconds=2)),
                "conditions": [
                    {"type": "PodReadyToStartContainers", "status": "True" if not done else "False",
                     "lastProbeTime": None, "lastTransitionTime": rfc3339(started)},
                    {"type": "Initialized", "status": "True", "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(created + timedelta(seconds=2))},
                    {"type": "Ready", "status": "True" if running else "False", "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(started),
                     **({} if running else {"reason": "PodCompleted" if done else "ContainersNotReady"})},
                    {"type": "ContainersReady", "status": "True" if running else "False", "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(started),
                     **({} if running else {"reason": "PodCompleted" if done else "ContainersNotReady"})},
                    {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(created)},
                ],
                "containerStatuses": [{
                    "name": container, "image": image,
                    "imageID": f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
                    "containerID": f"containerd://{hashlib.sha256(name.encode()).hexdigest()}",
                    "ready": running, "started": running, "restartCount": 0, "state": cstate,
                }],
            })
            if not (running or done):
                status["containerStatuses"][0].pop("containerID")
        else:
            status["conditions"] = [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
                "lastTransitionTime": rfc3339(created),
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
                           "available: 3 No preemption victims found for incoming pod.",
            }]
        return self.add_object({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status})

    def add_job(self, ns: str, name: str, *, owner: tuple[str, str, str] | None = None,
                labels: Mapping[str, str] | None = None, parallelism: int = 1, gpus: int = 8,
                active: int = 1, succeeded: int = 0, failed: int = 0, indexed: bool = True,
                image: str = "nvcr.io/nvidia/pytorch:24.05-py3", created: datetime | None = None) -> dict:
        """A batch/v1 Job (optionally owned, e.g. by a JobSet) with the selector labels its pods carry;
        add its pods with ``add_pod(..., owner=("batch/v1", "Job", name), labels=server.job_pod_labels(...))``."""
        uid = uid_for("batch/v1", "Job", ns, name)
        sel = {"batch.kubernetes.io/controller-uid": uid}
        pod_labels = {**sel, "batch.kubernetes.io/job-name": name, "controller-uid": uid, "job-name": name,
                      **(labels or {})}
        meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid, "generation": 1,
                                "labels": {**pod_labels}}
        if created:
            meta["creationTimestamp"] = rfc3339(created)
        if owner is not None:
            meta["ownerReferences"] = [self.owner_reference(*owner, namespace=ns)]
        start = created or (utc_now() - timedelta(hours=2))
        return self.add_object({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta,
            "spec": {
                "parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                "completionMode": "Indexed" if indexed else "NonIndexed", "manualSelector": False,
                "podReplacementPolicy": "TerminatingOrFailed", "suspend": False,
                "selector": {"matchLabels": sel},
                "template": {"metadata": {"labels": pod_labels},
                             "spec": pod_template_spec(image, gpus, restart_policy="Never")},
            },
            "status": {"active": active, "ready": active, "succeeded": succeeded or None, "failed": failed or None,
                       "startTime": rfc3339(start), "terminating": 0, "uncountedTerminatedPods": {}},
        })

    def job_pod_labels(self, ns: str, job: str, index: int | None = None) -> dict[str, str]:
        """The labels the Job controller puts on the Job's pods."""
        stored = self.get("batch/v1", "Job", job, ns)
        labels = dict(stored["spec"]["template"]["metadata"]["labels"]) if stored else {}
        if index is not None:
            labels["batch.kubernetes.io/job-completion-index"] = str(index)
        return labels

    def add_event(self, ns: str, involved_kind: str, involved_name: str, reason: str, message: str,
                  type: str = "Normal", component: str = "kubelet", *, host: str | None = None,
                  involved_namespace: str | None = None, involved_api_version: str | None = None,
                  count: int = 1, first: datetime | None = None, last: datetime | None = None) -> dict:
        """A core/v1 Event as the legacy event recorder writes it (kubelet, node-controller, ...).

        Node events live in the ``default`` namespace. A kubelet's event about its own Node uses
        the node NAME as ``involvedObject.uid``, as the kubelet does.
        """
        last = last or utc_now()
        first = first or last
        kind_res = next((r for r in self._resources.values() if r.kind == involved_kind), None)
        inv_ns = involved_namespace if involved_namespace is not None else (
            ns if kind_res is None or kind_res.namespaced else "")
        api_version = involved_api_version or (kind_res.api_version if kind_res else "v1")
        target = self.get(api_version, involved_kind, involved_name, inv_ns)
        involved: dict[str, Any] = {"kind": involved_kind, "name": involved_name}
        if involved_kind == "Node" and component == "kubelet":
            involved["uid"] = involved_name
            host = host or involved_name
        else:
            involved["apiVersion"] = api_version
            involved["uid"] = target["metadata"]["uid"] if target else uid_for(api_version, involved_kind,
                                                                                inv_ns, involved_name)
            if target is not None:
                involved["resourceVersion"] = target["metadata"]["resourceVersion"]
        if inv_ns:
            involved["namespace"] = inv_ns
        if involved_kind == "Pod" and host is None and target is not None and component == "kubelet":
            host = target["spec"].get("nodeName")
        source: dict[str, str] = {"component": component}
        if host:
            source["host"] = host
        self._rv += 1
        name = f"{involved_name}.{int(time.time_ns() + self._rv):x}"[:253]
        return self.add_object({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": rfc3339(first)},
            "involvedObject": involved, "reason": reason, "message": message, "type": type,
            "source": source, "count": count, "firstTimestamp": rfc3339(first), "lastTimestamp": rfc3339(last),
            "eventTime": None, "reportingComponent": "", "reportingInstance": "",
        })
