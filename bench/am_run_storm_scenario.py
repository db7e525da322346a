"""A driver-rollout storm and the people who answer it: the second scenario of bench/record_am_run.py.

Field facts (docs/fleet-simulation.md, "Operator response"): a Xid storm from a driver rollout is answered by
cordoning every affected node after its Xid alerts have resolved, rolling back and rebooting in batches, and
uncordoning much later; a single GPU fault gets a cordon within minutes, then a reboot or a power-off for a
swap; alertd's own remediation does the same, faster. The run keeps the order and the overlaps of those
steps and compresses the long waits (rollback 45-90 min in, uncordon two hours later) so the whole run fits
in ~50 minutes; the Prometheus `for:` durations and Alertmanager's timers are never compressed.

  storm           Xid 119 on 12 nodes, one every 30 s from t=2m; every node cordoned 15-18.7 min after the first
                  Xid (each one >= 9 minutes after its own Xid, so its alert has resolved); rollback reboots in
                  three batches of four, 25, 28 and 31 min after the first Xid (node down and NotReady for
                  4 minutes, the driver reloaded); uncordoned 38-40 min after the first Xid
  fault-back      Xid 48 and double-bit ECC errors; cordoned 3 minutes later, rebooted, uncordoned; the same
                  fault is back 2 minutes after the uncordon (a failed repair), cordoned again, powered off for
                  a swap
  still-notready  Xid 95 and double-bit ECC errors; cordoned 3 minutes later, rebooted; the node comes back but
                  stays NotReady for 15 minutes (a failed repair), then Ready, uncordoned
  unrelated       Xid 79 and the GPU falls off the bus on a node outside the storm, during the rollback;
                  alertd's own remediation cordons it a minute later (its mark and taint), powered off for a swap
  maintenance     planned reboot: cordon, node down and NotReady, back, uncordon. No fault.

and the first Alertmanager peer of each pair stalls for two minutes during the rollback (HA duplicates).
"""
from __future__ import annotations

from bench.am_run_scenario import Problem, Step, storm_xid

NODES = [f"gpu-node-{i:02d}" for i in range(1, 25)]
STORM_NODES = NODES[7:19]  # gpu-node-08 .. gpu-node-19
STORM_XID, STORM_START_S, STORM_STEP_S = 119, 120, 30
CORDON_AFTER_S, CORDON_STEP_S = 900, 20  # first cordon 15 min after the first Xid, then one every 20 s
BATCHES_AFTER_S, BATCH_SIZE = (1500, 1680, 1860), 4  # rollback reboots, after the first Xid
REBOOT_DOWN_S = 240
UNCORDON_AFTER_S, UNCORDON_STEP_S = 2280, 10
FAULT_BACK_NODE, FAULT_BACK_GPU, FAULT_BACK_XID, FAULT_BACK_AT_S = "gpu-node-05", 3, 48, 300
NOTREADY_NODE, NOTREADY_GPU, NOTREADY_XID, NOTREADY_AT_S = "gpu-node-22", 6, 95, 600
NOTREADY_FOR_S = 900  # the repaired node stays NotReady this long after it is back
UNRELATED_NODE, UNRELATED_GPU, UNRELATED_AT_S = "gpu-node-02", 1, 1700
UNRELATED_MARK = "alertd-remediation"  # the value of alertd's taint (the incident id on a real site)
MAINT_NODE, MAINT_AT_S = "gpu-node-23", 480
END_CLEAR_S = 2640  # 44 minutes: every node back to healthy
PEER_STALL_S = (1860, 1980)


