"""The resources the Kubernetes test server knows and the shapes of its answers.

A :class:`Resource` names one kind as the API serves it (group, version, plural,
kind, scope); :data:`DEFAULT_RESOURCES` are the ones every server starts with.
Requests are recorded as :class:`KubeRequest`; :class:`ApiError` becomes a
``Status`` object (:func:`status_object`), :class:`PageNotFound` a plain-text 404.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

KUBE_VERSION = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.4",
    "gitCommit": "a51b3b711150f57ffc1f526a640ec058514ed596",
    "gitTreeState": "clean",
    "buildDate": "2024-08-14T19:04:22Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def plural_of(kind: str) -> str:
    low = kind.lower()
    if low.endswith("y") and low[-2:-1] not in "aeiou":
        return low[:-1] + "ies"
    if low.endswith(("s", "x", "ch", "sh")):
        return low + "es"
    return low + "s"


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    builtin: bool = True  # built-in list items carry no kind/apiVersion; custom resources do
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def qualified(self) -> str:
        """How the API names the resource in messages: ``pods``, ``jobs.batch``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


DEFAULT_RESOURCES = (
    Resource("", "v1", "nodes", "Node", namespaced=False, short_names=("no",)),
    Resource("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",)),
    Resource("", "v1", "pods", "Pod", short_names=("po",)),
    Resource("", "v1", "events", "Event", short_names=("ev",)),
    Resource("batch", "v1", "jobs", "Job"),
    Resource("apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",)),
    Resource("apps", "v1", "statefulsets", "StatefulSet", short_names=("sts",)),
    Resource("apps", "v1", "deployments", "Deployment", short_names=("deploy",)),
    Resource("apps", "v1", "daemonsets", "DaemonSet", short_names=("ds",)),
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", builtin=False),
    Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", builtin=False),
    Resource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob", builtin=False),
    Resource("ray.io", "v1", "rayclusters", "RayCluster", builtin=False),
    Resource("ray.io", "v1", "rayjobs", "RayJob", builtin=False),
)


class KubeRequest(NamedTuple):
    method: str
    path: str
    query: dict[str, str]


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None,
                 headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details, self.headers = code, reason, message, details, headers


class PageNotFound(Exception):
    pass


def status_object(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body
