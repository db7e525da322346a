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

Beside it: ``kube_resources`` (resources, errors), ``kube_selectors``, ``kube_objects`` and
``kube_nodes`` (the builders) and ``kube_sample`` (the sample cluster).
"""
from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from testkit import kube_sample
from testkit.kube_nodes import NodeObjects
from testkit.kube_resources import (DEFAULT_RESOURCES, KUBE_VERSION, ApiError, KubeRequest, PageNotFound,
                                          Resource, status_object)
from testkit.kube_selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from testkit.loopback import LoopbackServer


class KubeTestServer(NodeObjects, LoopbackServer):
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

    # ------------------------------------------------------------ sample cluster

    def sample_cluster(self) -> dict[str, Any]:
        """A realistic three-node GPU cluster (see :func:`testkit.kube_sample.sample_cluster`);
        returns the names of what it made."""
        return kube_sample.sample_cluster(self)

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


def _is_meta_path(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    if path in ("/version", "/healthz", "/livez", "/readyz") or not parts:
        return True
    if parts[0] == "api":
        return len(parts) <= 2
    return parts[0] == "apis" and len(parts) <= 3
