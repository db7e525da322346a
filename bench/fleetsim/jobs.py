"""Training jobs on the fleet and the failures no single GPU alert names (``--jobs``).

Drawn after everything else from a random stream of their own, so the other problems of a seed stay what they
were. Nodes get the topology labels the job rules join from kube_node_labels (rack, zone; the second
cluster's nodes an NVLink clique of 18, as a GB200 NVL72 rack has), and run jobs of 4 to 64 nodes:

* healthy pauses, none of which may raise an alert: a checkpoint every 1-3 hours (every GPU idle 1-15
  minutes, some longer than the 10 minutes a job without network counters waits, one node writing it at
  about 1 GB/s), a data-loading pause every 2-6 hours (every GPU idle 1-6 minutes, the nodes reading), and an
  evaluation every 6-12 hours (3-9 minutes of forward passes: tensor activity stays above 1 %);
* hangs at the Llama 3 rates of the interruptions that raise no Xid (Meta, "The Llama 3 Herd of Models",
  2024, Table 5, of 419 in 54 days on 16,384 GPUs): network switch or cable (35) and NIC (7), an InfiniBand
  port of one node going down and the job stalling seconds later; NCCL watchdog timeouts (7) and silent data
  corruption (6), a stall nothing on any node explains. A stall lasts 15-45 minutes (the job's NCCL timeout,
  or its people restarting it), every rank blocked in a collective: nothing on the wire. A fault during a
  checkpoint or a data-loading pause hangs the job when the pause ends (its next collective), and a hung job
  takes no pause;
* a GPU whose telemetry goes quiet, 40 % of them stalling their job a few minutes later;
* stragglers: one GPU 25-60 % below its job's median in tensor activity, SM clock or power for 30 minutes
  to 3 hours, half of them held back by a hardware slowdown its throttle alert reports (a problem of its own);
* an NVLink clique fault: 9-18 of the 18 nodes of one clique report Xid 74 within 10 minutes.

The rack cooling storm of faults.storms is expected to name its rack (or the clique all its nodes share).
"""
from __future__ import annotations

import random

from bench.fleetsim import model as m
from bench.fleetsim.builder import LLAMA3_GPU_DAYS, MIN, HOUR, Builder, poisson

SIZES = (4, 8, 8, 16, 16, 32, 64)
TEAMS = (("llm-pretrain", "PyTorchJob"), ("ml-research", "JobSet"), ("vision", "PyTorchJob"), ("speech", "MPIJob"))
CLIQUE = 18  # nodes of one NVLink clique (an NVL72 rack: 18 trays of 4 GPUs)
HANGS = {"job_hang_network": 35, "job_hang_nic": 7, "job_hang_nccl": 7, "job_hang_sdc": 6}  # of Llama 3's 419
STRAGGLERS = 20.0  # a month of 2,048 nodes
QUIET = 10.0
SLOW = {"tensor_active": (0.30, 0.48), "sm_clock": (0.55, 0.75), "power": (0.40, 0.55)}


def add_jobs(b: Builder, seed: int) -> list[m.Job]:
    rng = random.Random(f"{seed}/jobs")
    fleet = b.fleet
    topology(fleet)
    jobs = place(fleet, rng)
    for job in jobs:
        pauses(b, rng, job)
    scale = sum(len(j.nodes) for j in jobs) * m.GPUS_PER_NODE * fleet.days / LLAMA3_GPU_DAYS
    by_name = {n.name: n for n in fleet.nodes}
    for cause, count in HANGS.items():
        for _ in range(poisson(rng, count * scale)):
            hang(b, rng, cause, jobs, by_name)
    month = len(fleet.nodes) * fleet.days / (2048 * 30)
    for _ in range(poisson(rng, QUIET * month)):
        quiet(b, rng, jobs, by_name)
    for _ in range(poisson(rng, STRAGGLERS * month)):
        straggler(b, rng, jobs, by_name)
    clique_fault(b, rng)
    for p in fleet.problems.values():
        if p.cause == "storm_rack_cooling":  # named by the narrowest domain all its nodes share
            cliques = {by_name[n].topology.get("clique", "") for n in p.nodes}
            clique = cliques.pop() if len(cliques) == 1 else ""
            p.domain = f"NVLink domain {clique}" if clique else f"rack {by_name[p.nodes[0]].topology['rack']}"
    return jobs


def topology(fleet: m.Fleet) -> None:
    first_b = next((n.index for n in fleet.nodes if n.cluster != fleet.nodes[0].cluster), None)
    for n in fleet.nodes:
        n.topology = {"rack": f"r{n.rack:03d}", "zone": f"{n.cluster}-z{(n.rack // 16) % 4}"}
        if first_b is not None and n.index >= first_b:
            n.topology["clique"] = f"c{(n.index - first_b) // CLIQUE:03d}"


def place(fleet: m.Fleet, rng: random.Random) -> list[m.Job]:
    """Jobs over runs of neighbouring nodes; about one node in seven runs none."""
    jobs: list[m.Job] = []
    i = 0
    nodes = fleet.nodes
    while i < len(nodes):
        size = rng.choice(SIZES)
        group = [n for n in nodes[i:i + size] if n.cluster == nodes[i].cluster]
        i += len(group)
        if rng.random() < 0.15 or len(group) < 4:
            continue
        team, kind = rng.choice(TEAMS)
        job = m.Job(team, kind, f"{team.split('-')[0]}-{len(jobs):03d}", [n.name for n in group])
        for n in group:
            n.job = job
        jobs.append(job)
    return jobs


PAUSES = (  # kind, every (hours), length (minutes)
    (m.CHECKPOINT, (1, 3), (1, 15)),
    (m.DATA_LOADING, (2, 6), (1, 6)),
    (m.EVALUATION, (6, 12), (3, 9)),
)


