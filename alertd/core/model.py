"""Domain model shared by every stage: alerts, their GPU subject, incidents. Plain data, so the engine stays
pure and the store serialises it as JSON without knowing the engine."""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from alertd.core.findings import Findings
from alertd.core.instants import iso as iso, parse_instant as parse_instant, parse_iso as parse_iso
from alertd.core.json_types import (JSONObject, JSONValue, as_json, as_object, integer, integers, objects,
                                    number, optional_integer, optional_text, required_text, string_map, strings, text)
from alertd.core.tickets import TicketLink
from alertd.core.verdict import HistoryVerdict
from alertd.core.vocabulary import KIND_PRIORITY, Category, SignalKind
from alertd.core.states import (
    ACKNOWLEDGED as ACKNOWLEDGED,
    CLOSED as CLOSED,
    FIRING as FIRING,
    INCIDENT_STATES as INCIDENT_STATES,
    OPEN as OPEN,
    RESOLVED as RESOLVED,
    SEVERITIES as SEVERITIES,
    SEVERITY_RANK as SEVERITY_RANK,
    AlertStatus as AlertStatus,
    IncidentStatus as IncidentStatus,
    Severity as Severity,
    as_alert_status as as_alert_status,
    as_incident_status as as_incident_status,
    as_severity as as_severity,
)

JOB_SUSPECT = "job_suspect"  # annotation of a node incident: the stalled job's incident that speaks for it
DOMAIN_OF = "domain_of"  # annotation of a node incident: the incident of its bad failure domain, which speaks for it
DOMAIN = "failure_domain"  # annotation of a domain's incident: {kind, value, size, nodes} (engine/domains.py)
STORM_SAYS = "storm_says"  # annotation of a fleet: {title, reading, advice}, in words (engine/storm/extent.py)
STORM_EXTENT = "storm_extent"  # annotation of a fleet: {severity, nodes, gpus, step}, the escalate step it reached
RECONCILED_BY = "alertd:reconciliation"  # receiver of resolutions made by reconciliation (alertd/alertmanager/reconcile.py)
HELD_BY = "alertd:alertmanager-api"  # receiver of alerts reconciliation took from Alertmanager's API, never sent by webhook


def max_severity(*levels: str) -> str:
    return max((lvl for lvl in levels if lvl), key=lambda s: SEVERITY_RANK.get(s, 0), default=Severity.INFO.value)


@dataclass(frozen=True, slots=True)
class GPU:
    """One GPU, identified by whatever the alert carried; PCI id is normalised."""

    uuid: str = ""
    index: str = ""
    pci_bus_id: str = ""
    model: str = ""
    serial: str = ""  # board serial, when the exporter is configured to label it

    def key(self) -> str:
        return self.uuid or self.pci_bus_id or self.index

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("uuid", self.uuid), ("index", self.index), ("pci_bus_id", self.pci_bus_id),
                                  ("model", self.model), ("serial", self.serial)) if v}


@dataclass(frozen=True, slots=True)
class Subject:
    """What an alert is about, in fleet terms."""

    cluster: str = ""
    node: str = ""
    gpu: GPU | None = None
    namespace: str = ""
    pod: str = ""
    container: str = ""
    # Where the node came from ("label node", "kubernetes pod ns/name", ...: alertd/engine/identity.py), and,
    # when no node was found, what the alert pointed at instead (an unresolved exporter pod, a GPU UUID), so
    # node-less alerts of different nodes never share an incident.
    node_source: str = ""
    origin: str = ""
    # Values of node labels that are no node ("Hostname=5f3c9a1e7b2d: a container ID ..."), one a line.
    node_refused: str = ""

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            k: getattr(self, k) for k in ("cluster", "node", "namespace", "pod", "container", "node_source", "origin",
                                       "node_refused")
            if getattr(self, k)
        }
        if self.gpu is not None:
            out["gpu"] = as_json(self.gpu.to_dict())
        return out

    @classmethod
    def from_dict(cls, data: JSONObject) -> "Subject":
        gpu = data.get("gpu")
        return cls(
            cluster=text(data, "cluster"),
            node=text(data, "node"),
            gpu=GPU(**string_map(gpu)) if gpu else None,
            namespace=text(data, "namespace"),
            pod=text(data, "pod"),
            container=text(data, "container"),
            node_source=text(data, "node_source"),
            origin=text(data, "origin"),
            node_refused=text(data, "node_refused"),
        )


