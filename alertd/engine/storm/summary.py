"""What a fleet incident says of its nodes: how many show each signal, and the title that follows from it.

Counts are kept on the fleet (annotation ``storm_signals``) as its nodes show more, and each node incident
remembers what its fleet counted of it (``storm_counted``), so a resolved node stays counted and a node that
leaves the fleet (planned work found late) is taken off again.
"""
from __future__ import annotations

import dataclasses

from alertd.rules.fields import STORM_LABELS
from alertd.core.json_types import JSONValue, as_object, as_text, integer, strings
from alertd.core.model import STORM_SAYS, Incident, Signal
from alertd.core.vocabulary import KIND_SHORT, NEVER_CAUSE, Detail, SignalKind
from alertd.core.words import counted
from alertd.engine.domains import shared_domain

COUNTS = "storm_signals"  # fleet annotation: nodes per signal ("xid:79", "metrics_missing", ...)
COUNTED = "storm_counted"  # child annotation: {"fleet": id, "keys": [...]}, what the fleet counted of it
# What people do to the nodes (the response to the fault), counted as "cordoned 40, rebooting 12".
RESPONSES = {SignalKind.NODE_CORDONED: "cordoned", "rebooting": "rebooting", SignalKind.NODE_NOT_READY: "NotReady"}



def signal_keys(inc: Incident) -> set[str]:
    """What a node incident shows, as fleet counts name it: each Xid code apart, other signals by kind."""
    keys = {k for k in inc.signals if k not in NEVER_CAUSE and k != SignalKind.XID}
    keys.update(f"xid:{x}" for x in inc.xids)
    if SignalKind.XID in inc.signals and not inc.xids:
        keys.add(SignalKind.XID.value)
    if SignalKind.METRICS_MISSING in keys and any(m.response and m.signal.detail == Detail.NODE_DOWN
                                                  for m in inc.members.values()):
        keys.add("rebooting")  # the node went down after its cordon: the repair reboot
    return keys


def _count_key(sig: Signal) -> str:
    return f"xid:{sig.xid}" if sig.kind == SignalKind.XID and sig.xid else sig.kind


def _label(key: str) -> str:
    return f"Xid {key[4:]}" if key.startswith("xid:") else KIND_SHORT.get(key, key)


def count_signals(fleet: Incident, child: Incident) -> None:
    """Nodes per signal, kept on the fleet as its nodes show more (resolved nodes stay counted)."""
    if not child.node:
        return
    counted = as_object(child.annotations.get(COUNTED))
    had = set(strings(counted.get("keys"))) if counted.get("fleet") == fleet.id else set()
    new = signal_keys(child) - had
    if not new:
        return
    counts = _counts(fleet)
    for key in new:
        counts[key] = counts.get(key, 0) + 1
    fleet.annotations[COUNTS] = dict[str, JSONValue](counts)
    child.annotations[COUNTED] = {"fleet": fleet.id, "keys": list[JSONValue](sorted(had | new))}


def _counts(fleet: Incident) -> dict[str, int]:
    """Nodes per signal key, as the fleet's annotation keeps them."""
    counts = as_object(fleet.annotations.get(COUNTS))
    return {k: integer(counts, k) for k in counts}


def fleet_title(fleet: Incident) -> str:
    """What is true of the whole fleet: the fault that leads it with the nodes that show it, each other
    signal with its own node count, and what people did to them ("Xid 119: ... on 37 nodes in prod-a
    (exporter down on 12; 40 nodes in all; cordoned 40, rebooting 12)"), never one node's signal with every
    node's count. The repair never names the fleet: the fault stays its headline."""
    primary = fleet.primary
    assert primary is not None
    counts = _counts(fleet)
    total = len(fleet.nodes)
    main = _count_key(primary)
    shown = counts.get(main) or total
    domain = shared_domain(fleet)  # "rack r12": the narrowest failure domain all its nodes share
    where = (f"{domain} in " if domain else "") + (fleet.cluster or "the fleet")
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{_label(k)} on {n}" for k, n in ranked if k != main and k not in RESPONSES
             and not (k == SignalKind.METRICS_MISSING and counts.get("rebooting") == n)][:3]
    if shown != total:
        parts.append(f"{counted(total, 'node')} in all")
    done = [f"{RESPONSES[k]} {counts[k]}" for k in RESPONSES if counts.get(k) and k != main]
    if done:
        parts.append(", ".join(done))
    reading = as_text(as_object(fleet.annotations.get(STORM_SAYS)).get("title"))  # "86-95 °C, median 90 °C"
    if reading:
        parts.insert(0, reading)
    return f"{primary.title} on {counted(shown, 'node')} {'of' if domain else 'in'} {where}" + (f" ({'; '.join(parts)})" if parts else "")


UNCLASSIFIED = SignalKind.OTHER


def lead_alertname(inc: Incident, sig: Signal) -> str:
    """The name of the alert that shows ``sig`` in the incident ("" when only evidence shows it)."""
    return next((m.alertname for m in inc.members.values() if m.signal == sig), "")


def fleet_headline(child: Incident, sig: Signal) -> Signal:
    """What a node's leading signal says on its fleet. An unclassified alert's title is the node's own
    summary ("GPU telemetry lost on node-3") and its meaning the node's description: the fleet says its
    alert name instead, as Alertmanager's grouping by name does ("GpuTelemetryLost on 7 nodes in prod"),
    and that alertd could not tell what it is."""
    if sig.kind != UNCLASSIFIED:
        return sig
    name = lead_alertname(child, sig)
    meaning = (f"alertd cannot classify {name}: these nodes fired it within minutes of each other, grouped by "
               "its name as Alertmanager groups alerts. Each node's incident keeps the alert's own summary.")
    return dataclasses.replace(sig, title=name, meaning=meaning) if name else sig


def share_labels(fleet: Incident, child: Incident) -> None:
    """Keep on the fleet the labels its nodes' leading alerts all carry alike (``team``, ``alertname`` of an
    unclassified storm; never ``node``), as Alertmanager's commonLabels: routes match a fleet on them."""
    lead = next((m for m in child.members.values() if m.signal == child.primary), None)
    if lead is None:
        return
    had = fleet.annotations.get(STORM_LABELS)
    shared = lead.labels if not isinstance(had, dict) else {k: v for k, v in had.items() if lead.labels.get(k) == v}
    fleet.annotations[STORM_LABELS] = dict[str, JSONValue](shared)


def uncount_signals(fleet: Incident, child: Incident) -> None:
    """Take a node that leaves the fleet off its counts."""
    counted = as_object(child.annotations.pop(COUNTED, None))
    if counted.get("fleet") != fleet.id:
        return
    counts = _counts(fleet)
    for key in strings(counted.get("keys")):
        if counts.get(key, 0) > 1:
            counts[key] -= 1
        else:
            counts.pop(key, None)
    if COUNTS in fleet.annotations:
        fleet.annotations[COUNTS] = dict[str, JSONValue](counts)
