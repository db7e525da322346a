"""The fleet builder every kind of problem is drawn with: its clock units, its rates, the words a
page-worthy problem's title must keep, and the Builder that writes problems and their facts onto nodes.

Kept apart from faults.py so that the modules adding kinds of problems (faults, history, jobs) all import it,
and faults.py imports them in turn, with no import running back up.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable

from bench.fleetsim import model as m
from bench.fleetsim.response import People, respond

LLAMA3_INTERRUPTIONS = 419
LLAMA3_GPU_DAYS = 54 * 16384

# What the title of a page-worthy problem's incident must still say at its end: its cause, in any of the words
# alertd's shipped rules title it with (the Xid, the memory error, the node that is down).
GPU_GONE_WORDS = ("Xid 79", "fallen off the bus", "fewer GPUs", "GPU missing")
MEMORY_WORDS = ("ECC", "row remap")
NAMES: dict[str, tuple[str, ...]] = {
    "faulty_gpu": GPU_GONE_WORDS, "faulty_gpu_found_in_maintenance": GPU_GONE_WORDS,
    "faulty_gpu_during_storm": GPU_GONE_WORDS,
    "gpu_hbm3": ("Xid 48", *MEMORY_WORDS), "gpu_hbm3_during_storm": ("Xid 48", *MEMORY_WORDS),
    "gpu_sram": ("Xid 95", *MEMORY_WORDS), "gpu_sram_during_storm": ("Xid 95", *MEMORY_WORDS),
    "flap_xid": ("Xid 48", "Xid 63", *MEMORY_WORDS),
    "gpu_gsp": ("Xid 119", "Xid 120", "GSP"), "storm_driver_rollout": ("Xid 119", "GSP"),
    "network": ("Node down", "NotReady", "not Ready"), "nic": ("Node down", "NotReady", "not Ready"),
}

MIN, HOUR = 60.0, 3600.0


@dataclass(frozen=True, slots=True)
class Rates:
    """Events per simulated month of 2,048 nodes, scaled linearly with nodes and days."""

    maintenance: float = 90.0     # planned: cordon, reboot, uncordon
    found_in_maintenance: float = 0.1  # share of maintenances that find a faulty GPU after the reboot
    flaps: float = 24.0           # a GPU whose throttling or NVLink errors come and go
    exporter_hangs: float = 30.0  # dcgm-exporter stops answering on one node
    short_xid: float = 0.25       # share of Xid 48/95 faults whose alert fires only minutes (no ECC, no remap)
    exporter_hangs_with_fault: float = 0.2  # share of faulty-GPU faults whose exporter hangs right after the Xid
    people: People | None = None  # operator response (response.py); None: the fixed repair of Builder.repair
    history: bool = False  # add the faults with a past (history.py): a GPU's third Xid 79, a repair that did not hold
    jobs: bool = False  # add training jobs (jobs.py): hangs, stragglers, quiet GPUs, a clique fault, healthy pauses


class Builder:
    """Draws problems and writes their facts onto nodes, keeping nodes free of overlapping problems."""

    def __init__(self, fleet: m.Fleet, rng: random.Random, rates: Rates):
        self.fleet, self.rng, self.rates = fleet, rng, rates
        self.busy: dict[str, list[tuple[float, float]]] = {}
        self.counter = 0

    # ----- bookkeeping -----

    def problem(self, cause: str, nodes: list[m.Node], start: float, severity: str, page_worthy: bool,
                storm: bool = False) -> m.Problem:
        self.counter += 1
        p = m.Problem(f"P{self.counter:05d}-{cause}", cause, [n.name for n in nodes], start, start,
                      page_worthy, severity, storm, names=NAMES.get(cause, ()))
        self.fleet.problems[p.id] = p
        return p

    def fact(self, node: m.Node, p: m.Problem, kind: str, start: float, end: float | None = None, gpu: int = -1,
             value: float = 0.0) -> None:
        end = start if end is None else end
        node.facts.append(m.Fact(kind, start, end, p.id, gpu, value))
        p.end = max(p.end, end)
        self.busy.setdefault(node.name, []).append((start, end))

    def free_node(self, start: float, span: float, pool: list[m.Node] | None = None) -> m.Node:
        """A node with nothing going on from an hour before ``start`` to two hours after ``start + span``."""
        pool = pool or self.fleet.nodes
        for _ in range(200):
            node = self.rng.choice(pool)
            if all(e + HOUR < start or s > start + span + 2 * HOUR for s, e in self.busy.get(node.name, [])):
                return node
        return self.rng.choice(pool)

    def when(self, margin: float = 8 * HOUR) -> float:
        return self.rng.uniform(HOUR, self.fleet.horizon - margin)

    def u(self, lo: float, hi: float) -> float:
        return self.rng.uniform(lo, hi)

    def chance(self, share: float) -> bool:
        return self.rng.random() < share

    # ----- what people do -----

    def reboot(self, node: m.Node, p: m.Problem, at: float) -> float:
        """The node goes down and comes back; the exporter pod starts a little later. Returns when it is back."""
        back = at + self.u(4 * MIN, 10 * MIN)
        self.fact(node, p, m.NODE_DOWN, at, back)
        self.fact(node, p, m.NOT_READY, at + 40.0, back + self.u(10.0, 30.0))
        self.fact(node, p, m.EXPORTER_DOWN, back, back + self.u(30.0, 90.0))
        return back

    def repair(self, node: m.Node, p: m.Problem, start: float,
               again: Callable[[float, float], None] = lambda t, until: None) -> float:
        """The operator's answer to a hardware fault: cordon after minutes, drain, reboot, uncordon. With
        ``rates.people``, response.respond's answers instead (``again`` writes the fault once more when the
        repair fails). Returns when the node goes down."""
        if self.rates.people is not None:
            return respond(self, self.rates.people, node, p, start, again)
        cordon = start + self.u(5 * MIN, 30 * MIN)
        reboot = cordon + self.u(15 * MIN, 60 * MIN)
        back = self.reboot(node, p, reboot)
        uncordon = back + self.u(10 * MIN, 60 * MIN)
        self.fact(node, p, m.CORDON, cordon, uncordon)
        p.acted_at = cordon
        return reboot


def poisson(rng: random.Random, lam: float) -> int:
    """Knuth's method in pieces (lam may be in the hundreds)."""
    n = 0
    while lam > 0:
        step = min(lam, 30.0)
        lam -= step
        limit, k, prod = math.exp(-step), 0, rng.random()
        while prod > limit:
            k += 1
            prod *= rng.random()
        n += k
    return n
