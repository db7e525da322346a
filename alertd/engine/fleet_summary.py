"""What a fleet incident says of its nodes: how many show each signal, and the title that follows from it.

Counts are kept on the fleet (annotation ``storm_signals``) as its nodes show more, and each node incident
remembers what its fleet counted of it (``storm_counted``), so a resolved node stays counted and a node that
leaves the fleet (planned work found late) is taken off again.
"""
from __future__ import annotations

from alertd.core.model import Incident, Signal

COUNTS = "storm_signals"  # fleet annotation: nodes per signal ("xid:79", "metrics_missing", ...)
COUNTED = "storm_counted"  # child annotation: {"fleet": id, "keys": [...]}, what the fleet counted of it
SHORT = {"metrics_missing": "exporter down", "node_not_ready": "NotReady", "node_cordoned": "cordoned",
         "thermal": "thermal", "ecc": "ECC", "row_remap": "row remap", "nvlink": "NVLink", "gpu_check": "health check", "xid": "Xid (code unknown)"}


def signal_keys(inc: Incident) -> set[str]:
    """What a node incident shows, as fleet counts name it: each Xid code apart, other signals by kind."""
    keys = {k for k in inc.signals if k not in ("xid", "other", "watchdog")}
    keys.update(f"xid:{x}" for x in inc.xids)
    if "xid" in inc.signals and not inc.xids:
        keys.add("xid")
    return keys


def _count_key(sig: Signal) -> str:
    return f"xid:{sig.xid}" if sig.kind == "xid" and sig.xid else sig.kind


def _label(key: str) -> str:
    return f"Xid {key[4:]}" if key.startswith("xid:") else SHORT.get(key, key)


def count_signals(fleet: Incident, child: Incident) -> None:
    """Nodes per signal, kept on the fleet as its nodes show more (resolved nodes stay counted)."""
    if not child.node:
        return
    counted = child.annotations.get(COUNTED)
    had = set(counted["keys"]) if isinstance(counted, dict) and counted.get("fleet") == fleet.id else set()
    new = signal_keys(child) - had
    if not new:
        return
    counts = fleet.annotations.setdefault(COUNTS, {})
    for key in new:
        counts[key] = counts.get(key, 0) + 1
    child.annotations[COUNTED] = {"fleet": fleet.id, "keys": sorted(had | new)}


def fleet_title(fleet: Incident) -> str:
    """What is true of the whole fleet: the fault that leads it with the nodes that show it, and each
    other signal with its own node count ("Xid 119: ... on 37 nodes in prod-a (exporter down on 12; 40
    nodes in all)"), never one node's signal with every node's count."""
    primary = fleet.primary
    assert primary is not None
    counts: dict[str, int] = fleet.annotations.get(COUNTS) or {}
    total = len(fleet.nodes)
    main = _count_key(primary)
    shown = counts.get(main) or total
    where = fleet.cluster or "the fleet"
    parts = [f"{_label(k)} on {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if k != main][:3]
    if shown != total:
        parts.append(f"{total} nodes in all")
    return f"{primary.title} on {shown} nodes in {where}" + (f" ({'; '.join(parts)})" if parts else "")


def uncount_signals(fleet: Incident, child: Incident) -> None:
    """Take a node that leaves the fleet off its counts."""
    counted = child.annotations.pop(COUNTED, None)
    if not isinstance(counted, dict) or counted.get("fleet") != fleet.id:
        return
    counts = fleet.annotations.get(COUNTS) or {}
    for key in counted.get("keys") or ():
        if counts.get(key, 0) > 1:
            counts[key] -= 1
        else:
            counts.pop(key, None)
