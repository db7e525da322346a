"""Failure domains from node labels read from a REAL kube-apiserver (the node index's list of nodes, as
alertd's own account under the shipped RBAC): Xid alerts as gpu-alerts.yml sends them, naming no rack, open
the incident of the rack half of whose nodes went bad, sized by the nodes the API labels with it."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from alertd.core.model import DOMAIN
from alertd.engine.pipeline import Engine
from alertd.engine.normalize import NormalizeConfig
from alertd.enrich.node_index import NodeIndex, NodeIndexSettings
from alertd.enrich.settings import KubeSettings
from testkit.kube_apiserver import KubeAPIServer, bind_shipped_enrichment_role
from testkit.builders import shipped_rules, xid

pytestmark = pytest.mark.services
RACK, ZONE = "topology.kubernetes.io/rack", "topology.kubernetes.io/zone"
RACKS = {"tr-a": 6, "tr-b": 10}
NOW = datetime(2026, 12, 7, 12, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def cluster(kube_apiserver: KubeAPIServer) -> KubeAPIServer:
    k = kube_apiserver
    bind_shipped_enrichment_role(k)
    for rack, n in RACKS.items():
        for i in range(1, n + 1):
            k.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": f"{rack}-{i:02}", "labels": {RACK: rack, ZONE: "eu-west-1b", "nvidia.com/gpu.count": "8"}}})
    return k


async def test_node_alerts_naming_no_rack_open_the_incident_of_the_rack_the_api_sizes(cluster, tmp_path: Path):
    index = NodeIndex(KubeSettings(kubeconfig=str(cluster.kubeconfig(tmp_path / "kubeconfig", "alertd"))),
                      NodeIndexSettings(), NormalizeConfig())
    try:
        engine = Engine(shipped_rules(), nodes=index, topology=index)
        alerts = [xid(79, node=f"tr-a-{i:02}", gpu="2", cluster="prod") for i in (1, 2)]
        await index.prepare(alerts)  # the first list of nodes is waited for
        assert index.node_labels("prod", "tr-a-01") == {RACK: "tr-a", ZONE: "eu-west-1b"}
        assert (index.nodes_with("prod", RACK, "tr-a"), index.nodes_with("prod", ZONE, "eu-west-1b")) == (6, 16)
        changes = engine.ingest(alerts, NOW)
        assert [next(iter(c.incident.members.values())).labels.get(RACK) for c in changes] == ["tr-a", "tr-a"]
        assert not [c for c in changes if c.incident.group == "domain"]  # 2 of 6: not yet half
        third = [xid(79, node="tr-a-05", gpu="0", cluster="prod")]
        await index.prepare(third)
        domain = [c.incident for c in engine.ingest(third, NOW) if c.incident.group == "domain"]
        assert [d.title for d in domain] == ["rack tr-a in prod: 3 of 6 nodes bad (Xid 79 3)"]
        assert domain[0].annotations[DOMAIN]["nodes"] == ["tr-a-01", "tr-a-02", "tr-a-05"]
    finally:
        await index.close()
