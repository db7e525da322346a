"""The engine's memory (incidents and their indexes): its own module so the correlator and the storm
logic both use it without importing each other."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable

from alertd.core.json_types import JSONObject
from alertd.core.model import Incident, Signal


@dataclass(slots=True)
class EngineState:
    """Everything the engine remembers; the store persists it, the engine never does I/O.

    Besides the incidents it keeps indexes (by key, fingerprint, node, recent
    signal) so each alert costs the same however many incidents are open.
    """

    incidents: dict[str, Incident] = field(default_factory=dict)  # open (not yet resolved) incidents
    by_key: dict[str, str] = field(default_factory=dict)
    by_fingerprint: dict[str, str] = field(default_factory=dict)
    last_by_key: dict[str, str] = field(default_factory=dict)  # key -> most recent resolved incident
    # Incidents resolved lately, which a re-fire of their key within the reopen window reopens; and the
    # fingerprints of their alerts, so a late copy of an alert they resolved is known as theirs:
    closed: dict[str, Incident] = field(default_factory=dict)  # key -> its latest resolved incident
    closed_fps: dict[str, Incident] = field(default_factory=dict)  # fingerprint -> the resolved incident that had it
    next_seq: int = 1
    heartbeat_at: datetime | None = None
    by_node: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (cluster, node) -> open incident ids
    # Storm indexes (engine/storm/), rebuilt from the open incidents when storm_indexed is False:
    fleets: dict[str, str] = field(default_factory=dict)  # event key -> open fleet incident standing for it
    recent: dict[str, list[tuple[datetime, str]]] = field(default_factory=dict)  # event key -> unfolded node incidents
    storm_key_of: dict[str, str] = field(default_factory=dict)  # unfolded node incident -> its event key
    open_children: dict[str, int] = field(default_factory=dict)  # fleet id -> child incidents still open
    waiting: dict[str, list[str]] = field(default_factory=dict)  # event key -> node-less followers awaiting a fleet
    storm_indexed: bool = False
    summarised: dict[str, None] = field(default_factory=dict)  # open incidents held summarised (engine/memory.py)
    signal_pool: dict[Signal, Signal] = field(default_factory=dict)  # one of each signal summarised members share
    counted_pool: dict[tuple[str, ...], JSONObject] = field(default_factory=dict)  # the same for storm_counted
    # open incidents with a response member, whose repair the tick judges (a dict: in the order they responded)
    responding: dict[str, None] = field(default_factory=dict)
    # fleet id -> each of its nodes -> the child incidents on it: beside its lists, as fleets hold thousands
    fleet_node_sets: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def fleet_nodes(self, fleet: Incident) -> dict[str, list[str]]:
        """The fleet's nodes, each with its child incidents (built from its lists on first use, so a lookup
        by node costs the same however many nodes the fleet holds)."""
        nodes = self.fleet_node_sets.get(fleet.id)
        if nodes is None:
            nodes = self.fleet_node_sets[fleet.id] = {n: [] for n in fleet.nodes}
            for child_id in fleet.children:
                child = self.incidents.get(child_id)
                if child is not None and child.node in nodes:
                    nodes[child.node].append(child_id)
        return nodes

    def add_fleet_node(self, fleet: Incident, node: str, child_id: str = "") -> bool:
        """List ``node`` on the fleet (with ``child_id``, its incident that folded in); False when it was
        listed already."""
        nodes = self.fleet_nodes(fleet)
        children = nodes.get(node)
        listed = children is not None
        if children is None:
            children = nodes[node] = []
            fleet.nodes.append(node)
        if child_id and child_id not in children:
            children.append(child_id)
        return not listed

    def drop_fleet_node(self, fleet: Incident, node: str) -> None:
        fleet.nodes = [n for n in fleet.nodes if n != node]
        self.fleet_node_sets.pop(fleet.id, None)  # rebuilt from the lists on next use

    def fleet_children_on(self, fleet_id: str, node: str) -> list[Incident]:
        """The open child incidents of a fleet on one node."""
        fleet = self.incidents.get(fleet_id)
        if fleet is None or not fleet.fleet:
            return []
        ids = self.fleet_nodes(fleet).get(node, ())
        return [c for c in (self.incidents.get(i) for i in ids) if c is not None and c.parent_id == fleet_id]

    def add(self, incident: Incident) -> None:
        self.incidents[incident.id] = incident
        self.by_key[incident.key] = incident.id
        for fp, m in incident.members.items():
            self.by_fingerprint[fp] = incident.id
            if m.response:
                self.responding[incident.id] = None
        self.index_node(incident)

    def index_node(self, incident: Incident) -> None:
        if incident.node and not incident.fleet:
            self.by_node.setdefault((incident.cluster, incident.node), set()).add(incident.id)

    def remove(self, incident: Incident) -> None:
        self.incidents.pop(incident.id, None)
        self.fleet_node_sets.pop(incident.id, None)
        self.responding.pop(incident.id, None)
        self.summarised.pop(incident.id, None)
        if self.by_key.get(incident.key) == incident.id:
            del self.by_key[incident.key]
        for fp in incident.members:
            if self.by_fingerprint.get(fp) == incident.id:
                del self.by_fingerprint[fp]
        ids = self.by_node.get((incident.cluster, incident.node))
        if ids is not None:
            ids.discard(incident.id)
            if not ids:
                del self.by_node[(incident.cluster, incident.node)]
        self.last_by_key[incident.key] = incident.id
        if incident.resolved_at is not None:
            self.closed[incident.key] = incident
            for fp in incident.members:
                self.closed_fps[fp] = incident

    def reopened(self, incident: Incident) -> None:
        """``incident`` leaves the recently closed ones (it is open again, or too old to reopen)."""
        if self.closed.get(incident.key) is incident:
            del self.closed[incident.key]
        for fp in incident.members:
            if self.closed_fps.get(fp) is incident:
                del self.closed_fps[fp]

    def recently_closed(self, fingerprint: str) -> Incident | None:
        return self.closed_fps.get(fingerprint)

    def resolved_lately(self) -> list[Incident]:
        """Every resolved incident still remembered (for reopening, or as the owner of a late resolve)."""
        return list({id(i): i for i in [*self.closed.values(), *self.closed_fps.values()]}.values())

    @classmethod
    def from_incidents(cls, open_incidents: Iterable[Incident], last_by_key: dict[str, str], next_seq: int,
                       heartbeat_at: datetime | None, closed: Iterable[Incident] = ()) -> "EngineState":
        """``closed``: incidents resolved lately (the store's choice of how far back; the engine keeps those
        inside its reopen window)."""
        state = cls(last_by_key=dict(last_by_key), next_seq=next_seq, heartbeat_at=heartbeat_at)
        for inc in sorted(open_incidents, key=lambda i: i.opened_at):
            state.add(inc)
        for inc in sorted(closed, key=lambda i: i.resolved_at or i.opened_at):
            if inc.resolved_at is None:
                continue
            if state.last_by_key.get(inc.key) == inc.id:
                state.closed[inc.key] = inc
            for fp in inc.members:
                state.closed_fps[fp] = inc
        return state


__all__ = ["EngineState"]
