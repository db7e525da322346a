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
from dataclasses import replace

from alertd.core.findings import Owner
from alertd.core.json_types import JSONObject, objects, string_map, text
from alertd.core.kube_findings import OwnerLink, Pod
from alertd.enrich.kube_api import KubeApi, KubeUnavailable, NotFound, metadata

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


def controller_ref(obj: JSONObject) -> JSONObject | None:
    for ref in objects(metadata(obj).get("ownerReferences")):
        if ref.get("controller"):
            return ref
    return None


def split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class KubeOwners(KubeApi):
    """Owner-chain resolution and team/channel attribution on top of the cached API reads."""

    async def owner_chain(self, ns: str, pod: JSONObject) -> tuple[list[OwnerLink], list[JSONObject]]:
        """The pod's controllers up to the top (links as the incident shows them) and the objects
        read on the way, the pod first. A link that cannot be read ends the chain, marked
        ``missing`` (gone) or ``unresolved`` (with the reason)."""
        chain: list[OwnerLink] = []
        read: list[JSONObject] = [pod]
        current = pod
        for _ in range(self.settings.max_owner_depth):
            ref = controller_ref(current)
            if ref is None:
                break
            link = OwnerLink(text(ref, "kind"), text(ref, "name"), text(ref, "apiVersion"))
            try:
                current = await self.owner(ns, ref)
            except NotFound:
                chain.append(replace(link, missing=True))
                break
            except KubeUnavailable as exc:
                chain.append(replace(link, unresolved=exc.reason))
                break
            chain.append(link)
            read.append(current)
        return chain, read

    def team_and_channel(self, objs: list[JSONObject]) -> tuple[str, str]:
        team = channel = ""
        for obj in objs:
            m = metadata(obj)
            labels, annotations = string_map(m.get("labels")), string_map(m.get("annotations"))
            if not team:
                team = next((labels.get(k) or annotations.get(k) for k in self.settings.team_labels
                             if labels.get(k) or annotations.get(k)), "") or ""
            if not channel:
                channel = next((annotations.get(k) or labels.get(k) for k in self.settings.channel_annotations
                                if annotations.get(k) or labels.get(k)), "") or ""
            if team and channel:
                break
        return team, channel

    async def namespace(self, ns: str) -> JSONObject | None:
        if not ns:
            return None

        async def fetch() -> JSONObject | None:
            try:
                return await self._get("CoreV1Api", "read_namespace", ns)
            except (NotFound, KubeUnavailable) as exc:
                log.debug("namespace %s unavailable: %s", ns, exc)
                return None

        return await self._cached(("namespace", ns), self.settings.owner_cache_ttl, fetch)

    async def owner(self, ns: str, ref: JSONObject) -> JSONObject:
        api_version, kind, name = text(ref, "apiVersion"), text(ref, "kind"), text(ref, "name")
        key = ("owner", ns, api_version, kind, name)

        async def fetch() -> JSONObject:
            group, version = split_api_version(api_version)
            typed = _TYPED.get((group, kind))
            if typed is not None:
                return await self._get(typed[0], typed[1], name, ns)
            plural = self.settings.owner_plurals.get(kind) or kind.lower() + "s"
            return await self._get("CustomObjectsApi", "get_namespaced_custom_object", group, version, ns, plural, name)

        return await self._cached(key, self.settings.owner_cache_ttl, fetch)


def top_owner(pod: Pod) -> tuple[tuple[str, str, str], OwnerLink]:
    """((namespace, kind, name), link) of a described pod's workload: its chain's top, else the pod itself."""
    top = pod.top_owner or OwnerLink("Pod", pod.name)
    return (pod.namespace, top.kind, top.name), top


def owners_of(pods: list[Pod]) -> list[Owner]:
    """The top owner of each pod (the workload: PyTorchJob, Deployment ...), deduplicated."""
    seen: dict[tuple[str, str, str], Owner] = {}
    for pod in pods:
        key, _ = top_owner(pod)
        entry = seen.get(key) or Owner(kind=key[1], name=key[2], namespace=key[0])
        seen[key] = replace(entry, pods=entry.pods + 1, gpus=entry.gpus + (pod.gpus or 0),
                            team=entry.team or pod.team, channel=entry.channel or pod.channel)
    return list(seen.values())


__all__ = ["KubeOwners", "controller_ref", "owners_of", "split_api_version", "top_owner"]
