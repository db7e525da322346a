"""Failure domains above the node (an NVLink clique, a rack, a zone: ``correlation.domains``), read from the
node labels the alerts carry, and what a storm's nodes share of them.

Each node incident folding into a fleet adds its domains to the fleet's ``storm_domains`` annotation: per
domain kind, the one value every node so far shares, or "" once two differ (or a node names none). The fleet's
title is then placed in the narrowest domain all its nodes share: "thermal on 16 nodes of rack r12 in
train-b".

A domain of a kind whose size is known where ``share`` of the nodes (at least ``min_nodes``) have a fault
incident opened within ``window`` is bad as a whole: its ``failure_domain`` annotation names it and its nodes,
and remediation proposes to drain them all (a policy on signal ``domain``). When one fleet already holds all
of its bad nodes and names the domain, that fleet is the domain's one incident; otherwise the domain gets an
incident of its own (group ``domain``) that speaks for its nodes' incidents, as a fleet does.

Where the service reads the Kubernetes API it hands the engine a snapshot of the nodes' labels
(:class:`Topology`): an alert whose labels name none of a domain kind's labels gets its node's (at intake,
:func:`with_topology`), so a node alert of the shipped gpu-alerts.yml names its rack, and a domain's size is
the number of nodes carrying its value there (else its configured ``size``).
"""
from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from typing import Iterable, Mapping, Protocol

from alertd.core.json_types import JSONObject, JSONValue, as_text
from alertd.core.model import DOMAIN, DOMAIN_OF, Event, Incident, Member, Signal, signal_rank
from alertd.core.vocabulary import KIND_SHORT, NOT_FAULTS, EventKind, Group
from alertd.engine.state import EngineState
from alertd.rules.jobs import DomainRule
from alertd.rules.ruleset import CorrelationRules

GROUP = Group.DOMAIN.value  # the correlation group (and primary signal kind) of domain incidents
SHARED = "storm_domains"  # fleet annotation: [[domain kind, the value all its nodes share, or ""], ...] narrowest first


def domains_of(members: Iterable[Member], rule: DomainRule) -> dict[str, str]:
    """The node's domain of each kind, from the first label a member carries (kube_node_labels joined)."""
    found: dict[str, str] = {}
    for m in members:
        for domain in rule.domains:
            if domain.name not in found:
                value = next((m.labels[label] for label in domain.labels if m.labels.get(label)), "")
                if value:
                    found[domain.name] = value
        if len(found) == len(rule.domains):
            break
    return found


class Topology(Protocol):
    """The nodes' labels as the Kubernetes API listed them (alertd/enrich/node_index.py keeps the snapshot,
    refreshed at the service's edge): data handed in, no I/O."""

    def keep_labels(self, keys: Iterable[str]) -> None:
        """The node labels worth keeping: those the domain kinds name."""

    def node_labels(self, cluster: str, node: str) -> Mapping[str, str]:
        """The kept labels of one node; empty when not known."""

    def nodes_with(self, cluster: str, label: str, value: str) -> int:
        """How many nodes carry ``label=value``; 0 when not known."""


def with_topology(labels: Mapping[str, str], cluster: str, node: str, rule: DomainRule,
                  topology: Topology) -> dict[str, str] | None:
    """An alert's labels with its node's API labels added for each domain kind its labels do not name; None when
    nothing is added."""
    if not node:
        return None
    known = topology.node_labels(cluster, node)
    added: dict[str, str] = {}
    for domain in rule.domains if known else ():
        if any(labels.get(label) for label in domain.labels):
            continue
        key = next((label for label in domain.labels if known.get(label)), "")
        if key:
            added[key] = known[key]
    return {**labels, **added} if added else None


def topology_keys(rule: DomainRule) -> list[str]:
    """The node labels a topology snapshot keeps for these domain kinds: every label they name (Prometheus
    label names never carry the "/" or "." of a Kubernetes label key, so only those ever match)."""
    return sorted({label for domain in rule.domains for label in domain.labels})


def shared_domain(fleet: Incident) -> str:
    """The narrowest domain every node of the fleet shares ("rack r12"), or ""."""
    return next((f"{kind} {value}" for kind, value in domain_pairs(fleet.annotations.get(SHARED)) if value), "")