def _reboot(node: str, at: float, problem: str, why: str, ready_after: float = 0.0) -> list[Step]:
    """Node unreachable (kubelet silent) for REBOOT_DOWN_S; back with the driver reloaded; Ready at once or,
    for a repair that fails, ``ready_after`` seconds later."""
    back = at + REBOOT_DOWN_S
    steps = [Step(at, "node_down", {"node": node, "down": True}, problem, f"{why}: node unreachable"),
             Step(at, "not_ready", {"node": node, "on": True, "status": "unknown"}, problem, "kubelet silent"),
             Step(back, "node_down", {"node": node, "down": False}, problem, "node back"),
             Step(back, "reload_driver", {"node": node}, problem, "driver loaded: Xid gauge 0")]
    if ready_after:
        steps.append(Step(back, "not_ready", {"node": node, "on": True, "status": "false"}, problem,
                          "kubelet up but the node reports NotReady: the repair failed"))
    steps.append(Step(back + ready_after, "not_ready", {"node": node, "on": False}, problem, "Ready again"))
    return steps


def _storm() -> list[Step]:
    steps = []
    for i, node in enumerate(STORM_NODES):
        steps.append(storm_xid(i, node, STORM_XID, STORM_START_S + i * STORM_STEP_S))
        steps.append(Step(STORM_START_S + CORDON_AFTER_S + i * CORDON_STEP_S, "cordon", {"node": node, "on": True},
                          "storm", "on-call cordons the node (its Xid alert has resolved)"))
        batch = i // BATCH_SIZE
        steps += _reboot(node, STORM_START_S + BATCHES_AFTER_S[batch], "storm", f"rollback reboot, batch {batch + 1}")
        steps.append(Step(STORM_START_S + UNCORDON_AFTER_S + i * UNCORDON_STEP_S, "cordon", {"node": node, "on": False},
                          "storm", "uncordon after the rollback"))
    return steps


def _fault(node: str, gpu: int, xid: int, at: float, problem: str, note: str = "") -> list[Step]:
    return [Step(at, "inject_xid", {"node": node, "gpu": gpu, "code": xid}, problem, f"Xid {xid}{note}"),
            Step(at, "inject_ecc_dbe", {"node": node, "gpu": gpu, "count": 2}, problem, f"double-bit ECC errors{note}")]


def _fault_back() -> list[Step]:
    n, t = FAULT_BACK_NODE, FAULT_BACK_AT_S
    return [*_fault(n, FAULT_BACK_GPU, FAULT_BACK_XID, t, "fault-back"),
            Step(t + 180, "cordon", {"node": n, "on": True}, "fault-back", "on-call cordons the node"),
            *_reboot(n, t + 600, "fault-back", "repair reboot"),
            Step(t + 1200, "cordon", {"node": n, "on": False}, "fault-back", "uncordon after the repair"),
            *_fault(n, FAULT_BACK_GPU, FAULT_BACK_XID, t + 1320, "fault-back", " again: the repair failed"),
            Step(t + 1500, "cordon", {"node": n, "on": True}, "fault-back", "on-call cordons the node again"),
            Step(t + 1800, "node_down", {"node": n, "down": True}, "fault-back", "powered off for a GPU swap"),
            Step(t + 1800, "not_ready", {"node": n, "on": True, "status": "unknown"}, "fault-back", "kubelet silent")]


def _still_notready() -> list[Step]:
    n, t = NOTREADY_NODE, NOTREADY_AT_S
    return [*_fault(n, NOTREADY_GPU, NOTREADY_XID, t, "still-notready"),
            Step(t + 180, "cordon", {"node": n, "on": True}, "still-notready", "on-call cordons the node"),
            *_reboot(n, t + 600, "still-notready", "repair reboot", ready_after=NOTREADY_FOR_S),
            Step(t + 600 + REBOOT_DOWN_S + NOTREADY_FOR_S + 180, "cordon", {"node": n, "on": False},
                 "still-notready", "uncordon once Ready")]


