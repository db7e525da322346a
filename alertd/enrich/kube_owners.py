"""Whose GPU pods these are: owner chains, and the team and Slack channel they name.

Owner chains follow ``ownerReferences`` with ``controller: true`` up to the
top (Pod -> ReplicaSet -> Deployment, Pod -> Job -> JobSet/CronJob, Pod ->
PyTorchJob / MPIJob / RayCluster ...); built-in kinds use their typed API,
everything else CustomObjectsApi with the group/version from ``apiVersion``
and the plural from ``owner_plurals`` (default: lower-case kind + ``s``).
Owners and namespaces change rarely, so they are cached for ``owner_cache_ttl``.
"""
from __future__ import annotations

import logging
from typing import Any

from alertd.enrich.kube_api import KubeApi, KubeUnavailable, NotFound, meta

log = logging.getLogger(__name__)

# Built-in owner kinds: apiVersion group -> kind -> (API class, method).
_TYPED = {
    ("apps", "ReplicaSet"): ("AppsV1Api", "read_namespaced_replica_set"),
    ("apps", "Deployment"): ("AppsV1Api", "read_namespaced_deployment"),
    ("apps", "StatefulSet"): ("AppsV1Api", "read_namespaced_stateful_set"),
    ("apps", "DaemonSet"): ("AppsV1Api", "read_namespaced_daemon_set"),
    ("batch", "Job"): ("BatchV1Api", "read_namespaced_job"),
    ("batch", "CronJob"): ("BatchV1Api", "read_namespaced_cron_job"),
    ("", "ReplicationController"): ("CoreV1Api", "read_namespaced_replication_controller"),
}


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    refs = meta(obj).get("ownerReferences") or []
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class KubeOwners(KubeApi):
    """Owner-chain resolution and team/channel attribution on top of the cached API reads."""

    async def owner_chain(self, ns: str, pod: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The pod's controllers up to the top (links as the incident shows them) and the objects
        read on the way, the pod first. A link that cannot be read ends the chain, marked
        ``missing`` (gone) or ``unresolved`` (with the reason)."""
        chain: list[dict[str, Any]] = []
        objects: list[dict[str, Any]] = [pod]
        current = pod
        for _ in range(self.settings.max_owner_depth):
            ref = controller_ref(current)
            if ref is None:
                break
            link = {"kind": ref.get("kind", ""), "name": ref.get("name", ""), "apiVersion": ref.get("apiVersion", "")}
            chain.append(link)
            try:
                current = await self.owner(ns, ref)
            except NotFound:
                link["missing"] = True
                break
            except KubeUnavailable as exc:
                link["unresolved"] = exc.reason
                break
            objects.append(current)
        return chain, objects

    def team_and_channel(self, objects: list[dict[str, Any]]) -> tuple[str, str]:
        team = channel = ""
        for obj in objects:
            m = meta(obj)
            labels, annotations = m.get("labels") or {}, m.get("annotations") or {}
            if not team:
                team = str(next((labels.get(k) or annotations.get(k) for k in self.settings.team_labels
                                 if labels.get(k) or annotations.get(k)), ""))
            if not channel:
                channel = str(next((annotations.get(k) or labels.get(k) for k in self.settings.channel_annotations
                                    if annotations.get(k) or labels.get(k)), ""))
            if team and channel:
                break
        return team, channel

    async def namespace(self, ns: str) -> dict[str, Any] | None:
        if not ns:
            return None

        async def fetch() -> dict[str, Any] | None:
            try:
                return await self._get("CoreV1Api", "read_namespace", ns)
            except (NotFound, KubeUnavailable) as exc:
                log.debug("namespace %s unavailable: %s", ns, exc)
                return None

        return await self._cached(("namespace", ns), self.settings.owner_cache_ttl, fetch)

    async def owner(self, ns: str, ref: dict[str, Any]) -> dict[str, Any]:
        api_version, kind, name = ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", "")
        key = ("owner", ns, api_version, kind, name)

        async def fetch() -> dict[str, Any]:
            group, version = split_api_version(api_version)
            typed = _TYPED.get((group, kind))
            if typed is not None:
                return await self._get(typed[0], typed[1], name, ns)
            plural = self.settings.owner_plurals.get(kind) or kind.lower() + "s"
            return await self._get("CustomObjectsApi", "get_namespaced_custom_object", group, version, ns, plural, name)

        return await self._cached(key, self.settings.owner_cache_ttl, fetch)


def top_owner(pod: dict[str, Any]) -> tuple[tuple[str, str, str], dict[str, Any]]:
    """((namespace, kind, name), link) of a described pod's workload: its chain's top, else the pod itself."""
    chain = pod.get("owner_chain") or []
    top = chain[-1] if chain else {"kind": "Pod", "name": pod.get("name", "")}
    return (pod.get("namespace", ""), top.get("kind", ""), top.get("name", "")), top


def owners_of(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The top owner of each pod (the workload: PyTorchJob, Deployment ...), deduplicated."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pod in pods:
        key, _ = top_owner(pod)
        entry = seen.get(key)
        if entry is None:
            entry = seen[key] = {"kind": key[1], "name": key[2], "namespace": key[0], "team": pod.get("team", ""),
                                 "channel": pod.get("channel", ""), "pods": 0, "gpus": 0}
        entry["pods"] += 1
        entry["gpus"] += int(pod.get("gpus") or 0)
        entry["team"] = entry["team"] or pod.get("team", "")
        entry["channel"] = entry["channel"] or pod.get("channel", "")
    return list(seen.values())


__all__ = ["KubeOwners", "controller_ref", "owners_of", "split_api_version", "top_owner"]
