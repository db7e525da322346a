"""Faults with a past (``--history``): the cases the history rules (rules/history.yml) are for.

* A GPU that falls off the bus three times in 7 days: Xid 79 on one GPU of one node on days 1, 3 and 5
  (10:00), each answered like any faulty GPU (cordon, reboot, uncordon). The first is a first fault: no
  verdict. The second comes back after the first one's uncordon: its repair did not hold (gpud: a second
  reboot for the same Xid means hardware inspection). The third is the third Xid 79 of the GPU in 7 days:
  replace the GPU.
* A node whose repair did not hold: an Xid 48 (a double-bit ECC error) on day 2, repaired; the same Xid on
  the same GPU 6 hours after the uncordon (past the reopen window: a new incident).

Each is a page-worthy problem of its own with ``expect_verdict`` set (the history rule its incident should
be judged by, "" for none); score.history_outcomes() reports each one's pages and verdict. The nodes are
ones nothing else happens on during the run, drawn from their own seeded generator, so adding the cases
leaves every other problem of the fleet as it was.
"""
from __future__ import annotations

import random

from bench.fleetsim import model as m
from bench.fleetsim.builder import GPU_GONE_WORDS, MEMORY_WORDS, Builder

DAY, HOUR, MIN = 86400.0, 3600.0, 60.0
REPEAT_DAYS = (1, 3, 5)  # the GPU's Xid 79s
REPEAT_VERDICTS = ("", "repair-did-not-hold", "xid79-third-in-7d")
RETURN_AFTER = 6 * HOUR  # the Xid 48 back after the uncordon


def history_cases(b: Builder, seed: int) -> list[m.Problem]:
    """Write the cases onto two quiet nodes; [] when the run is shorter than 6 days."""
    if b.fleet.days < 6:
        return []
    rng = random.Random(f"{seed}/history")
    quiet = [n for n in b.fleet.nodes if not b.busy.get(n.name)]
    if len(quiet) < 2:
        return []
    gpu_node, ecc_node = rng.sample(quiet, 2)
    return repeat_gpu(b, gpu_node, rng.randrange(m.GPUS_PER_NODE)) + \
        repair_not_held(b, ecc_node, rng.randrange(m.GPUS_PER_NODE))


def repeat_gpu(b: Builder, node: m.Node, gpu: int) -> list[m.Problem]:
    out = []
    for day, verdict in zip(REPEAT_DAYS, REPEAT_VERDICTS):
        t = day * DAY + 10 * HOUR
        p = b.problem("faulty_gpu_repeat", [node], t, "critical", True)
        p.names, p.expect_verdict = GPU_GONE_WORDS, verdict

        def fault(at: float, until: float, p: m.Problem = p) -> None:
            b.fact(node, p, m.XID, at, gpu=gpu, value=79)
            b.fact(node, p, m.GPU_GONE, at + b.u(20.0, 90.0), until, gpu=gpu)

        fault(t, b.repair(node, p, t, fault))
        out.append(p)
    return out


def repair_not_held(b: Builder, node: m.Node, gpu: int) -> list[m.Problem]:
    out = []
    t = 2 * DAY + 14 * HOUR
    for verdict in ("", "repair-did-not-hold"):
        p = b.problem("gpu_hbm3_repeat", [node], t, "error", True)
        p.names, p.expect_verdict = ("Xid 48", *MEMORY_WORDS), verdict

        def fault(at: float, until: float, p: m.Problem = p) -> None:
            b.fact(node, p, m.XID, at, gpu=gpu, value=48)
            b.fact(node, p, m.ECC_DBE, at + b.u(0.0, 20.0), gpu=gpu)

        fault(t, t)
        b.repair(node, p, t, fault)
        out.append(p)
        uncordon = max(f.end for f in node.facts if f.problem == p.id and f.kind == m.CORDON)
        t = uncordon + RETURN_AFTER
    return out
