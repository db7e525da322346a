"""The Kubernetes side of remediation: read what the guards and the blast radius need, and act.

Reads reuse alertd.enrich (owner chains, GPU counts, credentials); writes are four kinds of request:
``patch nodes`` (cordon: spec.unschedulable and a taint, plus alertd's mark; uncordon; handoff labels and
annotations) and ``create pods/eviction`` (drain, through the Eviction API so PodDisruptionBudgets hold).
Every write is idempotent: a node already carrying alertd's mark for the incident is left alone, a pod
already gone counts as evicted. A node that someone else cordoned is never marked, so it is never
uncordoned by alertd. Node patches carry the resourceVersion read, so a concurrent change answers 409 and
is read and tried again.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone
from typing import Awaitable, Callable, NotRequired, TypedDict, cast

from alertd.core.json_types import JSONObject, JSONValue, member, objects
from alertd.core.kube_objects import Node, as_node, as_pdb
from alertd.core.kube_findings import Pod
from alertd.core.model import iso, parse_iso
from alertd.enrich.jobs import JobImpactReader, OwnerGangs, owner_gangs
from alertd.enrich.kube import KubeContext
from alertd.enrich.kube_api import decode_json
from alertd.remediation import blast as blast_mod
from alertd.remediation.blast import BlastPod, BlastRadius, Gang
from alertd.remediation.decide import ClusterView

MARK = "alertd.dev/cordoned-for"  # the incident id alertd cordoned the node for
MARKED_AT = "alertd.dev/cordoned-at"
MERGE = "application/merge-patch+json"
GANG_LABELS = ("jobset.sigs.k8s.io/jobset-name", "training.kubeflow.org/job-name", "ray.io/cluster",
               "batch.kubernetes.io/job-name", "job-name")
RETRIES = 3

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A Kubernetes request that failed: ``status`` 0 when the API server could not be reached."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"HTTP {status}: {reason}" if status else reason)
        self.status, self.reason = status, reason


class Eviction(TypedDict):
    """What a drain did to one pod: ``result`` starts with "evicted" when it is off the node."""

    pod: str  # namespace/name
    result: str
    gpus: NotRequired[int]
    status: NotRequired[int]  # the refusal's HTTP status


def _strings(obj: JSONObject, key: str) -> dict[str, str]:
    """metadata.labels or metadata.annotations of a Kubernetes object (string to string in the API)."""
    return {k: str(v) for k, v in member(member(obj, "metadata"), key).items()}


def _ref(pod: BlastPod) -> str:
    return f"{pod.get('namespace', '')}/{pod.get('name', '')}"


class LabelGangs:
    """Default gang lookup: pods sharing a job-name label of the usual operators (JobSet, Kubeflow's
    training operator, KubeRay, batch Jobs) in one namespace form a gang."""

    def __init__(self, by_namespace: dict[str, list[JSONObject]]):
        self.by_namespace = by_namespace

    def gang(self, namespace: str, pod: BlastPod) -> Gang | None:
        labels = pod.get("labels") or {}
        key = next((k for k in GANG_LABELS if labels.get(k)), None)
        if key is None:
            return None
        members = [p for p in self.by_namespace.get(namespace, []) if _strings(p, "labels").get(key) == labels[key]]
        if len(members) < 2:
            return None
        nodes = sorted({str(member(p, "spec").get("nodeName", "")) for p in members} - {""})
        return {"label": key, "name": labels[key], "pods": len(members), "nodes": nodes}


class _ByOwner:
    """enrich's owner-chain gangs as a :class:`~alertd.remediation.blast.GangLookup` (its pods and answers
    are the shapes of BlastPod and Gang, as plain JSON)."""

    def __init__(self, gangs: OwnerGangs):
        self.gangs = gangs

    def gang(self, namespace: str, pod: BlastPod) -> Gang | None:
        found = self.gangs.gang(namespace, pod)
        return None if found is None else cast(Gang, found)


class KubeRemediator(KubeContext):
    """Acts on one cluster's nodes; see the module docstring for what each write does."""

    async def call(self, api_name: str, method: str, *args: object, **kwargs: object) -> JSONObject:
        """One request; the JSON answer, or ApiError with the status (403, 404, 409, 429, 0: unreachable)."""
        api = await self._api(api_name)
        async with self._sem:
            self.stats.calls += 1
            try:
                resp = await asyncio.wait_for(getattr(api, method)(
                    *args, _preload_content=False, _request_timeout=self.settings.timeout, **kwargs),
                    self.settings.timeout + 1)
                raw, status = await resp.read(), resp.status
                resp.release()
            except asyncio.TimeoutError:
                raise ApiError(0, f"no answer within {self.settings.timeout:g}s") from None
            except ApiError:
                raise
            except Exception as exc:
                raw, status = getattr(exc, "body", b"") or b"", getattr(exc, "status", 0) or 0
                if not status:
                    raise ApiError(0, f"unreachable: {type(exc).__name__}: {exc}"[:200]) from exc
        try:
            body = await decode_json(raw) if raw else {}
        except ValueError:
            body = {}
        if not 200 <= status < 300:
            message = body.get("message") if isinstance(body, dict) else ""
            raise ApiError(status, message if isinstance(message, str) and message else "error")
        return body if isinstance(body, dict) else {}

    # ----- reads -----

    async def view(self, now: datetime) -> ClusterView:
        nodes = [as_node(n) for n in objects((await self.call("CoreV1Api", "list_node")).get("items"))]
        gpu = [n for n in nodes if self._gpu_node(n)]
        meta = [(n.get("metadata") or {}, n) for n in nodes]
        marked = {m.get("name", ""): (m.get("annotations") or {})[MARK] for m, _ in meta
                  if (m.get("annotations") or {}).get(MARK)}
        hour_ago = now - timedelta(hours=1)
        recent = sum(1 for m, _ in meta if (at := parse_iso((m.get("annotations") or {}).get(MARKED_AT)))
                     and at >= hour_ago)
        cordoned = frozenset(m.get("name", "") for m, n in meta if (n.get("spec") or {}).get("unschedulable"))
        return ClusterView(gpu_nodes=len(gpu), marked=marked, cordoned=cordoned, cordons_last_hour=recent)

    def _gpu_node(self, node: Node) -> bool:
        status = node.get("status") or {}
        resources = {**(status.get("capacity") or {}), **(status.get("allocatable") or {})}
        labels = (node.get("metadata") or {}).get("labels") or {}
        return any(k in resources for k in ("nvidia.com/gpu",)) or any(k in labels for k in self.settings.gpu_product_labels)

    async def pods_on(self, node: str) -> list[JSONObject]:
        return objects((await self.call("CoreV1Api", "list_pod_for_all_namespaces",
                                        field_selector=f"spec.nodeName={node}")).get("items"))

    async def blast(self, action: str, nodes: list[str], gangs: blast_mod.GangLookup | None = None) -> BlastRadius:
        raw = [p for n in nodes for p in await self.pods_on(n)]
        described = await asyncio.gather(*(self._blast_pod(p) for p in raw))
        namespaces = sorted({d.get("namespace", "") for d in described})
        try:  # without the remediation role (read-only installs) the blast radius still shows the pods
            read = await self.call("PolicyV1Api", "list_pod_disruption_budget_for_all_namespaces")
            pdbs, unread = [as_pdb(p) for p in objects(read.get("items"))], ""
        except ApiError as exc:
            pdbs, unread = [], f"PodDisruptionBudgets not readable ({exc}): blocked evictions unknown"
        pdbs = [p for p in pdbs if (p.get("metadata") or {}).get("namespace") in namespaces]
        if gangs is None:
            gangs = await self._gangs(list(described), namespaces)
        out = blast_mod.build(action, list(described), pdbs, gangs)
        if unread:
            out["error"] = unread
        return out

    async def _gangs(self, described: list[BlastPod], namespaces: list[str]) -> blast_mod.GangLookup:
        """A pod's gang by its owner chain (the job-impact view: the job's GPU pods on every node); by the usual
        job-name labels when the owners cannot be read."""
        try:
            pods = [Pod.from_json(cast(JSONObject, d)) for d in described]
            return _ByOwner(await owner_gangs(JobImpactReader(self, self.settings.jobs), pods, datetime.now(timezone.utc)))
        except Exception as exc:  # noqa: BLE001 - a blast radius without owner gangs still shows the pods
            log.info("gangs by owner unavailable (%s): grouping by job-name labels", exc)
        return LabelGangs({ns: objects((await self.call("CoreV1Api", "list_namespaced_pod", ns)).get("items"))
                           for ns in namespaces})

    async def _blast_pod(self, pod: JSONObject) -> BlastPod:
        # enrich describes the pod (a Pod finding: namespace, name, node, phase, gpus, owner_chain, ...)
        found = await self._describe_pod(pod, str(member(pod, "spec").get("nodeName", "")))
        out = cast(BlastPod, found.to_json())
        out["labels"] = _strings(pod, "labels")
        out["daemonset"] = bool(found.owner_chain) and found.owner_chain[0].kind == "DaemonSet"
        out["mirror"] = "kubernetes.io/config.mirror" in _strings(pod, "annotations")
        return out

    # ----- writes -----

    async def _patch_node(self, name: str, change: Callable[[JSONObject], JSONObject | str]) -> str:
        """Read the node, let ``change`` build a merge patch (or say why nothing is to be done), send it with
        the resourceVersion read; a 409 (someone changed the node meanwhile) reads it again."""
        for attempt in range(RETRIES):
            node = await self.call("CoreV1Api", "read_node", name)
            patch = change(node)
            if isinstance(patch, str):
                return patch
            patch["metadata"] = {**member(patch, "metadata"),
                                 "resourceVersion": member(node, "metadata").get("resourceVersion", "")}
            try:
                await self.call("CoreV1Api", "patch_node", name, patch, _content_type=MERGE)
                return ""
            except ApiError as exc:
                if exc.status != 409 or attempt == RETRIES - 1:
                    raise
        return ""

    async def cordon(self, name: str, incident_id: str, taint: tuple[str, str], now: datetime) -> str:
        """"" when cordoned now; else what was found (already ours; cordoned by someone else: left unmarked)."""
        def change(node: JSONObject) -> JSONObject | str:
            spec, mark = member(node, "spec"), _strings(node, "annotations").get(MARK)
            if mark == incident_id:
                return "already cordoned by alertd for this incident"
            if spec.get("unschedulable") or mark:
                return (f"already cordoned by someone else ({mark or 'not alertd'}); left as it is and not "
                        "marked, so alertd will never uncordon it")
            taints: list[JSONValue] = [t for t in objects(spec.get("taints")) if t.get("key") != taint[0]]
            taints.append({"key": taint[0], "value": incident_id, "effect": taint[1]})
            return {"metadata": {"annotations": {MARK: incident_id, MARKED_AT: iso(now)}},
                    "spec": {"unschedulable": True, "taints": taints}}
        return await self._patch_node(name, change)

    async def uncordon(self, name: str, incident_id: str, taint: tuple[str, str]) -> str:
        """"" when uncordoned now; else why not (the node no longer carries alertd's mark for the incident)."""
        def change(node: JSONObject) -> JSONObject | str:
            mark = _strings(node, "annotations").get(MARK)
            if mark != incident_id:
                return f"not uncordoned: the node does not carry alertd's mark for {incident_id} (mark: {mark or 'none'})"
            taints: list[JSONValue] = [t for t in objects(member(node, "spec").get("taints")) if t.get("key") != taint[0]]
            return {"metadata": {"annotations": {MARK: None, MARKED_AT: None}},
                    "spec": {"unschedulable": None, "taints": taints or None}}
        return await self._patch_node(name, change)

    async def handoff(self, name: str, labels: dict[str, str], annotations: dict[str, str]) -> str:
        def change(node: JSONObject) -> JSONObject | str:
            have, noted = _strings(node, "labels"), _strings(node, "annotations")
            if all(have.get(k) == v for k, v in labels.items()) and all(noted.get(k) == v for k, v in annotations.items()):
                return "already handed off"
            return {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}}
        return await self._patch_node(name, change)

    async def evict(self, namespace: str, name: str, grace: int | None) -> None:
        body: JSONObject = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if grace is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace}
        await self.call("CoreV1Api", "create_namespaced_pod_eviction", name, namespace, body)

    async def drain(self, node: str, action: str, *, grace: int | None, deadline: float,
                    clock: Callable[[], float], pause: Callable[[float], Awaitable[None]],
                    stopped: Callable[[], bool]) -> list[Eviction]:
        """Evict what the action evicts from the node; one line per pod: evicted, gone, or not and why.

        A 429 (a PodDisruptionBudget allows no disruption now) is tried again until ``deadline``; 403 and
        other refusals are reported at once; ``stopped()`` ends the drain between evictions."""
        pods = [await self._blast_pod(p) for p in await self.pods_on(node)]
        todo = [p for p in pods if blast_mod.evicts(action, p)[0]]
        out: list[Eviction] = []
        while todo:
            waiting = []
            for pod in todo:
                if stopped():
                    out.append({"pod": _ref(pod), "result": "not evicted: stopped"})
                    continue
                result = await self._evict_one(pod, grace)
                if result is None:
                    waiting.append(pod)
                else:
                    out.append(result)
            todo = waiting
            if todo and (clock() >= deadline or stopped()):
                why = "the drain was stopped" if stopped() else "the drain timed out"
                out.extend({"pod": _ref(p), "result": "not evicted: a PodDisruptionBudget "
                            f"allowed no disruption before {why}", "status": 429} for p in todo)
                break
            if todo:
                await pause(1.0)
        return out

    async def _evict_one(self, pod: BlastPod, grace: int | None) -> Eviction | None:
        """The eviction's result, or None when a PDB refused it for now (try again later)."""
        ref = _ref(pod)
        try:
            await self.evict(pod.get("namespace", ""), pod.get("name", ""), grace)
            return {"pod": ref, "result": "evicted", "gpus": pod.get("gpus", 0)}
        except ApiError as exc:
            if exc.status == 404:
                return {"pod": ref, "result": "evicted (already gone)", "gpus": pod.get("gpus", 0)}
            if exc.status == 429:
                return None
            return {"pod": ref, "result": f"not evicted: {exc}", "status": exc.status}