@dataclass(frozen=True, slots=True)
class Signal:
    """What kind of problem an alert reports, decided by rules/ data."""

    kind: str = SignalKind.OTHER.value  # a SignalKind, as the signals rules decide it
    severity: Severity = Severity.WARNING
    category: str = Category.OTHER.value  # a Category
    xid: int | None = None
    title: str = ""
    meaning: str = ""
    action: str = ""
    investigate: str = ""
    drain: bool = False
    runbook: str = ""
    detail: str = ""  # e.g. exporter_down / node_down, or decoded clock-event reasons
    fold_into_previous: bool = False
    basis: str = ""  # which rule and evidence decided it (alertd explain), e.g. "expression metric DCGM_FI_DEV_XID_ERRORS"
    sxid: int | None = None  # kind sxid: the NVSwitch's SXid code (never in ``xid``: it is no GPU Xid)
    switch: str = ""  # kind sxid: the NVSwitch, "nvswitch0@0000:05:00" (device name @ PCI address)

    def to_dict(self) -> JSONObject:
        # Written for every member of every stored step: a plain loop, not dataclasses.asdict's deep copy.
        out = {}
        for name in _SIGNAL_FIELDS:
            value = getattr(self, name)
            if value not in ("", None, False):
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: JSONObject) -> "Signal":
        # Absent members keep the dataclass defaults, as before; present ones are narrowed to the field's type.
        return cls(
            kind=text(data, "kind", SignalKind.OTHER.value),
            severity=as_severity(text(data, "severity", Severity.WARNING)),
            category=text(data, "category", Category.OTHER.value),
            xid=optional_integer(data, "xid"),
            title=text(data, "title"),
            meaning=text(data, "meaning"),
            action=text(data, "action"),
            investigate=text(data, "investigate"),
            drain=bool(data.get("drain")),
            runbook=text(data, "runbook"),
            detail=text(data, "detail"),
            fold_into_previous=bool(data.get("fold_into_previous")),
            basis=text(data, "basis"),
            sxid=optional_integer(data, "sxid"),
            switch=text(data, "switch"),
        )


_SIGNAL_FIELDS = tuple(f.name for f in dataclasses.fields(Signal))


def signal_rank(sig: Signal) -> tuple[int, int]:
    """Severity first, then how well the kind explains the trouble: the highest leads an incident."""
    return SEVERITY_RANK.get(sig.severity, 0), KIND_PRIORITY.get(sig.kind, 0)


@dataclass(slots=True)
class Alert:
    """One Alertmanager alert as received, plus what normalize/classify made of it."""

    fingerprint: str
    status: AlertStatus
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None
    generator_url: str = ""
    receiver: str = ""
    external_url: str = ""
    received_at: datetime | None = None
    subject: Subject = Subject()  # frozen: one shared "not worked out yet" each, not two objects per alert
    signal: Signal = Signal()

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def firing(self) -> bool:
        return self.status == FIRING

    def to_wire(self) -> JSONObject:
        """The received form, as stored in the inbox (normalisation is redone on replay)."""
        return {
            "fingerprint": self.fingerprint,
            "status": self.status,
            "labels": as_json(self.labels),
            "annotations": as_json(self.annotations),
            "startsAt": iso(self.starts_at),
            "endsAt": iso(self.ends_at),
            "generatorURL": self.generator_url,
            "receiver": self.receiver,
            "externalURL": self.external_url,
            "receivedAt": iso(self.received_at),
        }

    @classmethod
    def from_wire(cls, data: JSONObject) -> "Alert":
        return cls(
            fingerprint=required_text(data, "fingerprint"),
            status=as_alert_status(required_text(data, "status")),
            labels=string_map(data.get("labels")),
            annotations=string_map(data.get("annotations")),
            starts_at=parse_instant(required_text(data, "startsAt")),
            ends_at=parse_iso(optional_text(data, "endsAt")),
            generator_url=text(data, "generatorURL"),
            receiver=text(data, "receiver"),
            external_url=text(data, "externalURL"),
            received_at=parse_iso(optional_text(data, "receivedAt")),
        )