def domain_pairs(value: JSONValue | None) -> list[tuple[str, str]]:
    """The ``storm_domains`` annotation as (kind, value) pairs, narrowest first."""
    pairs = value if isinstance(value, list) else []
    return [(as_text(p[0]), as_text(p[1])) for p in pairs if isinstance(p, list) and len(p) == 2]


def note_domains(fleet: Incident, child: Incident, rule: DomainRule) -> None:
    """Keep what the fleet's nodes share as ``child`` folds in."""
    if not child.node or not rule.domains:
        return
    mine = domains_of(child.members.values(), rule)
    shared = dict(domain_pairs(fleet.annotations.get(SHARED)))
    first = SHARED not in fleet.annotations
    out: list[JSONValue] = []
    for domain in rule.domains:
        value = mine.get(domain.name, "")
        out.append([domain.name, value if first or shared.get(domain.name) == value else ""])
    fleet.annotations[SHARED] = out


class DomainHost(Protocol):
    """What the domain logic needs of the correlator (declared here, implemented by engine/correlate.py)."""

    state: EngineState
    rules: CorrelationRules
    topology: Topology | None

    def open_incident(self, key: str, group: str, signal: Signal, now: datetime) -> Incident: ...

    def record(self, inc: Incident, event: Event, *, member: str = "", urgent: bool = False) -> None: ...

    def close(self, inc: Incident, now: datetime, text: str, actor: str = "") -> None: ...


