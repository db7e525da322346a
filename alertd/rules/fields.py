"""What routing sees of an incident: the fields route matchers match on, and its members in order."""
from __future__ import annotations

from itertools import islice

from alertd.core.model import FIRING, Incident, Member


# Fleet annotation: the labels its nodes' leading alerts all carry alike (Alertmanager's commonLabels of the
# storm; engine/storm/summary.py keeps it). A fleet has no alerts of its own: routes match it on these.
STORM_LABELS = "storm_labels"

# Routing runs on every change. A fleet incident can hold thousands of members, all alike:
# the first ones that joined stand for the rest, so routing stays cheap per change.
ROUTING_MEMBERS = 16


def members_in_order(inc: Incident) -> list[Member]:
    """Leading before folded, firing before resolved, oldest first (of the first ROUTING_MEMBERS to join)."""
    members = islice(inc.members.values(), ROUTING_MEMBERS)
    return sorted(members, key=lambda m: (m.folded, m.status != FIRING, m.starts_at, m.fingerprint))


def member_fields(m: Member) -> dict[str, str]:
    """What cordon rules (expected signals, pending times) match one alert of an incident on."""
    sig = m.signal
    return {**m.labels, "signal": sig.kind, "detail": sig.detail, "category": sig.category,
            "severity": sig.severity, "xid": str(sig.xid or ""), "alertname": m.alertname}


def incident_fields(inc: Incident) -> dict[str, str]:
    """What route matchers see: member labels (leading, firing members first) plus incident fields."""
    out: dict[str, str] = {}
    for m in reversed(members_in_order(inc)):  # the first member's labels win: it updates last
        out.update(m.labels)
    shared = inc.annotations.get(STORM_LABELS) if inc.fleet else None
    if isinstance(shared, dict):
        out.update((k, v) for k, v in shared.items() if isinstance(v, str))
    primary = inc.primary
    gpus = [g.get("uuid") or g.get("pci_bus_id") or g.get("index", "") for g in inc.gpus]
    out.update(
        id=inc.id, severity=inc.severity, category=inc.category, status=inc.status, group=inc.group,
        cluster=inc.cluster, node=inc.node, namespace=inc.namespace, pod=inc.pod,
        signal=primary.kind if primary else "", signals=",".join(inc.signals),
        xid=str(primary.xid) if primary and primary.xid else (str(inc.xids[0]) if inc.xids else ""),
        xids=",".join(map(str, inc.xids)), action=primary.action if primary else "",
        gpu=gpus[0] if len(gpus) == 1 else ",".join(gpus), fleet="true" if inc.fleet else "false",
        title=inc.title,
    )
    return out