def interned(labels: dict[str, str]) -> dict[str, str]:
    """Label names and values repeat across members (cluster, node, model, alertname): one copy each in the
    engine's memory. Done where an alert becomes a member (a subject interns its own strings), not for every
    alert received again."""
    return {sys.intern(k): sys.intern(v) for k, v in labels.items()}


@dataclass(slots=True)
class Member:
    """An alert's membership in an incident."""

    fingerprint: str
    alertname: str
    status: AlertStatus
    signal: Signal
    subject: Subject
    labels: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None = None
    last_seen: datetime | None = None
    folded: bool = False  # fallout (e.g. Xid 45): shown, but does not drive severity or title
    generator_url: str = ""
    summary: str = ""
    response: bool = False  # a repair symptom (cordon, reboot) that followed the incident's fault: its response
    via_api: bool = False  # taken from Alertmanager's API by reconciliation (HELD_BY): no webhook had carried it
    reading: float | None = None  # the number a storm event reads from its annotation (a GPU's temperature)

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "fingerprint": self.fingerprint,
            "alertname": self.alertname,
            "status": self.status,
            "signal": self.signal.to_dict(),
            "subject": self.subject.to_dict(),
            "labels": as_json(self.labels),
            "startsAt": iso(self.starts_at),
            "endsAt": iso(self.ends_at),
            "lastSeen": iso(self.last_seen),
            "folded": self.folded,
            "generatorURL": self.generator_url,
            "summary": self.summary,
        }
        if self.response:
            out["response"] = True
        if self.via_api:
            out["viaApi"] = True
        if self.reading is not None:
            out["reading"] = self.reading
        return out

    @classmethod
    def from_dict(cls, data: JSONObject) -> "Member":
        return cls(
            fingerprint=required_text(data, "fingerprint"),
            alertname=text(data, "alertname"),
            status=as_alert_status(required_text(data, "status")),
            signal=Signal.from_dict(as_object(data.get("signal"))),
            subject=Subject.from_dict(as_object(data.get("subject"))),
            labels=string_map(data.get("labels")),
            starts_at=parse_instant(required_text(data, "startsAt")),
            ends_at=parse_iso(optional_text(data, "endsAt")),
            last_seen=parse_iso(optional_text(data, "lastSeen")),
            folded=bool(data.get("folded")),
            generator_url=text(data, "generatorURL"),
            summary=text(data, "summary"),
            response=bool(data.get("response")),
            via_api=bool(data.get("viaApi")),
            reading=number(data, "reading") if "reading" in data else None,
        )


@dataclass(slots=True)
class Event:
    """One line of an incident's timeline."""

    at: datetime
    kind: str  # opened, alert_joined, alert_resolved, alert_refired, severity_changed, acknowledged, ...
    text: str = ""
    actor: str = ""
    data: JSONObject = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        out: JSONObject = {"at": iso(self.at), "kind": self.kind}
        if self.text:
            out["text"] = self.text
        if self.actor:
            out["actor"] = self.actor
        if self.data:
            out["data"] = self.data
        return out

    @classmethod
    def from_dict(cls, data: JSONObject) -> "Event":
        return cls(
            at=parse_instant(required_text(data, "at")),
            kind=required_text(data, "kind"),
            text=text(data, "text"),
            actor=text(data, "actor"),
            data=dict(as_object(data.get("data"))),
        )


