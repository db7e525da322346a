"""A node value is taken only when it is plausibly a node: the labels real Docker, Compose and Kubernetes
scrapes put where alertd reads the node (a container ID in Hostname, a Compose service in instance, an
operator pod's IP) are refused, the refusal kept with why, and the alerts of one target still meet."""
from __future__ import annotations

from dataclasses import dataclass, field

from alertd.authoring.explain import node_advice
from alertd.core.model import Subject
from alertd.engine.normalize import NormalizeConfig, subject_of
from alertd.engine.plausible import is_container_id, refusal
from testkit.builders import alert

CFG = NormalizeConfig()
# dcgm-exporter 4.x in Docker Compose, no NODE_NAME: Hostname is the container's hostname (its ID).
DOCKER_XID = {"Hostname": "5f3c9a1e7b2d", "instance": "dcgm-exporter:9400", "job": "dcgm", "gpu": "0",
              "UUID": "GPU-8c1e4b9a-2f3d-4e6a-9b7c-1d2e3f4a5b6c", "DCGM_FI_DRIVER_VERSION": "550.54.15"}
DOCKER_UP = {"instance": "dcgm-exporter:9400", "job": "dcgm"}
# The GPU Operator's own metrics, scraped from the operator pod (a Deployment): instance is its pod IP.
OPERATOR = {"instance": "10.244.1.9:8080", "job": "gpu-operator", "namespace": "gpu-operator",
            "pod": "gpu-operator-7c9d8f6b5-x2x4q", "service": "gpu-operator"}


@dataclass
class Nodes:
    names: set[str] = field(default_factory=set)
    generation: int = 0

    def node_of_pod(self, cluster: str, namespace: str, pod: str) -> str:
        return ""

    def node_of_address(self, cluster: str, address: str) -> str:
        return ""

    def is_node(self, cluster: str, name: str) -> bool | None:
        return name in self.names if self.names else None


def test_container_ids_short_and_long_are_never_nodes() -> None:
    assert is_container_id("5f3c9a1e7b2d") and is_container_id("a" * 64)
    assert not is_container_id("gpu-node-7") and not is_container_id("5f3c9a1e7b2")
    assert "container ID" in refusal("node", "5f3c9a1e7b2d", {}, "prod", CFG.not_node_pattern)


def test_docker_xid_and_its_targets_up_alert_share_one_origin_with_the_refusals_kept() -> None:
    xid, up = subject_of(DOCKER_XID, CFG), subject_of(DOCKER_UP, CFG)
    assert xid.node == "" and up.node == ""
    assert xid.origin == up.origin == "target dcgm-exporter:9400"  # the same target: one incident
    refused = xid.node_refused.split("\n")
    assert refused[0].startswith("Hostname=5f3c9a1e7b2d: a container ID")
    assert refused[1].startswith("instance=dcgm-exporter:9400: an exporter's service")
    assert Subject.from_dict(xid.to_dict()).node_refused == xid.node_refused  # kept with the incident


def test_docker_host_published_port_names_the_host_by_its_address_like_its_node_exporter() -> None:
    xid = subject_of({**DOCKER_XID, "instance": "10.0.0.5:9400"}, CFG)
    node_exporter = subject_of({"instance": "10.0.0.5:9100", "job": "node"}, CFG)
    assert xid.node == node_exporter.node == "10.0.0.5"
    assert "Hostname=5f3c9a1e7b2d" in xid.node_refused


def test_a_site_map_names_the_docker_host() -> None:
    cfg = NormalizeConfig(node_map={"5f3c9a1e7b2d": "gpu-host-3"})
    s = subject_of(DOCKER_XID, cfg)
    assert (s.node, s.node_source) == ("gpu-host-3", "map Hostname=5f3c9a1e7b2d")


def test_an_operator_pods_ip_is_refused_and_the_target_is_the_origin() -> None:
    s = subject_of(OPERATOR, CFG)
    assert s.node == "" and s.origin == "target 10.244.1.9:8080"
    assert "scrape target's pod gpu-operator-7c9d8f6b5-x2x4q" in s.node_refused


def test_a_name_equal_to_the_job_is_a_service_not_a_host() -> None:
    s = subject_of({"instance": "gpu-metrics:9835", "job": "gpu-metrics"}, CFG)
    assert s.node == "" and "the scrape's job" in s.node_refused


def test_the_kubernetes_node_list_decides_weak_names_and_leaves_a_node_label_alone() -> None:
    nodes = Nodes({"gpu-node-7", "10.0.3.17"})
    assert subject_of({"Hostname": "gpu-node-7"}, CFG, lookup=nodes).node == "gpu-node-7"
    s = subject_of({"Hostname": "dcgm-7f9c", "instance": "10.0.3.17:9400"}, CFG, lookup=nodes)
    assert s.node == "10.0.3.17" and "no node of cluster default has this name" in s.node_refused
    assert subject_of({"node": "gpu-node-99"}, CFG, lookup=nodes).node == "gpu-node-99"


def test_bare_metal_hosts_keep_their_names() -> None:
    assert subject_of({"Hostname": "gpu-node-7", "instance": "gpu-node-7:9400"}, CFG).node == "gpu-node-7"
    assert subject_of({"instance": "gpu-host-3:9835", "job": "nvidia_gpu_exporter"}, CFG).node == "gpu-host-3"


def test_explain_shows_each_refusal_and_how_to_name_the_host() -> None:
    a = alert("XidOnHost", **DOCKER_XID)
    a.subject = subject_of(a.labels, CFG)
    advice = node_advice(a, CFG)
    assert advice[0].startswith("refused Hostname=5f3c9a1e7b2d: a container ID")
    assert "normalize.node_map" in advice[-1] and "Docker hosts" in advice[-1]
