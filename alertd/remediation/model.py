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
from typing import cast

from alertd.core.json_types import JSONObject, JSONValue, objects
from alertd.core.model import iso, parse_iso
from alertd.core.vocabulary import FINAL_STATES, WAITING_STATES, RemediationKind, RemediationState as RS
from alertd.remediation.blast import BlastRadius
from alertd.rules.remediation import DECLARED

# The states and kinds as plain text (stored and compared as such), from the vocabulary's declaration
PROPOSED, HELD, APPROVED, RUNNING, STOPPING = RS.PROPOSED.value, RS.HELD.value, RS.APPROVED.value, RS.RUNNING.value, \
    RS.STOPPING.value
DONE, FAILED, STOPPED, CANCELLED, SUPERSEDED = RS.DONE.value, RS.FAILED.value, RS.STOPPED.value, RS.CANCELLED.value, \
    RS.SUPERSEDED.value
WAITING = tuple(s.value for s in WAITING_STATES)
FINAL = tuple(s.value for s in FINAL_STATES)
ACTIVE = tuple(s.value for s in RS if s not in FINAL_STATES)
QUARANTINE, UNCORDON, RMA_HANDOFF = RemediationKind.QUARANTINE.value, RemediationKind.UNCORDON.value, \
    RemediationKind.RMA_HANDOFF.value


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
    dry_run: bool = DECLARED.dry_run  # (the policy's; every proposal passes it)
    automatic: bool = False
    reason: str = ""  # why it is held, refused, or failed
    approvals_needed: int = 1
    approvals: list[dict[str, str]] = field(default_factory=list)  # {"actor", "principal", "at", "via"}
    blast: BlastRadius = field(default_factory=lambda: BlastRadius())
    results: list[JSONObject] = field(default_factory=list)  # one per step: node, step, ok, result, ...
    holder: str = ""  # the engine replica that runs it
    version: int = 0

    @property
    def waiting(self) -> bool:
        return self.state in WAITING

    def approvers(self) -> set[str]:
        """The principals who approved (approvals stored before principals were recorded: their actor)."""
        return {a.get("principal") or a["actor"] for a in self.approvals}

    def to_dict(self) -> JSONObject:
        return {"id": self.id, "incident": self.incident_id, "cluster": self.cluster, "nodes": list(self.nodes),
                "kind": self.kind, "action": self.action, "policy": self.policy, "state": self.state,
                "createdAt": iso(self.created_at), "updatedAt": iso(self.updated_at), "dryRun": self.dry_run,
                "automatic": self.automatic, "reason": self.reason, "approvalsNeeded": self.approvals_needed,
                "approvals": [dict(a) for a in self.approvals], "blast": cast(JSONObject, self.blast),
                "results": list(self.results),
                "holder": self.holder, "version": self.version}

    @classmethod
    def from_dict(cls, d: JSONObject) -> "Remediation":
        """From to_dict()'s document as stored (alertd/store/remediations.py)."""
        created, updated = parse_iso(_str(d["createdAt"])), parse_iso(_str(d["updatedAt"]))
        assert created is not None and updated is not None
        return cls(id=_str(d["id"]), incident_id=_str(d["incident"]), cluster=_str(d.get("cluster", "")),
                   nodes=[_str(n) for n in _list(d["nodes"])], kind=_str(d["kind"]), action=_str(d["action"]),
                   policy=_str(d.get("policy", "")), state=_str(d["state"]),
                   created_at=created, updated_at=updated, dry_run=bool(d.get("dryRun", DECLARED.dry_run)),
                   automatic=bool(d.get("automatic")), reason=_str(d.get("reason", "")),
                   approvals_needed=_int(d.get("approvalsNeeded", 1)),
                   approvals=[{k: _str(v) for k, v in a.items()} for a in objects(d.get("approvals"))],
                   blast=cast(BlastRadius, dict(_obj(d.get("blast")))),  # built by blast.build, stored as JSON
                   results=objects(d.get("results")), holder=_str(d.get("holder", "")),
                   version=_int(d.get("version", 0)))


def _str(v: JSONValue) -> str:
    if not isinstance(v, str):
        raise ValueError(f"a remediation document holds {v!r} where a string belongs")
    return v


def _int(v: JSONValue) -> int:
    if not isinstance(v, (int, float, str)) or isinstance(v, bool):
        raise ValueError(f"a remediation document holds {v!r} where a number belongs")
    return int(v)


def _list(v: JSONValue) -> list[JSONValue]:
    if not isinstance(v, list):
        raise ValueError(f"a remediation document holds {v!r} where a list belongs")
    return v


def _obj(v: JSONValue) -> JSONObject:
    return v if isinstance(v, dict) else {}