@dataclass(slots=True)
class Incident:
    """A real problem: one or more alerts folded together by a correlation group."""

    id: str
    key: str
    group: str
    title: str
    severity: Severity
    category: str
    status: IncidentStatus
    opened_at: datetime
    updated_at: datetime
    cluster: str = ""
    node: str = ""
    nodes: list[str] = field(default_factory=list)  # fleet incidents list every node
    namespace: str = ""
    pod: str = ""
    gpus: list[dict[str, str]] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)
    xids: list[int] = field(default_factory=list)
    members: dict[str, Member] = field(default_factory=dict)
    timeline: list[Event] = field(default_factory=list)
    acknowledged_by: str = ""
    acknowledged_at: datetime | None = None
    resolved_at: datetime | None = None
    quiet_since: datetime | None = None  # every member resolved since then: hold-down running
    flaps: int = 0
    previous_id: str = ""
    parent_id: str = ""  # set when folded into a fleet (storm) incident
    fleet: bool = False
    children: list[str] = field(default_factory=list)  # node incidents a fleet incident folded in
    # fleet: the events it stands for (rules: correlation.storm); a node-less follower: the event it awaits a fleet of
    storm_keys: list[str] = field(default_factory=list)
    storm_last: datetime | None = None  # fleet: when its latest node incident folded in (the window runs from it)
    # "Storm pending": a node incident that may still fold into a fleet until then; routing holds its first post
    storm_until: datetime | None = None
    primary: Signal | None = None  # the signal that explains the incident (title, action, runbook)
    annotations: JSONObject = field(default_factory=dict)  # findings (core/findings.py), silences, notes
    tickets: list[TicketLink] = field(default_factory=list)  # RMA tickets opened for its GPUs (app/rma_handoff.py)
    verdict: HistoryVerdict | None = None  # what the GPU's and node's past says (rules/history.yml)
    version: int = 0
    firing: int = 0  # members firing now, kept by the engine (a fleet incident can hold thousands)

    @property
    def is_open(self) -> bool:
        return self.status != CLOSED

    @property
    def spoken_for(self) -> bool:
        """Folded into a fleet, a stalled job's suspect, or a node of a bad domain: that incident's messages
        speak for this one (it posts and pages nothing of its own; messages already sent for it are kept
        current)."""
        return bool(self.parent_id) or JOB_SUSPECT in self.annotations or DOMAIN_OF in self.annotations

    @property
    def findings(self) -> Findings:
        """What enrichment and people found (log evidence, Kubernetes context, jobs, silence, remediation),
        typed, read from the annotations that hold them."""
        return Findings.from_annotations(self.annotations)

    def firing_members(self) -> list[Member]:
        return [m for m in self.members.values() if m.status == FIRING]

    def count_firing(self) -> int:
        """Recount after loading; the engine keeps ``firing`` up to date as members change."""
        self.firing = sum(1 for m in self.members.values() if m.status == FIRING)
        return self.firing

    def add_event(self, at: datetime, kind: str, text: str = "", actor: str = "", **data: JSONValue) -> Event:
        event = Event(at=at, kind=str(kind), text=text, actor=actor, data=data)  # an EventKind, stored as its word
        self.timeline.append(event)
        self.updated_at = at
        return event

    def to_dict(self, *, with_members: bool = True) -> JSONObject:
        out: JSONObject = {
            "id": self.id, "key": self.key, "group": self.group, "title": self.title, "severity": self.severity,
            "category": self.category, "status": self.status,
            "openedAt": iso(self.opened_at), "updatedAt": iso(self.updated_at), "resolvedAt": iso(self.resolved_at),
            "acknowledgedBy": self.acknowledged_by,
            "acknowledgedAt": iso(self.acknowledged_at),
            "quietSince": iso(self.quiet_since),
            "cluster": self.cluster,
            "node": self.node,
            "nodes": as_json(self.nodes),
            "namespace": self.namespace,
            "pod": self.pod,
            "gpus": as_json(self.gpus),
            "signals": as_json(self.signals),
            "xids": as_json(self.xids),
            "flaps": self.flaps,
            "previousId": self.previous_id,
            "parentId": self.parent_id,
            "fleet": self.fleet,
            "children": as_json(self.children),
            "stormKeys": as_json(self.storm_keys),
            "stormLast": iso(self.storm_last),
            "stormUntil": iso(self.storm_until),
            "primary": self.primary.to_dict() if self.primary else None,
            "annotations": self.annotations,
            "tickets": [cast(JSONValue, t.to_json()) for t in self.tickets],
            "verdict": self.verdict.to_json() if self.verdict else None, "version": self.version,
            "firing": self.firing,
            "memberCount": len(self.members),
        }
        if with_members:
            out["members"] = [m.to_dict() for m in self.members.values()]
            out["timeline"] = [e.to_dict() for e in self.timeline]
        return out

    @classmethod
    def from_dict(cls, data: JSONObject) -> "Incident":
        members = [Member.from_dict(m) for m in objects(data.get("members"))]
        primary = as_object(data.get("primary"))
        verdict = as_object(data.get("verdict"))
        return cls(
            id=required_text(data, "id"),
            key=required_text(data, "key"),
            group=text(data, "group"),
            title=text(data, "title"),
            severity=as_severity(text(data, "severity", Severity.WARNING)),
            category=text(data, "category", Category.OTHER.value),
            status=as_incident_status(required_text(data, "status")),
            opened_at=parse_instant(required_text(data, "openedAt")),
            updated_at=parse_instant(required_text(data, "updatedAt")),
            resolved_at=parse_iso(optional_text(data, "resolvedAt")),
            acknowledged_by=text(data, "acknowledgedBy"),
            acknowledged_at=parse_iso(optional_text(data, "acknowledgedAt")),
            quiet_since=parse_iso(optional_text(data, "quietSince")),
            cluster=text(data, "cluster"),
            node=text(data, "node"),
            nodes=strings(data.get("nodes")),
            namespace=text(data, "namespace"),
            pod=text(data, "pod"),
            gpus=[string_map(g) for g in objects(data.get("gpus"))],
            signals=strings(data.get("signals")),
            xids=integers(data.get("xids")),
            members={m.fingerprint: m for m in members},
            timeline=[Event.from_dict(e) for e in objects(data.get("timeline"))],
            flaps=integer(data, "flaps"),
            previous_id=text(data, "previousId"),
            parent_id=text(data, "parentId"),
            fleet=bool(data.get("fleet")),
            children=strings(data.get("children")),
            storm_keys=strings(data.get("stormKeys")),
            storm_last=parse_iso(optional_text(data, "stormLast")),
            storm_until=parse_iso(optional_text(data, "stormUntil")),
            primary=Signal.from_dict(primary) if primary else None,
            annotations=dict(as_object(data.get("annotations"))),
            tickets=[TicketLink.from_json(t) for t in objects(data.get("tickets"))],
            verdict=HistoryVerdict.from_json(verdict) if verdict else None,
            version=integer(data, "version"),
            firing=integer(data, "firing"),
        )


@dataclass(slots=True)
class Change:
    """What the engine did to one incident in one step: the input of routing and notify."""

    incident: Incident
    kinds: list[str]  # timeline event kinds produced in this step, e.g. ["opened"], ["alert_joined"]
    events: list[Event] = field(default_factory=list)
    members: list[str] = field(default_factory=list)  # fingerprints whose membership changed
    urgent: bool = False  # ack / resolve: notifiers skip their debounce