def pauses(b: Builder, rng: random.Random, job: m.Job) -> None:
    p = b.problem("healthy_pauses", [], 0.0, "info", False)
    p.job = f"{job.namespace}/{job.name}"
    for kind, (every_lo, every_hi), (lo, hi) in PAUSES:
        every = rng.uniform(every_lo, every_hi) * HOUR
        t = rng.uniform(0, every)
        while t < b.fleet.horizon:
            job.pauses.append(m.Pause(t, t + rng.uniform(lo, hi) * MIN, p.id, kind))
            t += every * rng.uniform(0.9, 1.1)
    job.pauses.sort(key=lambda q: (q.start, q.end))


def _free(b: Builder, rng: random.Random, jobs: list[m.Job], span: float) -> tuple[float, m.Job] | None:
    """A time, and a job (by its size) none of whose nodes has anything going on from an hour before it to two
    hours after ``span``."""
    t = rng.uniform(HOUR, b.fleet.horizon - 8 * HOUR)
    for _ in range(100):
        job = rng.choices(jobs, weights=[len(j.nodes) for j in jobs])[0]
        if all(e + HOUR < t or s > t + span + 2 * HOUR for n in job.nodes for s, e in b.busy.get(n, [])):
            return t, job
    return None


def _stall(b: Builder, rng: random.Random, p: m.Problem, job: m.Job, by_name: dict[str, m.Node], at: float) -> None:
    while (q := next((q for q in job.pauses if q.idle and q.start <= at < q.end), None)) is not None:
        at = q.end  # the pause goes on to its end; the job hangs in its first collective after it
    end = at + rng.uniform(15 * MIN, 45 * MIN)
    job.pauses = [q for q in job.pauses if q.end <= at or q.start >= end]  # a hung job takes no pause
    for name in job.nodes:
        b.fact(by_name[name], p, m.STALL, at, end)
    p.job, p.stalled = f"{job.namespace}/{job.name}", at


def hang(b: Builder, rng: random.Random, cause: str, jobs: list[m.Job], by_name: dict[str, m.Node]) -> None:
    found = _free(b, rng, jobs, 4 * HOUR)
    if found is None:
        return
    t, job = found
    culprit = by_name[rng.choice(job.nodes)] if cause in ("job_hang_network", "job_hang_nic") else None
    p = b.problem(cause, [by_name[n] for n in job.nodes], t, "critical", True)
    p.names = ("stalled",)
    if culprit is not None:
        p.culprit = culprit.name
        down = rng.uniform(20 * MIN, 2 * HOUR) if cause == "job_hang_network" else rng.uniform(HOUR, 4 * HOUR)
        b.fact(culprit, p, m.IB_DOWN, t, t + down, value=rng.randrange(8))
    _stall(b, rng, p, job, by_name, t + rng.uniform(5.0, 60.0))


def quiet(b: Builder, rng: random.Random, jobs: list[m.Job], by_name: dict[str, m.Node]) -> None:
    found = _free(b, rng, jobs, 2 * HOUR)
    if found is None:
        return
    t, job = found
    node = by_name[rng.choice(job.nodes)]
    p = b.problem("gpu_quiet", [node], t, "warning", False)
    gpu = rng.randrange(m.GPUS_PER_NODE)
    b.fact(node, p, m.QUIET, t, t + rng.uniform(15 * MIN, HOUR), gpu=gpu)
    if rng.random() < 0.4:
        h = b.problem("job_hang_quiet_gpu", [by_name[n] for n in job.nodes], t, "critical", True)
        h.names, h.culprit = ("stalled",), node.name
        _stall(b, rng, h, job, by_name, t + rng.uniform(1 * MIN, 4 * MIN))


def straggler(b: Builder, rng: random.Random, jobs: list[m.Job], by_name: dict[str, m.Node]) -> None:
    found = _free(b, rng, jobs, 4 * HOUR)
    if found is None:
        return
    t, job = found
    node = by_name[rng.choice(job.nodes)]
    gpu = rng.randrange(m.GPUS_PER_NODE)
    metric = rng.choice(("tensor_active", "tensor_active", "sm_clock", "power"))
    end = t + rng.uniform(30 * MIN, 3 * HOUR)
    p = b.problem("straggler", [node], t, "warning", False)
    p.job, p.names = f"{job.namespace}/{job.name}", ("slows",)
    b.fact(node, p, m.SLOW, t, end, gpu=gpu, value=rng.uniform(*SLOW[metric]))
    node.facts[-1].label = metric
    if rng.random() < 0.5:  # held back by the hardware: its throttle alert says why (0x8: HW slowdown)
        q = b.problem("straggler_throttle", [node], t, "warning", False)
        b.fact(node, q, m.THROTTLE, t, end, gpu=gpu, value=8)


def clique_fault(b: Builder, rng: random.Random) -> None:
    cliques: dict[str, list[m.Node]] = {}
    for n in b.fleet.nodes:
        if "clique" in n.topology:
            cliques.setdefault(n.topology["clique"], []).append(n)
    full = sorted(c for c, members in cliques.items() if len(members) == CLIQUE)
    if not full:
        return
    clique = rng.choice(full)
    t = rng.uniform(HOUR, b.fleet.horizon - 8 * HOUR)
    hit = rng.sample(cliques[clique], rng.randint(CLIQUE // 2, CLIQUE))
    p = b.problem("clique_nvlink", hit, t, "error", True, storm=True)
    p.domain, p.names = f"NVLink domain {clique}", ("NVLink", "Xid 74")
    for node in hit:
        b.fact(node, p, m.XID, t + rng.uniform(0.0, 10 * MIN), gpu=rng.randrange(m.GPUS_PER_NODE), value=74)
