"""Failure domains from the Kubernetes API's node labels (engine/domains.py's Topology): node alerts that name
no rack still let a storm name its rack, and a domain's size is the number of nodes carrying its value."""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from alertd.core.model import DOMAIN
from alertd.engine.pipeline import Engine
from testkit.builders import alert, at, shipped_rules, xid

RACK, ZONE = "topology.kubernetes.io/rack", "topology.kubernetes.io/zone"


class Snapshot:
    """The nodes' labels as a list of nodes showed them (alertd/enrich/node_index.py keeps the real one)."""

    def __init__(self, nodes: dict[str, dict[str, str]], cluster: str = "prod"):
        self.nodes, self.cluster = nodes, cluster
        self.kept: frozenset[str] = frozenset()

    def keep_labels(self, keys: Iterable[str]) -> None:
        self.kept = frozenset(keys)

    def node_labels(self, cluster: str, node: str) -> Mapping[str, str]:
        labels = self.nodes.get(node, {}) if cluster == self.cluster else {}
        return {k: v for k, v in labels.items() if k in self.kept}

    def nodes_with(self, cluster: str, label: str, value: str) -> int:
        counts = Counter((k, v) for labels in self.nodes.values() for k, v in labels.items() if k in self.kept)
        return counts[(label, value)] if cluster == self.cluster else 0


def rack(name: str, n: int) -> dict[str, dict[str, str]]:
    return {f"{name}-{i:02}": {RACK: name, ZONE: "eu-west-1a", "kubernetes.io/os": "linux"} for i in range(1, n + 1)}


def test_the_snapshot_keeps_the_labels_the_domain_kinds_name():
    snap = Snapshot(rack("r12", 2))
    Engine(shipped_rules(), topology=snap)
    assert {RACK, ZONE, "nvidia.com/gpu.clique"} <= snap.kept and "kubernetes.io/os" not in snap.kept


def test_node_alerts_naming_no_rack_get_their_nodes_and_a_storm_names_the_rack():
    eng = Engine(shipped_rules(), topology=Snapshot({**rack("r12", 8), **rack("r13", 8)}))
    # gpu-alerts.yml's node alerts carry node and gpu, no rack
    changes = eng.ingest([xid(79, node=f"r12-{i:02}", gpu="1", starts=i) for i in range(1, 6)], at(10))
    lone = next(c.incident for c in changes if c.incident.node == "r12-01")
    assert next(iter(lone.members.values())).labels[RACK] == "r12"
    fleet = next(c.incident for c in changes if c.incident.fleet)
    assert fleet.title == "Xid 79: GPU has fallen off the bus on 5 nodes of rack r12 in prod"


def test_an_alert_naming_its_rack_keeps_it():
    eng = Engine(shipped_rules(), topology=Snapshot(rack("r12", 4)))
    inc = eng.ingest([xid(79, node="r12-01", label_rack="r99")], at(0))[0].incident
    labels = next(iter(inc.members.values())).labels
    assert labels["label_rack"] == "r99" and RACK not in labels and labels[ZONE] == "eu-west-1a"


def test_a_rack_is_sized_by_the_nodes_carrying_it_and_is_bad_once_half_of_them_are():
    eng = Engine(shipped_rules(), topology=Snapshot({**rack("r12", 6), **rack("r13", 30)}))
    eng.ingest([alert("DCGMExporterDown", node="r12-01", starts=0), xid(79, node="r12-02", starts=0)], at(0))
    assert not [i for i in eng.state.incidents.values() if DOMAIN in i.annotations or i.group == "domain"]
    changes = eng.ingest([xid(48, node="r12-03", starts=60)], at(60))  # 3 of the rack's 6
    domain = [c.incident for c in changes if c.incident.group == "domain"]
    assert [d.title for d in domain] == ["rack r12 in prod: 3 of 6 nodes bad (Xid 48 1, Xid 79 1, exporter down 1)"]
    assert domain[0].annotations[DOMAIN]["size"] == 6


def test_without_the_api_a_rack_has_no_size_and_names_storms_only():
    eng = Engine(shipped_rules())
    eng.ingest([xid(79, node=f"r12-{i:02}", label_rack="r12", starts=0) for i in range(1, 4)], at(0))
    assert not [i for i in eng.state.incidents.values() if i.group == "domain"]
