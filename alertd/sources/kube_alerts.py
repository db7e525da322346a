"""Node conditions and Events -> alerts in Alertmanager's wire form, as rules/sources.yml says.

Pure: objects in (JSON dicts as the API server sends them), alerts out. Each alert is what a
webhook would carry: labels (``source="kubernetes"``, the node, the condition or reason, who
produced it), a fingerprint from the labels, ``startsAt`` from the object's own times, so the same
condition or Event read twice (a relist, a second replica, a restart) makes the same delivery key
and the engine drops the copy. A condition's message (the kernel's NVRM line, for NPD) goes in the
``description`` annotation, where normalize reads an Xid code and PCI address as for log alerts.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from alertd.core.json_types import JSONObject
from alertd.core.kube_objects import Event, Node, NodeCondition
from alertd.core.model import iso, parse_iso
from alertd.receive.payload import fingerprint_of
from alertd.rules.kube_health import ConditionRule, EventRule, KubeHealthRules

SOURCE = "kubernetes"
Wire = JSONObject  # an alert as a webhook carries it (Alert.to_wire)


@dataclass(frozen=True, slots=True)
class Raised:
    """The alert a node condition raised, remembered so its resolution carries the same identity."""

    fingerprint: str
    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, str], ...]
    starts_at: str


def _labels(alertname: str, node: str, producer: str, cluster: str, severity: str, **more: str) -> dict[str, str]:
    labels = {"alertname": alertname, "source": SOURCE, "node": node, "producer": producer, **more}
    if cluster:
        labels["cluster"] = cluster
    if severity:
        labels["severity"] = severity
    return {k: v for k, v in labels.items() if v}


def wire(status: str, labels: dict[str, str], annotations: dict[str, str], starts_at: str, ends_at: str = "") -> Wire:
    out: Wire = {"status": status, "labels": dict(labels), "annotations": dict(annotations), "startsAt": starts_at,
                 "fingerprint": fingerprint_of(labels)}
    if ends_at:
        out["endsAt"] = ends_at
    return out


def condition_alert(rule: ConditionRule, node: str, cond: NodeCondition, cluster: str) -> Raised:
    """The firing alert for a condition in its bad status."""
    reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "")
    xid = ""
    if rule.xid_from_reason is not None and (m := rule.xid_from_reason.match(reason)) and m.groups():
        xid = m.group(1) or ""
    labels = _labels(rule.alertname, node, rule.producer, cluster, rule.severity, condition=str(cond.get("type")),
                     xid=xid)
    summary = f"Node condition {cond.get('type')}={cond.get('status')} ({reason}) on {node}"
    annotations = {"summary": summary, "description": message or summary, "reason": reason}
    since = str(cond.get("lastTransitionTime") or "")
    return Raised(fingerprint_of(labels), tuple(labels.items()), tuple(annotations.items()), since)


def raised_wire(r: Raised, status: str = "firing", ends_at: str = "") -> Wire:
    return wire(status, dict(r.labels), dict(r.annotations), r.starts_at, ends_at)


def node_ready(node: Node) -> bool | None:
    """The node's Ready condition: True, False, or None when it reports none (or Unknown)."""
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return {"True": True, "False": False}.get(str(cond.get("status")))
    return None


def node_conditions(node: Node, rules: KubeHealthRules, cluster: str) -> dict[str, Raised | None]:
    """Each condition type a rule watches on this node: the alert it raises now, or None when healthy."""
    name = str((node.get("metadata") or {}).get("name") or "")
    out: dict[str, Raised | None] = {}
    for cond in (node.get("status") or {}).get("conditions") or ():
        ctype = str(cond.get("type") or "")
        if not rules.watches(ctype):
            continue
        rule = rules.condition(ctype, str(cond.get("reason") or ""))
        bad = rule is not None and str(cond.get("status")) == rule.bad_status
        out[ctype] = condition_alert(rule, name, cond, cluster) if bad and rule is not None else None
    return out


def condition_changes(before: dict[str, Raised | None] | None, now: dict[str, Raised | None], ended: str) -> list[Wire]:
    """Alerts for what changed on one node: a new or changed bad condition fires, the alert it replaced
    resolves (at ``ended``). ``before`` None: the node was never seen (a first list), so every bad condition
    fires and nothing resolves (a healthy condition says nothing the engine needs)."""
    out: list[Wire] = []
    before = before or {}
    for ctype in before.keys() | now.keys():
        old, new = before.get(ctype), now.get(ctype)
        if old is not None and (new is None or new.fingerprint != old.fingerprint or new.starts_at != old.starts_at):
            out.append(raised_wire(old, "resolved", ended))
        if new is not None and (old is None or new.fingerprint != old.fingerprint or new.starts_at != old.starts_at):
            out.append(raised_wire(new))
    return out


def event_time(event: Event) -> str:
    meta = event.get("metadata") or {}
    return str(event.get("firstTimestamp") or event.get("eventTime") or meta.get("creationTimestamp") or "")


def event_last(event: Event) -> str:
    series = event.get("series") or {}
    return str(event.get("lastTimestamp") or series.get("lastObservedTime") or event.get("eventTime") or
               event_time(event))


def event_component(event: Event) -> str:
    return str((event.get("source") or {}).get("component") or event.get("reportingComponent") or "")


def event_node(event: Event) -> str:
    """The node an Event is about: its object when a Node, else where it was reported (the kubelet's host)."""
    obj = event.get("involvedObject") or {}
    if obj.get("kind") == "Node":
        return str(obj.get("name") or "")
    return str((event.get("source") or {}).get("host") or event.get("reportingInstance") or "")


def is_fresh(event: Event, now: datetime, max_age: timedelta) -> bool:
    """Whether the Event happened recently enough to matter (a first list also returns an hour-old Event)."""
    last = parse_iso(event_last(event))
    return last is not None and now - last <= max_age


def event_rule(event: Event, rules: KubeHealthRules) -> EventRule | None:
    if (event.get("involvedObject") or {}).get("kind") != "Node":
        return None
    return rules.event(str(event.get("reason") or ""), event_component(event), str(event.get("message") or ""))


def event_alerts(rule: EventRule, event: Event, cluster: str) -> list[Wire]:
    """An Event is a moment: it fires and resolves at once (an incident it opens resolves after the hold-down
    unless something still firing, such as the condition beside it, keeps it open)."""
    node, reason, message = event_node(event), str(event.get("reason") or ""), str(event.get("message") or "")
    labels = _labels(rule.alertname, node, rule.producer, cluster, rule.severity, reason=reason)
    annotations = {"summary": f"{reason} on {node} ({event_component(event)})", "description": message,
                   "event": f"{(event.get('metadata') or {}).get('namespace', '')}/"
                            f"{(event.get('metadata') or {}).get('name', '')}"}
    starts, last = event_time(event), event_last(event)
    return [wire("firing", labels, annotations, starts), wire("resolved", labels, annotations, starts, last or starts)]


def later(a: str, b: str) -> str:
    """The later of two RFC 3339 times (either may be empty)."""
    ta, tb = parse_iso(a), parse_iso(b)
    if ta is None or tb is None:
        return a or b
    return iso(max(ta, tb))


__all__ = ["Raised", "SOURCE", "Wire", "condition_alert", "condition_changes", "event_alerts", "event_component",
           "event_last", "event_node", "event_rule", "event_time", "is_fresh", "later", "node_conditions", "node_ready",
           "raised_wire", "wire"]
