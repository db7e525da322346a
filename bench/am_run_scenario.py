"""The fault schedule of bench/record_am_run.py: what happens to which simulated node when, and the ground truth.

Four problems run side by side in one 24-node cluster, so one ~45 minute run records all of them:

  flap         one GPU's Xid 79 comes and goes five times over ~28 minutes, gaps of 4-6 minutes
  storm        Xid 119 on 13 nodes, one a minute over 12 minutes; four exporters die a minute after
               their Xid (the Xid series goes stale), the operator cordons six nodes four minutes after theirs
  maintenance  two nodes: cordon -> node down and NotReady -> back -> uncordon; and cordon ->
               exporter down (an exporter upgrade) -> back -> uncordon. No fault.
  control      one ordinary fault: Xid 48 with a double-bit ECC error on one GPU, cordoned ten minutes later

and, not a problem of the cluster, the first Alertmanager peer of each pair stalls for two minutes (``PEER_STALL_S``).

At ``END_CLEAR_S`` every node is back to healthy (driver reload, uncordon), so the resolutions are recorded too.
Times are seconds from the scenario's start; ``scale`` shrinks them for a quick check of the plumbing (the
Prometheus `for:` and Alertmanager timers do not shrink, so a scaled run is not a fixture).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NODES = [f"gpu-node-{i:02d}" for i in range(1, 25)]
FLAP_NODE, FLAP_GPU, FLAP_XID = "gpu-node-03", 5, 79
FLAP_WINDOWS = [(120, 270), (540, 660), (900, 990), (1260, 1410), (1680, 1800)]  # (on, off) seconds
STORM_NODES = NODES[7:20]  # gpu-node-08 .. gpu-node-20
STORM_XID, STORM_START_S, STORM_STEP_S = 119, 360, 60
STORM_EXPORTER_DIES = (2, 5, 8, 11)  # indexes into STORM_NODES: exporter down 60 s after the Xid
STORM_CORDONED = (0, 1, 3, 4, 6, 9)  # indexes into STORM_NODES: cordoned 240 s after the Xid
REBOOT_NODE, EXPORTER_UPGRADE_NODE = "gpu-node-22", "gpu-node-23"
CONTROL_NODE, CONTROL_GPU, CONTROL_XID, CONTROL_AT_S = "gpu-node-05", 2, 48, 660
END_CLEAR_S = 2040  # 34 minutes: every node back to healthy
# The first peer of each Alertmanager pair stalls (SIGSTOP, as in a long GC pause or a frozen VM) for two minutes:
# with healthy gossip the second peer only ever takes over the Watchdog, so this is where HA duplicates come from.
PEER_STALL_S = (1320, 1440)


@dataclass(frozen=True, slots=True)
class Step:
    at_s: float
    action: str  # a GPUClusterSim method name, or stall_peer / resume_peer (the harness's)
    kwargs: dict[str, Any]
    problem: str  # the ground-truth problem it belongs to
    note: str


@dataclass(slots=True)
class Problem:
    id: str
    kind: str  # flapping | storm | maintenance | fault
    nodes: list[str]
    page_worthy: bool
    what: str
    detail: dict[str, Any] = field(default_factory=dict)


def _flap() -> list[Step]:
    steps = []
    for n, (on, off) in enumerate(FLAP_WINDOWS, 1):
        steps.append(Step(on, "inject_xid", {"node": FLAP_NODE, "gpu": FLAP_GPU, "code": FLAP_XID}, "flap",
                          f"Xid {FLAP_XID} on GPU {FLAP_GPU} (episode {n})"))
        steps.append(Step(off, "clear", {"node": FLAP_NODE}, "flap", f"driver reload: Xid gauge back to 0 (episode {n})"))
    return steps


def storm_xid(i: int, node: str, xid: int, at: float) -> Step:
    """The i-th node of a storm reports the storm's Xid on GPU i % 8."""
    return Step(at, "inject_xid", {"node": node, "gpu": i % 8, "code": xid}, "storm", f"Xid {xid} on GPU {i % 8}")


def _storm() -> list[Step]:
    steps = []
    for i, node in enumerate(STORM_NODES):
        at = STORM_START_S + i * STORM_STEP_S
        steps.append(storm_xid(i, node, STORM_XID, at))
        if i in STORM_EXPORTER_DIES:
            steps.append(Step(at + 60, "exporter_down", {"node": node, "down": True}, "storm",
                              "dcgm-exporter hangs (its series go stale)"))
        if i in STORM_CORDONED:
            steps.append(Step(at + 240, "cordon", {"node": node, "on": True}, "storm", "operator cordons the node"))
    return steps


