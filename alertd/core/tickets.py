"""An RMA handoff's records: the evidence a ticket carries, and the link to the ticket it opened.

Shared by the rules (the ladder's ``rma`` step), the store (one ticket per GPU, incident and target), the
integrations that open tickets (Jira, the signed webhook), the incident (``Incident.tickets``) and what shows
it (API, UI, Slack). Frozen values with explicit ``to_json``/``from_json``: stored and sent as JSON, read back
into the same shapes.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Mapping, TypedDict


class XidSeenJson(TypedDict):
    at: str
    xid: int
    incident: str
    node: str


class TicketLinkJson(TypedDict):
    target: str
    system: str
    key: str
    url: str
    gpu: str
    openedAt: str


class EvidenceJson(TypedDict):
    incident: str
    title: str
    cluster: str
    node: str
    gpuUuid: str
    serial: str
    pciBusId: str
    model: str
    xidHistory: list[XidSeenJson]
    kernelLog: list[str]
    link: str
    why: str


@dataclass(frozen=True, slots=True)
class XidSeen:
    """One Xid the GPU reported, from the store's GPU history: when, which, in which incident, on which node."""

    at: str
    xid: int
    incident: str
    node: str = ""

    def to_json(self) -> XidSeenJson:
        return {"at": self.at, "xid": self.xid, "incident": self.incident, "node": self.node}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> "XidSeen":
        return cls(str(doc.get("at", "")), int(str(doc.get("xid", 0))), str(doc.get("incident", "")),
                   str(doc.get("node", "")))


@dataclass(frozen=True, slots=True)
class RmaEvidence:
    """What a ticket to return a GPU carries: the GPU's identity, its Xid history and the kernel log lines."""

    incident: str
    title: str
    cluster: str
    node: str
    gpu_uuid: str
    serial: str = ""
    pci_bus_id: str = ""
    model: str = ""
    xid_history: tuple[XidSeen, ...] = ()
    kernel_log: tuple[str, ...] = ()
    link: str = ""  # the incident's page in alertd, when external_url is set
    why: str = ""  # the one line that chose the RMA step (the verdict, or who asked)

    @property
    def label(self) -> str:
        """The ticket's own label, the same on every retry: how a ticket opened before a crash is found again."""
        return "alertd-rma-" + hashlib.sha256(f"{self.incident}|{self.gpu_uuid}".encode()).hexdigest()[:16]

    @property
    def summary(self) -> str:
        gpu = self.gpu_uuid or "unknown GPU"
        return f"RMA: {gpu} on {self.node or '?'} ({self.cluster or '?'}), incident {self.incident}"[:250]

    def to_json(self) -> EvidenceJson:
        return {"incident": self.incident, "title": self.title, "cluster": self.cluster, "node": self.node,
                "gpuUuid": self.gpu_uuid, "serial": self.serial, "pciBusId": self.pci_bus_id, "model": self.model,
                "xidHistory": [x.to_json() for x in self.xid_history], "kernelLog": list(self.kernel_log),
                "link": self.link, "why": self.why}


@dataclass(frozen=True, slots=True)
class TicketLink:
    """A ticket opened for an incident's GPU: where (``target``: the configured name, ``system``: jira or
    webhook), its key (a Jira issue key; the key the webhook's receiver named, else the ticket's own label)
    and the link people follow."""

    target: str
    system: str
    key: str
    url: str = ""
    gpu: str = ""
    opened_at: str = ""

    def to_json(self) -> TicketLinkJson:
        return {"target": self.target, "system": self.system, "key": self.key, "url": self.url, "gpu": self.gpu,
                "openedAt": self.opened_at}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> "TicketLink":
        return cls(str(doc.get("target", "")), str(doc.get("system", "")), str(doc.get("key", "")),
                   str(doc.get("url", "")), str(doc.get("gpu", "")), str(doc.get("openedAt", "")))


__all__ = ["EvidenceJson", "RmaEvidence", "TicketLink", "TicketLinkJson", "XidSeen", "XidSeenJson"]
