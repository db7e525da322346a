"""What a silence made from an incident would mute, before it is made.

The matchers come from alertd/alertmanager/silences.py (the incident's alertnames and Xid codes, its nodes, its
cluster, its GPU). Two answers, from two places:

- the alerts it matches now: Alertmanager's own answer to ``GET /api/v2/alerts?filter=...`` (every alert it
  holds, active, silenced or inhibited), so the preview counts what Alertmanager will mute, including alerts
  it never sent to alertd;
- the open incidents it would mute: the matchers evaluated here (RE2, anchored, as Alertmanager evaluates them)
  over the firing alerts of the open incidents on the silence's nodes. One that is neither the incident nor one
  of its node incidents (or its fleet) is an overlap: the silence would also mute another fault, and the
  person is asked again before it is made (Slack and the UI ask; the API answers 409 unless ``force=true``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Protocol

from alertd.alertmanager.silences import Matcher, local_matchers, matcher_text, silence_matchers
from alertd.config.settings import Config
from alertd.core.json_types import JSONObject, text
from alertd.core.matchers import match_all
from alertd.core.model import ACKNOWLEDGED, FIRING, OPEN, Incident, Member

MAX_INCIDENTS = 1000  # open incidents looked at per node of the silence (a storm's node incidents are one each)


class PreviewStore(Protocol):
    async def incidents_with_members(self, ids: list[str]) -> list[Incident]: ...

    async def open_incidents_on(self, nodes: list[str], limit: int, known: Collection[str] = ()) -> list[Incident]: ...


class AlertSource(Protocol):
    async def alerts_matching(self, matchers: list[Matcher]) -> list[JSONObject]: ...


@dataclass(frozen=True, slots=True)
class Muted:
    """An open incident the silence would mute: the alerts of it the matchers select."""

    id: str
    title: str
    alerts: tuple[str, ...]

    def to_dict(self) -> JSONObject:
        return {"id": self.id, "title": self.title, "alerts": list(self.alerts)}


@dataclass(slots=True)
class SilencePreview:
    incident: str
    matchers: list[Matcher]
    alerts: list[JSONObject] = field(default_factory=list)  # Alertmanager's, as it answered
    incidents: list[Muted] = field(default_factory=list)  # the incident itself and its own node incidents
    overlap: list[Muted] = field(default_factory=list)  # other open incidents it would mute too

    @property
    def matcher_line(self) -> str:
        return "{" + ", ".join(matcher_text(m) for m in self.matchers) + "}"

    def summary(self) -> str:
        """One line: what it matches now, and what else it would mute."""
        alerts = f"{len(self.alerts)} alert{'s' if len(self.alerts) != 1 else ''} in Alertmanager now"
        line = f"{self.matcher_line} matches {alerts}"
        if self.overlap:
            line += "; it would also mute " + ", ".join(f"{m.id} ({m.title})" for m in self.overlap)
        return line

    def to_dict(self) -> JSONObject:
        return {"incident": self.incident, "matchers": [{"name": m["name"], "value": m["value"], "isRegex": m["isRegex"],
                                                              "isEqual": m["isEqual"]} for m in self.matchers],
                "matcherText": self.matcher_line,
                "alerts": [_alert_row(a) for a in self.alerts], "alertCount": len(self.alerts),
                "incidents": [m.to_dict() for m in self.incidents], "overlap": [m.to_dict() for m in self.overlap]}


def _alert_row(a: JSONObject) -> JSONObject:
    labels = a.get("labels")
    status = a.get("status")
    return {"labels": labels if isinstance(labels, dict) else {}, "fingerprint": text(a, "fingerprint"),
            "state": text(status, "state") if isinstance(status, dict) else ""}


async def scope_members(store: PreviewStore, inc: Incident) -> tuple[list[Member], dict[str, Incident]]:
    """The alerts a silence of the incident is scoped by (a fleet's are its node incidents'), and the node
    incidents read for them, by id: one read for all of them."""
    if not inc.fleet or inc.members:
        return list(inc.members.values()), {}
    children = await store.incidents_with_members(list(inc.children))
    return [m for c in children for m in c.members.values()], {c.id: c for c in children}


async def preview_silence(store: PreviewStore, am: AlertSource, cfg: Config, inc: Incident) -> SilencePreview:
    """Two store reads whatever the number of nodes: the fleet's node incidents, then the open incidents on
    every node of the silence, each with its members."""
    ncfg = cfg.normalize
    members, loaded = await scope_members(store, inc)
    matchers = silence_matchers(inc, members, ncfg.node_labels, ncfg.cluster_label, ncfg.xid_labels)
    preview = SilencePreview(inc.id, matchers, alerts=await am.alerts_matching(matchers))
    local = local_matchers(matchers)
    own = {inc.id, inc.parent_id, *inc.children} - {""}
    loaded[inc.id] = inc  # as the caller has it
    nodes = sorted(set(inc.nodes) | {inc.node} - {""})
    found = {o.id: o for o in await store.open_incidents_on(nodes, MAX_INCIDENTS * max(1, len(nodes)), loaded.keys())}
    on = set(nodes)
    found |= {i: o for i, o in loaded.items() if o.status in (OPEN, ACKNOWLEDGED) and _on(o, on)}
    for other in sorted(found.values(), key=_listed):
        hits = sorted({m.alertname for m in other.members.values() if m.status == FIRING and match_all(local, m.labels)})
        if hits:
            (preview.incidents if other.id in own else preview.overlap).append(Muted(other.id, other.title, tuple(hits)))
    return preview


def _on(inc: Incident, nodes: set[str]) -> bool:
    return inc.node in nodes or any(n in nodes for n in inc.nodes)


def _listed(inc: Incident) -> tuple[str, int, int, str]:
    """By node, open before acknowledged, then as opened (INC-9 before INC-10): the order the preview lists
    what it would mute."""
    node = inc.node or min(inc.nodes, default="")
    return node, 0 if inc.status == OPEN else 1, len(inc.id), inc.id


class SilenceOverlap(Exception):
    """The silence would also mute another open incident's alerts: asked again before it is made."""

    def __init__(self, preview: SilencePreview, duration: str):
        super().__init__(f"the silence would also mute {', '.join(m.id for m in preview.overlap)}: "
                         "confirm to silence them too")
        self.preview, self.duration = preview, duration


__all__ = ["Muted", "SilenceOverlap", "SilencePreview", "preview_silence", "scope_members"]
