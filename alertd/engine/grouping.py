"""Which incident an alert belongs to: the fields matchers and keys may name, and the first matching group."""
from __future__ import annotations

from typing import Iterable

from alertd.core.matchers import match_all
from alertd.core.model import Alert
from alertd.rules.ruleset import GroupRule


def fields_of(alert: Alert) -> dict[str, str]:
    """Labels plus the derived fields that matchers and group keys may name."""
    s, sig = alert.subject, alert.signal
    out = dict(alert.labels)
    out.update(
        cluster=s.cluster, node=s.node, namespace=s.namespace, pod=s.pod, container=s.container, origin=s.origin,
        gpu=s.gpu.key() if s.gpu else "", signal=sig.kind, category=sig.category,
        severity=sig.severity, xid=str(sig.xid or ""), switch=sig.switch, alertname=alert.name, fingerprint=alert.fingerprint,
    )
    return out


def group_for(fields: dict[str, str], groups: Iterable[GroupRule]) -> tuple[GroupRule, str] | None:
    for group in groups:
        if not match_all(group.matchers, fields):
            continue
        values = [fields.get(b, "") for b in group.by]
        if all(values) or group.allow_empty:
            return group, group.name + "|" + "|".join(f"{b}={v}" for b, v in zip(group.by, values))
    return None
