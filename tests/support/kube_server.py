"""A minimal, strict Kubernetes API server for tests of the Kubernetes enrichment.

Read-only, plain HTTP on 127.0.0.1, bearer-token auth, objects in the real
API's JSON shape so the real ``kubernetes_asyncio`` client deserializes them
into its models::

    kube = KubeTestServer()
    await kube.start()
    kube.sample_cluster()                       # or add_node / add_pod / add_object ...
    path = kube.write_kubeconfig(tmp_path / "kubeconfig")
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(path), client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        pods = await client.CoreV1Api(api).list_pod_for_all_namespaces(
            field_selector="spec.nodeName=gpu-node-1")
    await kube.stop()

Served (GET only; anything else is 405 MethodNotAllowed):

* ``/version``, ``/healthz``, ``/livez``, ``/readyz`` (no token needed, as with
  anonymous auth); discovery ``/api``, ``/api/v1``, ``/apis``, ``/apis/{g}``,
  ``/apis/{g}/{v}``.
* For every registered resource, core (``/api/v1/...``) or grouped
  (``/apis/{group}/{version}/...``): ``{plural}`` (list, all namespaces),
  ``namespaces/{ns}/{plural}`` (list), ``namespaces/{ns}/{plural}/{name}``
  (get), ``{plural}/{name}`` (get, cluster-scoped kinds) and ``.../status``.
  Registered: nodes, namespaces, pods, events (v1); jobs (batch/v1);
  replicasets, statefulsets, deployments, daemonsets (apps/v1); jobsets
  (jobset.x-k8s.io/v1alpha2); pytorchjobs (kubeflow.org/v1); mpijobs
  (kubeflow.org/v2beta1); rayclusters, rayjobs (ray.io/v1);
  :meth:`register_resource` adds more.
* Lists honour ``labelSelector`` (``=``, ``==``, ``!=``, ``in``, ``notin``,
  ``key``, ``!key``, ``>``, ``<``; comma-joined), ``fieldSelector`` (``=``,
  ``==``, ``!=``; comma-joined; only the fields the real API supports for the
  kind, e.g. Pod ``spec.nodeName``/``status.phase``, Event
  ``involvedObject.*``/``reason``/``type``/``source``, Node
  ``spec.unschedulable``; others -> 400 ``field label not supported``),
  ``limit``/``continue``. ``watch`` is refused with 400.

Answers as the API server gives them: a list is ``{"kind": "<Kind>List",
"apiVersion": ..., "metadata": {"resourceVersion": ...}, "items": [...]}``
with built-in items WITHOUT kind/apiVersion (custom resources keep theirs),
sorted by namespace/name; errors are ``Status`` objects (401 Unauthorized,
404 NotFound ``pods "x" not found`` / ``jobs.batch "x" not found``, 400
BadRequest); an unknown group/version/resource is a plain-text
``404 page not found``.

Recorded: ``requests`` (``(method, path, query)`` of every request). Faults:
:meth:`fail_next`, ``delay``.

Builders (objects get uid, resourceVersion and creationTimestamp filled in;
uids are derived from the object's identity, so an ownerReference written
before its owner is added still matches the owner's uid): :meth:`add_node`,
:meth:`add_pod`, :meth:`add_job`, :meth:`add_namespace`, :meth:`add_event`,
:meth:`add_object`, :meth:`cordon`, :meth:`set_node_ready` and
:meth:`sample_cluster` (three GPU nodes with PyTorchJob, JobSet -> Job -> Pod
and RayCluster workloads, a cordoned node and a NotReady node with their events).
"""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from aiohttp import web

from tests.support.loopback import LoopbackServer

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

# Kubernetes' random-suffix alphabet (no vowels, no look-alikes).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_UID_NAMESPACE = uuid.UUID("6f2d1c0e-8a4b-4f51-9a57-1d1e5b0c7a11")

COMMON_FIELDS = ("metadata.name", "metadata.namespace")
# Field selectors the real API server supports, by kind.
FIELD_SELECTORS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
            "status.nominatedNodeName"),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
              "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    "Node": ("spec.unschedulable",),
    "Namespace": ("status.phase",),
    "ReplicaSet": ("status.replicas",),
    "Job": ("status.successful",),
    "Secret": ("type",),
}