def _maintenance() -> list[Step]:
    r, e = REBOOT_NODE, EXPORTER_UPGRADE_NODE
    return [
        Step(180, "cordon", {"node": r, "on": True}, "maintenance-reboot", "cordon before the reboot"),
        Step(300, "node_down", {"node": r, "down": True}, "maintenance-reboot", "reboot: node unreachable"),
        Step(300, "not_ready", {"node": r, "on": True, "status": "unknown"}, "maintenance-reboot", "kubelet silent"),
        Step(780, "node_down", {"node": r, "down": False}, "maintenance-reboot", "node back"),
        Step(780, "not_ready", {"node": r, "on": False}, "maintenance-reboot", "Ready again"),
        Step(960, "cordon", {"node": r, "on": False}, "maintenance-reboot", "uncordon"),
        Step(420, "cordon", {"node": e, "on": True}, "maintenance-exporter", "cordon before the exporter upgrade"),
        Step(480, "exporter_down", {"node": e, "down": True}, "maintenance-exporter", "exporter upgrade: exporter down"),
        Step(960, "exporter_down", {"node": e, "down": False}, "maintenance-exporter", "exporter back"),
        Step(1080, "cordon", {"node": e, "on": False}, "maintenance-exporter", "uncordon"),
    ]


def _control() -> list[Step]:
    n, g = CONTROL_NODE, CONTROL_GPU
    return [
        Step(CONTROL_AT_S, "inject_xid", {"node": n, "gpu": g, "code": CONTROL_XID}, "control", f"Xid {CONTROL_XID}"),
        Step(CONTROL_AT_S, "inject_ecc_dbe", {"node": n, "gpu": g, "count": 2}, "control", "double-bit ECC errors"),
        Step(CONTROL_AT_S + 600, "cordon", {"node": n, "on": True}, "control", "operator cordons the node"),
    ]


def schedule(scale: float = 1.0) -> list[Step]:
    """Every step in time order (stable: same-time steps keep their listed order); the end clears every
    node that had a fault or a cordon."""
    touched = sorted({FLAP_NODE, *STORM_NODES, REBOOT_NODE, EXPORTER_UPGRADE_NODE, CONTROL_NODE})
    end = [Step(END_CLEAR_S, "clear", {"node": n}, "end", "repaired: driver reload, uncordoned") for n in touched]
    stall = [Step(PEER_STALL_S[0], "stall_peer", {"peer": 1}, "alertmanager", "SIGSTOP the first peer of each pair"),
             Step(PEER_STALL_S[1], "resume_peer", {"peer": 1}, "alertmanager", "SIGCONT")]
    steps = _flap() + _storm() + _maintenance() + _control() + stall + end
    steps.sort(key=lambda s: s.at_s)
    return [Step(s.at_s * scale, s.action, s.kwargs, s.problem, s.note) for s in steps]


def problems() -> list[Problem]:
    """The ground truth: one entry per real problem, which nodes, and whether it deserves a page."""
    return [
        Problem("flap", "flapping", [FLAP_NODE], True,
                f"GPU {FLAP_GPU} of {FLAP_NODE} reports Xid {FLAP_XID} in {len(FLAP_WINDOWS)} episodes",
                {"gpu": FLAP_GPU, "xid": FLAP_XID, "windows_s": FLAP_WINDOWS}),
        Problem("storm", "storm", list(STORM_NODES), True,
                f"Xid {STORM_XID} on {len(STORM_NODES)} nodes, one a minute",
                {"xid": STORM_XID, "exporter_dies": [STORM_NODES[i] for i in STORM_EXPORTER_DIES],
                 "cordoned": [STORM_NODES[i] for i in STORM_CORDONED]}),
        Problem("maintenance-reboot", "maintenance", [REBOOT_NODE], False,
                "planned reboot: cordon, node down and NotReady for 8 minutes, back, uncordon"),
        Problem("maintenance-exporter", "maintenance", [EXPORTER_UPGRADE_NODE], False,
                "planned exporter upgrade: cordon, dcgm-exporter down for 8 minutes, back, uncordon"),
        Problem("control", "fault", [CONTROL_NODE], True,
                f"Xid {CONTROL_XID} and double-bit ECC errors on GPU {CONTROL_GPU}, cordoned 10 minutes later",
                {"gpu": CONTROL_GPU, "xid": CONTROL_XID}),
    ]
