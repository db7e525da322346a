"""Failure domains above the node (an NVLink clique, a rack, a zone: ``correlation.domains``), read from the
node labels the alerts carry, and what a storm's nodes share of them.

Each node incident folding into a fleet adds its domains to the fleet's ``storm_domains`` annotation: per
domain kind, the one value every node so far shares, or "" once two differ (or a node names none). The fleet's
title is then placed in the narrowest domain all its nodes share: "thermal on 16 nodes of rack r12 in
train-b".
"""
from __future__ import annotations

from typing import Iterable

from alertd.core.json_types import JSONValue, as_text
from alertd.core.model import Incident, Member
from alertd.rules.jobs import DomainRule

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


def note_domains(fleet: Incident, child: Incident, rule: DomainRule) -> None:
    """Keep what the fleet's nodes share as ``child`` folds in."""
    if not child.node or not rule.domains:
        return
    mine = domains_of(child.members.values(), rule)
    shared = dict(_pairs(fleet.annotations.get(SHARED)))
    first = SHARED not in fleet.annotations
    out: list[JSONValue] = []
    for domain in rule.domains:
        value = mine.get(domain.name, "")
        out.append([domain.name, value if first or shared.get(domain.name) == value else ""])
    fleet.annotations[SHARED] = out


def shared_domain(fleet: Incident) -> str:
    """The narrowest domain every node of the fleet shares ("rack r12"), or ""."""
    return next((f"{kind} {value}" for kind, value in _pairs(fleet.annotations.get(SHARED)) if value), "")


def _pairs(value: JSONValue | None) -> list[tuple[str, str]]:
    pairs = value if isinstance(value, list) else []
    return [(as_text(p[0]), as_text(p[1])) for p in pairs if isinstance(p, list) and len(p) == 2]


__all__ = ["SHARED", "domains_of", "note_domains", "shared_domain"]