# ------------------------------------------------------------------ utilities


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def rfc3339(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def suffix(seed: str, length: int = 5) -> str:
    """A Kubernetes-style random suffix, stable for ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:length])


def uid_for(api_version: str, kind: str, namespace: str | None, name: str) -> str:
    """The uid the server gives the object with this identity (unless it brings its own)."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{api_version}/{kind}/{namespace or ''}/{name}"))


def _plural_of(kind: str) -> str:
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


# ------------------------------------------------------------------ selectors

_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
_REQ = re.compile(
    r"^(?P<neg>!)?(?P<key>[^\s=!<>(),]+)"
    r"(?:(?P<op>==|=|!=|>|<)(?P<val>[^\s=!<>(),]*)|\s+(?P<setop>in|notin)\s*\((?P<vals>[^()]*)\))?$")


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_label_selector(selector: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """Requirements ``(key, op, values)``; raises ApiError 400 like the API server."""
    reqs: list[tuple[str, str, tuple[str, ...]]] = []
    if not selector.strip():
        return reqs
    for raw in _split_top_level(selector):
        part = raw.strip()
        # normalise "key = value" spacing the way the server's lexer does
        part = re.sub(r"\s*(==|!=|=|>|<)\s*", r"\1", part)
        m = _REQ.match(part)
        if not m or (m["neg"] and (m["op"] or m["setop"])):
            raise ApiError(400, "BadRequest", f"unable to parse requirement: found '{raw.strip()}', "
                                              "expected: identifier, '=', '!=', 'in', 'notin' or '!'")
        key = m["key"]
        if not _LABEL_KEY.match(key):
            raise ApiError(400, "BadRequest", f"unable to parse requirement: invalid label key \"{key}\"")
        if m["neg"]:
            reqs.append((key, "!", ()))
        elif m["op"]:
            op = "=" if m["op"] == "==" else m["op"]
            val = m["val"]
            if op in (">", "<"):
                if not re.fullmatch(r"-?\d+", val or ""):
                    raise ApiError(400, "BadRequest",
                                   "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be "
                                   "an integer")
            elif not _LABEL_VALUE.match(val):
                raise ApiError(400, "BadRequest", f"unable to parse requirement: invalid label value: \"{val}\"")
            reqs.append((key, op, (val,)))
        elif m["setop"]:
            vals = tuple(v.strip() for v in m["vals"].split(",")) if m["vals"].strip() else ()
            if not vals:
                raise ApiError(400, "BadRequest",
                               "unable to parse requirement: for 'in', 'notin' operators, values set can't be empty")
            bad = next((v for v in vals if not _LABEL_VALUE.match(v)), None)
            if bad is not None:
                raise ApiError(400, "BadRequest", f"unable to parse requirement: invalid label value: \"{bad}\"")
            reqs.append((key, m["setop"], vals))
        else:
            reqs.append((key, "exists", ()))
    return reqs


def labels_match(reqs: Sequence[tuple[str, str, tuple[str, ...]]], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    for key, op, vals in reqs:
        present = key in labels
        value = labels.get(key)
        if op == "exists":
            ok = present
        elif op == "!":
            ok = not present
        elif op == "=":
            ok = present and value == vals[0]
        elif op == "!=":
            ok = not present or value != vals[0]
        elif op == "in":
            ok = present and value in vals
        elif op == "notin":
            ok = not present or value not in vals
        else:  # > <
            try:
                num = int(value) if present else None
            except ValueError:
                num = None
            ok = num is not None and (num > int(vals[0]) if op == ">" else num < int(vals[0]))
        if not ok:
            return False
    return True


def parse_field_selector(selector: str, resource: Resource) -> list[tuple[str, str, str]]:
    terms: list[tuple[str, str, str]] = []
    if not selector.strip():
        return terms
    supported = COMMON_FIELDS + (FIELD_SELECTORS.get(resource.kind, ()) if resource.builtin else ())
    for raw in selector.split(","):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|!=|=)(.*)", raw)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid selector: '{selector}'; can't understand '{raw}'")
        field, op, value = m[1], "=" if m[2] == "==" else m[2], m[3].strip()
        if field not in supported:
            if resource.builtin:
                message = f"field label not supported: {field}"
            else:
                message = f"\"{field}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            raise ApiError(400, "BadRequest", message)
        terms.append((field, op, value))
    return terms


