"""What people, and alertd's own approved remediation, do about a fault: as state on the node.

Field facts (docs/fleet-simulation.md, "Operator response"): a single GPU fault gets a cordon within
minutes, then a reboot, or a power-off for a GPU swap, and an uncordon once repaired; an automated
remediator does the same, faster. A driver-rollout storm is answered by cordoning every affected node, most
often after its Xid alerts have resolved, by rolling back and rebooting in batches, and by uncordoning about
two hours after it began. Some repairs fail: the node comes back NotReady, or the fault is back after the
uncordon; the fault is then answered again.

Every fact written here belongs to the fault's problem: the score credits the response's alerts (cordon,
NodeDown, NotReady, exporter down) to the fault they answer. A reboot is what kube-state-metrics and the
scrapes show of one: ``up`` of node-exporter and the kubelet 0 while the node is down, Ready unknown from 40 s
after it went down (node-monitor-grace-period), dcgm-exporter's pod back 30-90 s after the node, the Xid
gauge and volatile counters reset by the driver reload (the predicates read the reset from NodeDown).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Protocol

from bench.fleetsim import model as m

MIN, HOUR = 60.0, 3600.0
GRACE = 40.0  # the node controller marks an unreachable node's Ready Unknown after its grace period

ON_CALL, ALERTD = "on-call", "alertd"


@dataclass(frozen=True, slots=True)
class People:
    """How often each kind of response happens (shares of the single hardware faults)."""

    alertd: float = 0.25        # answered by alertd's own approved remediation (its cordon carries its mark)
    swap: float = 0.3           # powered off for a GPU swap instead of rebooted
    fail_not_ready: float = 0.05   # the repaired node comes back NotReady (driver or fabric manager fails)
    fail_fault_back: float = 0.05  # the fault comes back after the uncordon


class Host(Protocol):
    """What a responder needs of the fleet builder (faults.Builder)."""

    rng: random.Random

    def fact(self, node: m.Node, p: m.Problem, kind: str, start: float, end: float | None = None,
             gpu: int = -1, value: float = 0.0) -> None: ...

    def u(self, lo: float, hi: float) -> float: ...

    def chance(self, share: float) -> bool: ...


def power_cycle(b: Host, node: m.Node, p: m.Problem, at: float, down: float) -> float:
    """The node is unreachable for ``down`` seconds (a reboot, or a power-off for a swap); returns when it is back."""
    back = at + down
    b.fact(node, p, m.NODE_DOWN, at, back)
    b.fact(node, p, m.NOT_READY, at + GRACE, back + b.u(10.0, 30.0))
    b.fact(node, p, m.EXPORTER_DOWN, back, back + b.u(30.0, 90.0))
    return back


def repair_down(b: Host, swap: bool) -> float:
    return b.u(30 * MIN, 2 * HOUR) if swap else b.u(4 * MIN, 10 * MIN)


def respond(b: Host, people: People, node: m.Node, p: m.Problem, start: float,
            again: Callable[[float, float], None]) -> float:
    """Answer one hardware fault that began at ``start``: cordon, reboot or swap, uncordon; sometimes the
    repair fails and the fault is answered again. ``again(t, until)`` writes the fault once more, from ``t``
    to the power-off at ``until``.
    Returns when the node first goes down (the fault's own state ends there)."""
    by_alertd = b.chance(people.alertd)
    p.responder = ALERTD if by_alertd else ON_CALL
    cordon = start + (b.u(1 * MIN, 4 * MIN) if by_alertd else b.u(2 * MIN, 15 * MIN))
    p.acted_at = cordon
    swap = b.chance(people.swap)
    down_at = cordon + b.u(10 * MIN, 40 * MIN)  # drained first
    back = power_cycle(b, node, p, down_at, repair_down(b, swap))
    failure = "not_ready" if b.chance(people.fail_not_ready) else (
        "fault_back" if b.chance(people.fail_fault_back) else "")
    if failure == "not_ready":  # the kubelet is up, the node NotReady, the GPU operator's pods failing
        p.repair_failed_at = back
        stuck = back + b.u(25 * MIN, 60 * MIN)
        b.fact(node, p, m.NOT_READY, back, stuck)
        b.fact(node, p, m.EXPORTER_DOWN, back, stuck)
        back = power_cycle(b, node, p, stuck, repair_down(b, True))
    uncordon = back + b.u(10 * MIN, 60 * MIN)
    b.fact(node, p, m.CORDON, cordon, uncordon, value=1.0 if by_alertd else 0.0)
    if failure == "fault_back":
        t = uncordon + b.u(5 * MIN, 45 * MIN)
        p.repair_failed_at = t
        recordon = t + b.u(2 * MIN, 15 * MIN)
        off = recordon + b.u(10 * MIN, 30 * MIN)
        again(t, off)
        back = power_cycle(b, node, p, off, repair_down(b, True))
        b.fact(node, p, m.CORDON, recordon, back + b.u(10 * MIN, 60 * MIN))
    return down_at


def storm_response(b: Host, nodes: list[m.Node], p: m.Problem, t: float, xid_at: dict[str, float]) -> None:
    """A driver rollout's answer: each node cordoned 15-25 min after the first Xid (once its alert has
    resolved, the 5-minute window of the shipped rule), rolled back and rebooted in batches 45-90 min in,
    uncordoned about two hours after the storm began."""
    order = list(nodes)
    b.rng.shuffle(order)
    size = b.rng.randint(5, 10)
    batches = [order[i:i + size] for i in range(0, len(order), size)]
    step = 45 * MIN / max(1, len(batches))
    for k, batch in enumerate(batches):
        start = t + 45 * MIN + k * step
        for node in batch:
            cordon = t + b.u(15 * MIN, 25 * MIN)
            if cordon < xid_at[node.name] + 5.5 * MIN:
                cordon = xid_at[node.name] + b.u(5.5 * MIN, 10 * MIN)
            back = power_cycle(b, node, p, start + b.u(0.0, 3 * MIN), b.u(4 * MIN, 10 * MIN))
            uncordon = max(t + b.u(110 * MIN, 130 * MIN), back + b.u(10 * MIN, 20 * MIN))
            b.fact(node, p, m.CORDON, cordon, uncordon)
            p.acted_at = cordon if p.acted_at is None else min(p.acted_at, cordon)
