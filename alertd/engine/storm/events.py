"""Which storm event a node incident belongs to: the fields event matchers and keys may name, and the key
of the first event of ``correlation.storm.events`` that matches its leading signal (engine/storm/fleets.py
folds the incidents of one key into one fleet)."""
from __future__ import annotations

from alertd.core.matchers import match_all
from alertd.core.model import Incident, Signal
from alertd.engine.storm.summary import lead_alertname
from alertd.core.vocabulary import NEVER_STORM
from alertd.rules.ruleset import StormRule

# What storm event matchers and keys may name: signal_fields, and the leading alert's name
EVENT_FIELDS = frozenset({"cluster", "node", "group", "signal", "category", "severity", "xid", "detail", "alertname"})


def signal_fields(inc: Incident, sig: Signal) -> dict[str, str]:
    """What storm event matchers and keys may name (``alertname``: see ``event_key``)."""
    return {"cluster": inc.cluster, "node": inc.node, "group": inc.group, "signal": sig.kind,
            "category": sig.category, "severity": sig.severity, "xid": str(sig.xid or ""), "detail": sig.detail}


def event_key(rule: StormRule, inc: Incident, sig: Signal) -> str | None:
    """The event a node incident led by ``sig`` belongs to, or None when it cannot storm. An event may also
    name ``alertname``, the leading alert's (all there is to go by for an alert alertd cannot classify)."""
    if sig.kind in NEVER_STORM or (rule.signals and sig.kind not in rule.signals):
        return None
    fields = signal_fields(inc, sig)
    for event in rule.events:  # the leading alert's name is looked up among the members only when needed
        if "alertname" not in fields and any(m.name == "alertname" for m in event.matchers):
            fields["alertname"] = lead_alertname(inc, sig)
        if match_all(event.matchers, fields):
            if "alertname" in event.by and "alertname" not in fields:
                fields["alertname"] = lead_alertname(inc, sig)
            return event.name + "|" + "|".join(f"{b}={fields.get(b, '')}" for b in event.by)
    return None


def cluster_follower_key(rule: StormRule, inc: Incident) -> str | None:
    """The event a node-less incident of one cluster may join a fleet of: its leading signal must be a follower."""
    sig = inc.primary
    if inc.node or inc.fleet or not inc.cluster or sig is None \
            or not match_all(rule.followers, signal_fields(inc, sig)):
        return None
    return event_key(rule, inc, sig)


__all__ = ["EVENT_FIELDS", "cluster_follower_key", "event_key", "signal_fields"]