def _field_value(obj: dict, field: str) -> str:
    meta = obj.get("metadata", {})
    spec = obj.get("spec", {}) or {}
    status = obj.get("status", {}) or {}
    if field == "metadata.name":
        return meta.get("name", "")
    if field == "metadata.namespace":
        return meta.get("namespace", "")
    if field == "source":
        return (obj.get("source") or {}).get("component", "")
    if field == "spec.hostNetwork":
        return "true" if spec.get("hostNetwork") else "false"
    if field == "spec.unschedulable":
        return "true" if spec.get("unschedulable") else "false"
    if field in ("status.successful", "status.replicas"):
        return str(status.get(field.split(".")[1], 0))
    if field == "status.podIPs":
        return ",".join(ip.get("ip", "") for ip in status.get("podIPs", []) or [])
    cur: Any = obj
    for part in field.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def fields_match(terms: Sequence[tuple[str, str, str]], obj: dict) -> bool:
    for field, op, value in terms:
        actual = _field_value(obj, field)
        if (actual == value) != (op == "="):
            return False
    return True


# ------------------------------------------------------------------ server


class KubeTestServer(LoopbackServer):
    """Kubernetes API (read-only subset) on 127.0.0.1 over plain HTTP."""

    def __init__(self, token: str = "kube-test-token", *, delay: float = 0.0,
                 cluster_name: str = "alertd-test"):
        super().__init__(delay=delay)
        self.token = token
        self.cluster_name = cluster_name
        self.requests: list[KubeRequest] = []
        self.objects: dict[tuple[str, str, str, str], dict] = {}  # (apiVersion, kind, namespace, name)
        self._resources: dict[tuple[str, str, str], Resource] = {}  # (group, version, plural)
        self._by_kind: dict[tuple[str, str], Resource] = {}  # (apiVersion, kind)
        for res in DEFAULT_RESOURCES:
            self.register_resource(res)
        self._rv = 1000
        self._faults: list[tuple[int, str | None]] = []

    # ------------------------------------------------------------ lifecycle

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    def kubeconfig(self, *, namespace: str = "default") -> dict:
        """The kubeconfig document (a dict) for this server: one cluster, one token user, one context."""
        if self.url is None:
            raise RuntimeError("start() the server before asking for its kubeconfig")
        name = self.cluster_name
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "users": [{"name": f"{name}-user", "user": {"token": self.token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-user",
                                                     "namespace": namespace}}],
            "current-context": name,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write :meth:`kubeconfig` as YAML to ``path``; returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.kubeconfig(namespace=namespace), sort_keys=False))
        return path

    # ------------------------------------------------------------ test controls

    def register_resource(self, resource: Resource) -> Resource:
        self._resources[(resource.group, resource.version, resource.plural)] = resource
        self._by_kind[(resource.api_version, resource.kind)] = resource
        return resource

    def fail_next(self, status: int = 500, count: int = 1, path: str | None = None) -> None:
        """Answer the next ``count`` authenticated requests (whose path starts with ``path``) with a
        ``Status`` of code ``status`` (429 adds ``Retry-After: 1``)."""
        self._faults.extend([(status, path)] * count)

    def requests_to(self, path: str, method: str = "GET") -> list[KubeRequest]:
        """Requests whose path is exactly ``path``."""
        return [r for r in self.requests if r.path == path and r.method == method]

    def count(self, prefix: str = "/") -> int:
        """How many requests for objects (discovery, /version and health excluded) went to paths
        under ``prefix``."""
        return sum(1 for r in self.requests if r.path.startswith(prefix) and not _is_meta_path(r.path))

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        return self.objects.get((api_version, kind, namespace or "", name))

    # ------------------------------------------------------------ builders

    def _resource_for(self, api_version: str, kind: str) -> Resource:
        res = self._by_kind.get((api_version, kind))
        if res is None:
            group, _, version = api_version.rpartition("/")
            res = self.register_resource(Resource(group, version, _plural_of(kind), kind, builtin=False))
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
        meta.setdefault("creationTimestamp", rfc3339(_now()))
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
        created = created or (_now() - timedelta(days=30))
        now = _now()
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
                    "bootID": str(uuid.uuid5(_UID_NAMESPACE, "boot/" + name)),
                    "containerRuntimeVersion": "containerd://1.7.20",
                    "kernelVersion": "5.15.0-1063-aws",
                    "kubeProxyVersion": KUBE_VERSION["gitVersion"],
                    "kubeletVersion": KUBE_VERSION["gitVersion"],
                    "machineID": hashlib.md5(name.encode()).hexdigest(),
                    "operatingSystem": "linux",
                    "osImage": "Ubuntu 22.04.4 LTS",
                    "systemUUID": str(uuid.uuid5(_UID_NAMESPACE, "system/" + name)).upper(),
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
        now = _now()
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
        now = _now()
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
        created = created or (_now() - timedelta(hours=2))
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
        start = created or (_now() - timedelta(hours=2))
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
                             "spec": _pod_template_spec(image, gpus, restart_policy="Never")},
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
        last = last or _now()
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

    # ------------------------------------------------------------ sample cluster

    def sample_cluster(self) -> dict[str, Any]:
        """A realistic three-node GPU cluster; returns the names of what it made.

        * ``gpu-node-1``: H100 x8, Ready. ``gpu-node-2``: H100 x8, Ready but cordoned
          (kubelet ``NodeNotSchedulable`` event). ``gpu-node-3``: A100 with MIG
          (``nvidia.com/mig-1g.10gb``), NotReady: kubelet stopped posting status, node-controller
          ``NodeNotReady`` event on the node and Warning events on its pods.
        * namespace ``ml-training`` (team=ml-platform, owner=alice): PyTorchJob ``llama-finetune``
          owning pods ``llama-finetune-master-0`` (gpu-node-1) and ``llama-finetune-worker-0``
          (gpu-node-2) directly; JobSet ``pretrain-7b`` -> Jobs ``pretrain-7b-trainer-0``/``-1`` ->
          one pod each (gpu-node-1, gpu-node-2); a Succeeded ``nccl-test`` Job pod on gpu-node-1.
        * namespace ``research`` (team=research, owner=bob): RayCluster ``ray-serve`` owning a
          head pod and a MIG worker pod on gpu-node-3.
        * namespace ``gpu-operator``: DaemonSet ``nvidia-dcgm-exporter`` pods (no GPUs) on every node.
        """
        base = _now() - timedelta(hours=3)
        for ns, labels, ann in (
                ("default", {}, {}),
                ("kube-system", {}, {}),
                ("gpu-operator", {"team": "infra", "owner": "gpu-platform"}, {}),
                ("ml-training", {"team": "ml-platform", "owner": "alice"},
                 {"alertd.dev/slack-channel": "#ml-platform-alerts", "owner-email": "alice@example.com"}),
                ("research", {"team": "research", "owner": "bob"},
                 {"alertd.dev/slack-channel": "#research-alerts", "owner-email": "bob@example.com"})):
            self.add_namespace(ns, labels, ann, created=base - timedelta(days=90))

        self.add_node("gpu-node-1")
        self.add_node("gpu-node-2")
        self.add_node("gpu-node-3", gpu_product="NVIDIA-A100-SXM4-80GB", instance_type="p4de.24xlarge",
                      mig={"1g.10gb": 56})
        self.cordon("gpu-node-2")
        self.set_node_ready("gpu-node-3", "Unknown")

        # DaemonSet pods of the GPU operator on every node
        ds_uid = uid_for("apps/v1", "DaemonSet", "gpu-operator", "nvidia-dcgm-exporter")
        ds_labels = {"app": "nvidia-dcgm-exporter", "app.kubernetes.io/managed-by": "gpu-operator"}
        self.add_object({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator", "uid": ds_uid,
                         "generation": 1, "labels": ds_labels, "creationTimestamp": rfc3339(base - timedelta(days=30))},
            "spec": {"selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
                     "template": {"metadata": {"labels": ds_labels},
                                  "spec": _pod_template_spec("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.7-3.5.0-ubuntu22.04",
                                                             0, restart_policy="Always")},
                     "updateStrategy": {"type": "RollingUpdate"}},
            "status": {"currentNumberScheduled": 3, "desiredNumberScheduled": 3, "numberMisscheduled": 0,
                       "numberReady": 2, "numberAvailable": 2, "numberUnavailable": 1, "observedGeneration": 1,
                       "updatedNumberScheduled": 3},
        })
        dcgm_pods = []
        for node in ("gpu-node-1", "gpu-node-2", "gpu-node-3"):
            pod = f"nvidia-dcgm-exporter-{suffix(node)}"
            dcgm_pods.append(pod)
            self.add_pod("gpu-operator", pod, node, gpus=0, owner=("apps/v1", "DaemonSet", "nvidia-dcgm-exporter"),
                         labels={**ds_labels, "controller-revision-hash": "6c9b7d8f5d", "pod-template-generation": "1"},
                         image="nvcr.io/nvidia/k8s/dcgm-exporter:3.3.7-3.5.0-ubuntu22.04",
                         container="nvidia-dcgm-exporter",
                         restart_policy="Always", created=base - timedelta(days=30))

        # PyTorchJob: pods owned directly by the PyTorchJob
        ptj, ns = "llama-finetune", "ml-training"
        replica_template = {"template": {"spec": _pod_template_spec("nvcr.io/nvidia/pytorch:24.05-py3", 4,
                                                                    restart_policy="OnFailure", container="pytorch")}}
        self.add_object({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": ptj, "namespace": ns, "generation": 1, "labels": {"app": "llama"},
                         "creationTimestamp": rfc3339(base)},
            "spec": {"runPolicy": {"cleanPodPolicy": "None", "suspend": False},
                     "pytorchReplicaSpecs": {
                         "Master": {"replicas": 1, "restartPolicy": "OnFailure", **copy.deepcopy(replica_template)},
                         "Worker": {"replicas": 1, "restartPolicy": "OnFailure", **copy.deepcopy(replica_template)}}},
            "status": {
                "conditions": [
                    {"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
                     "message": f"PyTorchJob {ptj} is created.", "lastUpdateTime": rfc3339(base),
                     "lastTransitionTime": rfc3339(base)},
                    {"type": "Running", "status": "True", "reason": "PyTorchJobRunning",
                     "message": f"PyTorchJob {ns}/{ptj} is running.",
                     "lastUpdateTime": rfc3339(base + timedelta(minutes=2)),
                     "lastTransitionTime": rfc3339(base + timedelta(minutes=2))}],
                "replicaStatuses": {
                    "Master": {"active": 1, "selector": f"training.kubeflow.org/job-name={ptj},"
                                                        "training.kubeflow.org/operator-name=pytorchjob-controller,"
                                                        "training.kubeflow.org/replica-type=master"},
                    "Worker": {"active": 1, "selector": f"training.kubeflow.org/job-name={ptj},"
                                                        "training.kubeflow.org/operator-name=pytorchjob-controller,"
                                                        "training.kubeflow.org/replica-type=worker"}},
                "startTime": rfc3339(base)},
        })
        ptj_pods = []
        for rtype, node in (("master", "gpu-node-1"), ("worker", "gpu-node-2")):
            pod = f"{ptj}-{rtype}-0"
            ptj_pods.append(pod)
            labels = {"training.kubeflow.org/job-name": ptj,
                      "training.kubeflow.org/operator-name": "pytorchjob-controller",
                      "training.kubeflow.org/replica-type": rtype,
                      "training.kubeflow.org/replica-index": "0"}
            if rtype == "master":
                labels["training.kubeflow.org/job-role"] = "master"
            self.add_pod(ns, pod, node, gpus=4, owner=("kubeflow.org/v1", "PyTorchJob", ptj), labels=labels,
                         container="pytorch", restart_policy="OnFailure", created=base + timedelta(seconds=5))

        # JobSet -> Job -> Pod
        js = "pretrain-7b"
        self.add_object({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": js, "namespace": ns, "generation": 1, "labels": {"app": "pretrain"},
                         "creationTimestamp": rfc3339(base)},
            "spec": {
                "replicatedJobs": [{"name": "trainer", "replicas": 2, "template": {"spec": {
                    "parallelism": 1, "completions": 1, "backoffLimit": 0,
                    "template": {"spec": _pod_template_spec("nvcr.io/nvidia/nemo:24.05", 4,
                                                            restart_policy="Never", container="trainer")}}}}],
                "successPolicy": {"operator": "All"},
                "failurePolicy": {"maxRestarts": 3},
                "network": {"enableDNSHostnames": True, "subdomain": js, "publishNotReadyAddresses": True},
                "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
                "suspend": False},
            "status": {"restarts": 0, "terminalState": "",
                       "replicatedJobsStatus": [{"name": "trainer", "ready": 2, "active": 2, "succeeded": 0,
                                                 "failed": 0, "suspended": 0}]},
        })
        jobs, js_pods = [], []
        for index, node in ((0, "gpu-node-1"), (1, "gpu-node-2")):
            job = f"{js}-trainer-{index}"
            jobs.append(job)
            js_labels = {"jobset.sigs.k8s.io/jobset-name": js, "jobset.sigs.k8s.io/replicatedjob-name": "trainer",
                         "jobset.sigs.k8s.io/replicatedjob-replicas": "2", "jobset.sigs.k8s.io/job-index": str(index),
                         "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{ns}/{job}".encode()).hexdigest()}
            self.add_job(ns, job, owner=("jobset.x-k8s.io/v1alpha2", "JobSet", js), labels=js_labels, gpus=4,
                         image="nvcr.io/nvidia/nemo:24.05", created=base + timedelta(seconds=1))
            pod = f"{job}-0-{suffix(job)}"
            js_pods.append(pod)
            self.add_pod(ns, pod, node, gpus=4, owner=("batch/v1", "Job", job),
                         labels=self.job_pod_labels(ns, job, index=0),
                         annotations={"batch.kubernetes.io/job-completion-index": "0",
                                      "jobset.sigs.k8s.io/jobset-name": js},
                         image="nvcr.io/nvidia/nemo:24.05", container="trainer", created=base + timedelta(seconds=3))

        # a finished Job on gpu-node-1 (for status.phase!=Succeeded filtering)
        self.add_job(ns, "nccl-test", gpus=0, active=0, succeeded=1, indexed=False, created=base - timedelta(hours=5))
        nccl_pod = f"nccl-test-{suffix('nccl-test')}"
        self.add_pod(ns, nccl_pod, "gpu-node-1", gpus=0, owner=("batch/v1", "Job", "nccl-test"),
                     labels=self.job_pod_labels(ns, "nccl-test"), phase="Succeeded", container="nccl",
                     created=base - timedelta(hours=5))

        # RayCluster owning its pods on the MIG node
        rc, rns = "ray-serve", "research"
        self.add_object({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": rc, "namespace": rns, "generation": 1, "creationTimestamp": rfc3339(base)},
            "spec": {"rayVersion": "2.34.0",
                     "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                                       "template": {"spec": _pod_template_spec("rayproject/ray:2.34.0", 0,
                                                                               restart_policy="Always",
                                                                               container="ray-head")}},
                     "workerGroupSpecs": [{"groupName": "gpu-group", "replicas": 1, "minReplicas": 1, "maxReplicas": 4,
                                           "rayStartParams": {},
                                           "template": {"spec": _pod_template_spec(
                                               "rayproject/ray:2.34.0-gpu", 1, restart_policy="Always",
                                               container="ray-worker", mig="1g.10gb")}}]},
            "status": {"state": "ready", "availableWorkerReplicas": 1, "desiredWorkerReplicas": 1,
                       "readyWorkerReplicas": 1, "maxWorkerReplicas": 4, "minWorkerReplicas": 1,
                       "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379", "metrics": "8080"},
                       "head": {"podName": f"{rc}-head-{suffix(rc + 'head')}"}},
        })
        ray_common = {"ray.io/cluster": rc, "ray.io/is-ray-node": "yes",
                      "app.kubernetes.io/created-by": "kuberay-operator", "app.kubernetes.io/name": "kuberay"}
        ray_head = f"{rc}-head-{suffix(rc + 'head')}"
        ray_worker = f"{rc}-gpu-group-worker-{suffix(rc + 'worker')}"
        self.add_pod(rns, ray_head, "gpu-node-3", gpus=0, owner=("ray.io/v1", "RayCluster", rc),
                     labels={**ray_common, "ray.io/node-type": "head", "ray.io/group": "headgroup",
                             "ray.io/identifier": f"{rc}-head"},
                     image="rayproject/ray:2.34.0", container="ray-head", restart_policy="Always",
                     created=base + timedelta(seconds=5))
        self.add_pod(rns, ray_worker, "gpu-node-3", gpus=1, mig="1g.10gb", owner=("ray.io/v1", "RayCluster", rc),
                     labels={**ray_common, "ray.io/node-type": "worker", "ray.io/group": "gpu-group",
                             "ray.io/identifier": f"{rc}-worker"},
                     image="rayproject/ray:2.34.0-gpu", container="ray-worker", restart_policy="Always",
                     created=base + timedelta(seconds=5))
        for pod in (ray_head, ray_worker):
            self.add_event(rns, "Pod", pod, "NodeNotReady", "Node is not ready", type="Warning",
                           component="node-controller")

        return {
            "nodes": ["gpu-node-1", "gpu-node-2", "gpu-node-3"],
            "cordoned": "gpu-node-2",
            "not_ready": "gpu-node-3",
            "namespaces": {"ml-training": {"team": "ml-platform", "owner": "alice"},
                           "research": {"team": "research", "owner": "bob"}},
            "pytorchjob": {"namespace": ns, "name": ptj, "pods": ptj_pods},
            "jobset": {"namespace": ns, "name": js, "jobs": jobs, "pods": js_pods},
            "raycluster": {"namespace": rns, "name": rc, "pods": [ray_head, ray_worker]},
            "daemonset": {"namespace": "gpu-operator", "name": "nvidia-dcgm-exporter", "pods": dcgm_pods},
            "completed_pod": {"namespace": ns, "name": nccl_pod},
        }

    # ------------------------------------------------------------ HTTP

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"].rstrip("/")  # VersionApi asks for "/version/"
        query = dict(request.query)
        self.requests.append(KubeRequest(request.method, path, query))
        await self.wait_delay()
        try:
            if path in ("/healthz", "/livez", "/readyz"):
                return web.Response(text="ok")
            if path == "/version" and request.method == "GET" and not request.headers.get("Authorization"):
                return web.json_response(KUBE_VERSION)
            self._authenticate(request)
            fault = self._take_fault(path)
            if fault is not None:
                raise fault
            if request.method != "GET":
                raise ApiError(405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource")
            return web.json_response(self._route(path, query))
        except ApiError as exc:
            return web.json_response(status_object(exc.code, exc.reason, exc.message, exc.details),
                                     status=exc.code, headers=exc.headers)
        except PageNotFound:
            return web.Response(status=404, text="404 page not found\n", content_type="text/plain")

    def _authenticate(self, request: web.Request) -> None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or token.strip() != self.token:
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _take_fault(self, path: str) -> ApiError | None:
        for i, (status, prefix) in enumerate(self._faults):
            if prefix is None or path.startswith(prefix):
                del self._faults[i]
                if status == 429:
                    return ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                                    {"retryAfterSeconds": 1}, headers={"Retry-After": "1"})
                if status == 403:
                    return ApiError(403, "Forbidden", "forbidden: injected failure")
                if status == 504:
                    return ApiError(504, "Timeout", "the server was unable to return a response in the time allotted")
                return ApiError(status, "InternalError", "Internal error occurred: injected failure")
        return None

    # ------------------------------------------------------------ routing

    def _route(self, path: str, query: dict[str, str]) -> dict:
        parts = [p for p in path.split("/") if p]
        if path == "/version":
            return KUBE_VERSION
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                    "serverAddress": (self.url or "").split("//")[-1]}]}
        if parts == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g) for g in self._groups()]}
        if not parts or parts[0] not in ("api", "apis"):
            raise PageNotFound()
        if parts[0] == "api":
            if len(parts) < 2 or parts[1] != "v1":
                raise PageNotFound()
            group, version, rest = "", "v1", parts[2:]
        else:
            if parts[1] not in self._groups():
                raise PageNotFound()
            if len(parts) == 2:
                return {"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1])}
            group, version, rest = parts[1], parts[2], parts[3:]
            if version not in self._versions(group):
                raise PageNotFound()
        if not rest:
            return self._resource_list(group, version)
        return self._serve(group, version, rest, query)

    def _groups(self) -> list[str]:
        seen: dict[str, None] = {}
        for res in self._resources.values():
            if res.group:
                seen.setdefault(res.group, None)
        return list(seen)

    def _versions(self, group: str) -> list[str]:
        seen: dict[str, None] = {}
        for res in self._resources.values():
            if res.group == group:
                seen.setdefault(res.version, None)
        return list(seen)

    def _group(self, group: str) -> dict:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self._versions(group)]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def _resource_list(self, group: str, version: str) -> dict:
        resources = []
        for res in self._resources.values():
            if res.group == group and res.version == version:
                entry: dict[str, Any] = {"name": res.plural, "singularName": res.singular,
                                         "namespaced": res.namespaced, "kind": res.kind, "verbs": ["get", "list"]}
                if res.short_names:
                    entry["shortNames"] = list(res.short_names)
                resources.append(entry)
                resources.append({"name": f"{res.plural}/status", "singularName": "", "namespaced": res.namespaced,
                                  "kind": res.kind, "verbs": ["get"]})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}

    def _lookup(self, group: str, version: str, plural: str) -> Resource:
        res = self._resources.get((group, version, plural))
        if res is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        return res

    def _serve(self, group: str, version: str, rest: list[str], query: dict[str, str]) -> dict:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        res = self._lookup(group, version, rest[0])
        if namespace is not None and not res.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if len(rest) == 1:
            return self._list(res, namespace, query)
        name = rest[1]
        if res.namespaced and namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if len(rest) > 3 or (len(rest) == 3 and rest[2] != "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        obj = self.objects.get((res.api_version, res.kind, namespace or "", name))
        if obj is None:
            details = {"name": name, "kind": res.plural}
            if res.group:
                details = {"name": name, "group": res.group, "kind": res.plural}
            raise ApiError(404, "NotFound", f"{res.qualified} \"{name}\" not found", details)
        return copy.deepcopy(obj)

    def _list(self, res: Resource, namespace: str | None, query: dict[str, str]) -> dict:
        if query.get("watch") in ("true", "1", "True"):
            raise ApiError(400, "BadRequest", "watch is not supported by this test server")
        reqs = parse_label_selector(query.get("labelSelector", ""))
        terms = parse_field_selector(query.get("fieldSelector", ""), res)
        items = []
        for (api_version, kind, ns, name), obj in sorted(self.objects.items(), key=lambda kv: (kv[0][2], kv[0][3])):
            if api_version != res.api_version or kind != res.kind:
                continue
            if namespace is not None and ns != namespace:
                continue
            if not labels_match(reqs, obj["metadata"].get("labels")) or not fields_match(terms, obj):
                continue
            items.append(obj)
        meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
        start = 0
        if query.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(query["continue"].encode()))
                start = next(i for i, o in enumerate(items)
                             if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > tuple(token["after"]))
            except StopIteration:
                start = len(items)
            except Exception:
                raise ApiError(400, "BadRequest", "continue key is not valid: illegal base64 data") from None
        limit = int(query["limit"]) if query.get("limit", "").isdigit() and int(query["limit"]) > 0 else None
        page = items[start:start + limit] if limit else items[start:]
        if limit and start + limit < len(items):
            last = page[-1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"after": [last.get("namespace", ""), last["name"]]}).encode()).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        out = []
        for obj in page:
            obj = copy.deepcopy(obj)
            if res.builtin:
                obj.pop("apiVersion", None)
                obj.pop("kind", None)
            out.append(obj)
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": out}


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


def _is_meta_path(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    if path in ("/version", "/healthz", "/livez", "/readyz") or not parts:
        return True
    if parts[0] == "api":
        return len(parts) <= 2
    return parts[0] == "apis" and len(parts) <= 3


def _pod_template_spec(image: str, gpus: int, *, restart_policy: str, container: str = "main",
                       mig: str | None = None) -> dict:
    resources: dict[str, Any] = {}
    if gpus:
        key = f"nvidia.com/mig-{mig}" if mig else "nvidia.com/gpu"
        resources = {"limits": {key: str(gpus)}}
    return {"containers": [{"name": container, "image": image, "resources": resources}],
            "restartPolicy": restart_policy}