class Domains:
    """Domains where ``share`` of the nodes are bad (see the module doc): one incident each, or the fleet that
    already holds all of its bad nodes and names it."""

    def __init__(self, host: DomainHost):
        self.c = host
        self._in: dict[tuple[str, str, str], set[str]] = {}  # (cluster, kind, value) -> its bad node incidents
        self._indexed: EngineState | None = None

    def _index(self) -> dict[tuple[str, str, str], set[str]]:
        """Derived from the open incidents, rebuilt for a new engine state."""
        if self._indexed is not self.c.state:
            self._indexed, self._in = self.c.state, {}
            for inc in self.c.state.incidents.values():
                self._place(inc)
        return self._in

    def _place(self, inc: Incident) -> set[tuple[str, str, str]]:
        """File a node incident under its sized domains (or take it off them); returns those domains."""
        rule = self.rule
        keys = {(inc.cluster, kind, value) for kind, value in domains_of(inc.members.values(), rule).items()
                if self.size(inc.cluster, kind, value)}
        for key in keys:
            ids = self._in.setdefault(key, set())
            if _bad(inc) and inc.is_open:
                ids.add(inc.id)
            else:
                ids.discard(inc.id)
        return keys

    @property
    def rule(self) -> DomainRule:
        return self.c.rules.domains

    def size(self, cluster: str, kind: str, value: str) -> int:
        """Nodes in the domain: those carrying its value in the API's snapshot, else the kind's ``size``."""
        topology, rule = self.c.topology, self.rule
        labels = next((d.labels for d in rule.domains if d.name == kind), ())
        counted = max((topology.nodes_with(cluster, label, value) for label in labels), default=0) if topology else 0
        return counted or rule.size(kind)

    def settle(self, touched: Iterable[Incident], now: datetime) -> None:
        if not self.rule.sizes and self.c.topology is None:
            return
        self._index()
        seen: set[tuple[str, str, str]] = set()
        for inc in touched:
            if inc.node and not inc.fleet:
                seen |= self._place(inc)
        for cluster, kind, value in sorted(seen):
            self._judge(cluster, kind, value, now)

    def _judge(self, cluster: str, kind: str, value: str, now: datetime) -> None:
        """Open (or update) the domain's incident once enough of its nodes are bad within the window."""
        rule, state = self.rule, self.c.state
        bad = self._bad_nodes(cluster, kind, value, now)
        size = self.size(cluster, kind, value)
        key = f"{GROUP}|cluster={cluster}|{kind}={value}"
        open_id = state.by_key.get(key)
        if len(bad) < max(rule.min_nodes, math.ceil(rule.share * size)):
            return
        fleets = {inc.parent_id for inc in bad.values()}
        fleet = state.incidents.get(next(iter(fleets))) if len(fleets) == 1 and "" not in fleets else None
        where = f"{kind} {value}"
        fact: JSONObject = {"kind": kind, "value": value, "size": size, "nodes": list[JSONValue](sorted(bad))}
        if open_id is None and fleet is not None and shared_domain(fleet) == where:
            if fleet.annotations.get(DOMAIN) != fact:  # the storm is the domain's one incident
                fleet.annotations[DOMAIN] = fact
                self.c.record(fleet, fleet.add_event(now, EventKind.DOMAIN_BAD, _said(where, len(bad), size)))
            return
        inc = state.incidents.get(open_id or "")
        if inc is None:
            lead = max((i.primary for i in bad.values() if i.primary is not None), key=signal_rank)
            sig = Signal(kind=GROUP, severity=lead.severity, category=lead.category,
                         title=f"{where} in {cluster}", runbook=lead.runbook,
                         meaning=f"{_said(where, len(bad), size)}: the domain's shared part (switch tray, "
                                 "cooling, power shelf, NVLink fabric) rather than each node")
            inc = self.c.open_incident(key, GROUP, sig, now)
            inc.primary, inc.cluster = sig, cluster
            self.c.record(inc, inc.add_event(now, EventKind.OPENED, sig.meaning))
        elif inc.annotations.get(DOMAIN) == fact:
            return
        inc.annotations[DOMAIN] = fact
        inc.nodes = sorted(bad)
        inc.signals = sorted({k for i in bad.values() for k in i.signals} | {GROUP})
        inc.title = f"{where} in {cluster}: {len(bad)} of {size} nodes bad ({_kinds(bad.values())})"
        for node_inc in bad.values():
            fleet = state.incidents.get(node_inc.parent_id) if node_inc.parent_id else None
            # a storm within the domain is part of it; one reaching beyond it stays a story of its own
            one = fleet if fleet is not None and shared_domain(fleet) == where else node_inc
            if one.id not in inc.children and (one is fleet or not one.spoken_for) and DOMAIN_OF not in one.annotations:
                one.annotations[DOMAIN_OF] = inc.id
                inc.children.append(one.id)
                self.c.record(one, one.add_event(now, EventKind.DOMAIN_MEMBER, f"part of {where} ({inc.id})"))
        self.c.record(inc, inc.add_event(now, EventKind.DOMAIN_BAD, _said(where, len(bad), size)))

    def _bad_nodes(self, cluster: str, kind: str, value: str, now: datetime) -> dict[str, Incident]:
        """The domain's nodes with an open fault incident opened within the window, node -> incident."""
        out: dict[str, Incident] = {}
        incidents = self.c.state.incidents
        for inc_id in sorted(self._in.get((cluster, kind, value), ())):
            inc = incidents.get(inc_id)
            if inc is not None and _bad(inc) and now - inc.opened_at <= self.rule.window:
                out.setdefault(inc.node, inc)
        return out

    def closed(self, inc: Incident, now: datetime) -> None:
        """A domain incident resolves once none of its nodes' incidents is open."""
        parent = self.c.state.incidents.get(as_text(inc.annotations.get(DOMAIN_OF)))
        if parent is not None and not any(c in self.c.state.incidents for c in parent.children):
            self.c.close(parent, now, f"all {len(parent.children)} node incidents of the domain resolved")


def _bad(inc: Incident) -> bool:
    """A node's fault (not the repair, not a job's symptom, not an unclassified alert)."""
    return bool(inc.node) and not inc.fleet and inc.primary is not None and inc.primary.kind not in NOT_FAULTS


def _kinds(incidents: Iterable[Incident]) -> str:
    """What the bad nodes show, most nodes first: "NVLink 3, Xid 74 2, NotReady 2"."""
    counts = Counter(f"Xid {i.primary.xid}" if i.primary.xid else KIND_SHORT.get(i.primary.kind, i.primary.kind)
                     for i in incidents if i.primary is not None)
    return ", ".join(f"{what} {n}" for what, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _said(where: str, bad: int, size: int) -> str:
    return f"{bad} of the {size} nodes of {where} are bad"


__all__ = ["GROUP", "SHARED", "Domains", "Topology", "domain_pairs", "domains_of", "note_domains", "shared_domain", "topology_keys",
           "with_topology"]
