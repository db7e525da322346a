"""A remediation as stored (alertd/store/remediations.py): what is proposed for which nodes, and how it went.

States, in order: ``proposed`` (or ``held`` by the circuit breaker, until an override) -> ``approved`` (every
approval it needs) -> ``running`` (claimed by the elected engine) -> ``done`` / ``failed`` / ``stopped``;
``cancelled`` and ``superseded`` (a fleet incident took the node over) end a proposal that never ran.
``version`` counts writes: every transition is a compare-and-set on it, so two replicas (or two clicks)
never both win.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from alertd.core.model import iso, parse_iso

PROPOSED, HELD, APPROVED, RUNNING, STOPPING = "proposed", "held", "approved", "running", "stopping"
DONE, FAILED, STOPPED, CANCELLED, SUPERSEDED = "done", "failed", "stopped", "cancelled", "superseded"
WAITING = (PROPOSED, HELD)  # not approved yet: may be approved, overridden or cancelled
ACTIVE = (PROPOSED, HELD, APPROVED, RUNNING, STOPPING)
FINAL = (DONE, FAILED, STOPPED, CANCELLED, SUPERSEDED)
QUARANTINE, UNCORDON = "quarantine", "uncordon"  # what a remediation does: take nodes out, or give them back
RMA_HANDOFF = "rma"  # ... or hand its GPUs back to the vendor, asked by a person (the ladder's RMA step is a quarantine)


@dataclass(slots=True)
class Remediation:
    id: str  # "<incident id>/<kind>", so one incident has at most one of each kind
    incident_id: str
    cluster: str
    nodes: list[str]
    kind: str  # QUARANTINE, UNCORDON or RMA_HANDOFF
    action: str  # the policy's action: cordon, drain, drain-gpu, handoff, drain-handoff, rma; "uncordon" for UNCORDON
    policy: str
    state: str
    created_at: datetime
    updated_at: datetime
    dry_run: bool = True
    automatic: bool = False
    reason: str = ""  # why it is held, refused, or failed
    approvals_needed: int = 1
    approvals: list[dict[str, str]] = field(default_factory=list)  # {"actor", "principal", "at", "via"}
    blast: dict[str, Any] = field(default_factory=dict)  # alertd.remediation.blast.BlastRadius.to_dict()
    results: list[dict[str, Any]] = field(default_factory=list)  # one per node: what was done, what was not
    holder: str = ""  # the engine replica that runs it
    version: int = 0

    @property
    def waiting(self) -> bool:
        return self.state in WAITING

    def approvers(self) -> set[str]:
        """The principals who approved (approvals stored before principals were recorded: their actor)."""
        return {a.get("principal") or a["actor"] for a in self.approvals}

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "incident": self.incident_id, "cluster": self.cluster, "nodes": list(self.nodes),
                "kind": self.kind, "action": self.action, "policy": self.policy, "state": self.state,
                "createdAt": iso(self.created_at), "updatedAt": iso(self.updated_at), "dryRun": self.dry_run,
                "automatic": self.automatic, "reason": self.reason, "approvalsNeeded": self.approvals_needed,
                "approvals": list(self.approvals), "blast": self.blast, "results": list(self.results),
                "holder": self.holder, "version": self.version}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Remediation":
        created, updated = parse_iso(d["createdAt"]), parse_iso(d["updatedAt"])
        assert created is not None and updated is not None
        return cls(id=d["id"], incident_id=d["incident"], cluster=d.get("cluster", ""), nodes=list(d["nodes"]),
                   kind=d["kind"], action=d["action"], policy=d.get("policy", ""), state=d["state"],
                   created_at=created, updated_at=updated, dry_run=bool(d.get("dryRun", True)),
                   automatic=bool(d.get("automatic")), reason=d.get("reason", ""),
                   approvals_needed=int(d.get("approvalsNeeded", 1)), approvals=list(d.get("approvals") or []),
                   blast=dict(d.get("blast") or {}), results=list(d.get("results") or []),
                   holder=d.get("holder", ""), version=int(d.get("version", 0)))