def _unrelated() -> list[Step]:
    n, t = UNRELATED_NODE, UNRELATED_AT_S
    return [Step(t, "inject_xid", {"node": n, "gpu": UNRELATED_GPU, "code": 79}, "unrelated", "Xid 79"),
            Step(t + 30, "gpu_lost", {"node": n, "gpu": UNRELATED_GPU, "lost": True}, "unrelated",
                 "the GPU falls off the bus"),
            Step(t + 90, "cordon", {"node": n, "on": True, "mark": UNRELATED_MARK}, "unrelated",
                 "alertd's remediation cordons the node (its mark and taint)"),
            Step(t + 600, "node_down", {"node": n, "down": True}, "unrelated", "powered off for a GPU swap"),
            Step(t + 600, "not_ready", {"node": n, "on": True, "status": "unknown"}, "unrelated", "kubelet silent")]


def _maintenance() -> list[Step]:
    n, t = MAINT_NODE, MAINT_AT_S
    return [Step(t, "cordon", {"node": n, "on": True}, "maintenance", "cordon before the reboot"),
            *_reboot(n, t + 300, "maintenance", "planned reboot"),
            Step(t + 300 + REBOOT_DOWN_S + 300, "cordon", {"node": n, "on": False}, "maintenance", "uncordon")]


def schedule(scale: float = 1.0) -> list[Step]:
    """Every step in time order (same-time steps keep their listed order); the end clears every touched node."""
    touched = sorted({*STORM_NODES, FAULT_BACK_NODE, NOTREADY_NODE, UNRELATED_NODE, MAINT_NODE})
    end = [Step(END_CLEAR_S, "clear", {"node": n}, "end", "repaired or swapped: healthy, uncordoned") for n in touched]
    stall = [Step(PEER_STALL_S[0], "stall_peer", {"peer": 1}, "alertmanager", "SIGSTOP the first peer of each pair"),
             Step(PEER_STALL_S[1], "resume_peer", {"peer": 1}, "alertmanager", "SIGCONT")]
    steps = _storm() + _fault_back() + _still_notready() + _unrelated() + _maintenance() + stall + end
    steps.sort(key=lambda s: s.at_s)
    return [Step(s.at_s * scale, s.action, s.kwargs, s.problem, s.note) for s in steps]


def problems() -> list[Problem]:
    """The ground truth. ``repair_failed_s``: when a repair is known to have failed (the fault back after the
    uncordon; the node back from its reboot but NotReady), the one moment that deserves a second page."""
    storm_reboots = {n: STORM_START_S + BATCHES_AFTER_S[i // BATCH_SIZE] for i, n in enumerate(STORM_NODES)}
    return [
        Problem("storm", "storm", list(STORM_NODES), True,
                f"Xid {STORM_XID} on {len(STORM_NODES)} nodes (a driver rollout), cordoned after the alerts "
                "resolved, rebooted in three batches, uncordoned",
                {"xid": STORM_XID, "cause": f"Xid {STORM_XID}", "reboots_s": storm_reboots}),
        Problem("fault-back", "failed-repair", [FAULT_BACK_NODE], True,
                f"Xid {FAULT_BACK_XID} and double-bit ECC errors; cordon, reboot, uncordon; the fault comes back",
                {"xid": FAULT_BACK_XID, "cause": f"Xid {FAULT_BACK_XID}",
                 "repair_failed_s": FAULT_BACK_AT_S + 1320}),
        Problem("still-notready", "failed-repair", [NOTREADY_NODE], True,
                f"Xid {NOTREADY_XID} and double-bit ECC errors; cordon, reboot; NotReady for "
                f"{NOTREADY_FOR_S // 60} minutes after it is back",
                {"xid": NOTREADY_XID, "cause": f"Xid {NOTREADY_XID}",
                 "repair_failed_s": NOTREADY_AT_S + 600 + REBOOT_DOWN_S}),
        Problem("unrelated", "fault", [UNRELATED_NODE], True,
                "Xid 79, the GPU falls off the bus during the storm's rollback; alertd's remediation cordons it",
                {"xid": 79, "cause": "Xid 79", "cordoned_by": "alertd"}),
        Problem("maintenance", "maintenance", [MAINT_NODE], False, "planned reboot: cordon, reboot, uncordon"),
    ]
