"""Faults, repairs, maintenance, flaps and storms as state on the fleet's nodes.

The mix of unplanned faults follows the Llama 3 405B pre-training failure
table (Meta, "The Llama 3 Herd of Models", 2024, Table 5: 419 unexpected
interruptions in 54 days on 16,384 H100 GPUs). The rate is scaled to the
simulated fleet (GPUs x days); each cause becomes what dcgm-exporter and
kube-state-metrics would show (see docs/fleet-simulation.md for the mapping).
Causes with no telemetry (silent data corruption, NCCL watchdog hangs) are
drawn too, so the mix stays true, but make no state and are not scored.
"""
from __future__ import annotations

import random

from bench.fleetsim import model as m
from bench.fleetsim.builder import HOUR, LLAMA3_GPU_DAYS, LLAMA3_INTERRUPTIONS, MIN, Builder, Rates, poisson
from bench.fleetsim.history import history_cases
from bench.fleetsim.jobs import add_jobs
from bench.fleetsim.response import storm_response

# cause: (share of interruptions in %, severity the site intends, page-worthy)
MIX: dict[str, tuple[float, str, bool]] = {
    "faulty_gpu": (30.1, "critical", True),          # Xid 79, the GPU falls off the bus
    "gpu_hbm3": (17.2, "error", True),               # Xid 48, ECC DBE, row remap pending / failure
    "software_bug": (12.9, "warning", False),        # Xid 13 / 43: the application's fault
    "network": (8.4, "critical", True),              # switch or cable: the node is unreachable for a while
    "host_maintenance": (7.6, "info", False),        # unplanned but orderly: cordon, reboot, uncordon
    "gpu_sram": (4.5, "error", True),                # Xid 95 and ECC DBE
    "gpu_gsp": (4.1, "error", True),                 # Xid 119 (GSP RPC timeout), sometimes Xid 120
    "nic": (1.7, "critical", True),                  # the node drops off until repaired
    "nccl_watchdog": (1.7, "info", False),           # no telemetry
    "silent_data_corruption": (1.6, "info", False),  # no telemetry
    "gpu_thermal_interface": (1.4, "warning", False),  # throttling and high temperature on one GPU
}
UNOBSERVED = frozenset({"nccl_watchdog", "silent_data_corruption"})
# A storm is one from this many nodes (rules/correlation.yml, correlation.storm.min_nodes; the thermal event's
# error step asks no more): a storm page-worthy by its extent alone is prompt when it pages within 5 minutes
# of alerts of this many of its nodes reaching alertd. tests/unit/test_fleetsim_intent.py checks it.
STORM_NODES = 5

# ----- unplanned faults (the Llama 3 mix) -----


def faulty_gpu(b: Builder, p: m.Problem, node: m.Node, t: float) -> None:
    gpu = b.rng.randrange(m.GPUS_PER_NODE)
    hangs: list[bool] = []  # drawn when first needed, so the fixed repair's draws keep their order

    def fault(at: float, until: float) -> None:
        b.fact(node, p, m.XID, at, gpu=gpu, value=79)
        if not hangs:
            hangs.append(b.rng.random() < b.rates.exporter_hangs_with_fault)
        if hangs[0]:
            b.fact(node, p, m.EXPORTER_DOWN, at + b.u(30.0, 150.0), until)  # the hard case: the Xid series go stale
        else:
            b.fact(node, p, m.GPU_GONE, at + b.u(20.0, 90.0), until, gpu=gpu)

    fault(t, b.repair(node, p, t, fault))


def gpu_memory(b: Builder, p: m.Problem, node: m.Node, t: float, xid: int) -> None:
    gpu = b.rng.randrange(m.GPUS_PER_NODE)
    ecc = b.rng.random() >= b.rates.short_xid

    def again(at: float, until: float) -> None:
        b.fact(node, p, m.XID, at, gpu=gpu, value=xid)
        if ecc:
            b.fact(node, p, m.ECC_DBE, at + b.u(0.0, 20.0), gpu=gpu)

    again(t, t)
    reboot = b.repair(node, p, t, again)
    if xid == 48 and b.rng.random() < 0.6:
        kind = m.REMAP_FAIL if b.rng.random() < 0.25 else m.REMAP_PENDING
        b.fact(node, p, kind, t + b.u(5.0, 60.0), reboot, gpu=gpu)
        if kind == m.REMAP_FAIL:
            p.severity = "critical"


def gpu_gsp(b: Builder, p: m.Problem, node: m.Node, t: float) -> None:
    gpu = b.rng.randrange(m.GPUS_PER_NODE)
    b.fact(node, p, m.XID, t, gpu=gpu, value=119)
    if b.rng.random() < 0.4:
        b.fact(node, p, m.XID, t + b.u(MIN, 10 * MIN), gpu=gpu, value=120)
    b.repair(node, p, t, lambda at, until: b.fact(node, p, m.XID, at, gpu=gpu, value=119))


def software_bug(b: Builder, p: m.Problem, node: m.Node, t: float) -> None:
    code = 13 if b.rng.random() < 0.6 else 43
    for gpu in b.rng.sample(range(m.GPUS_PER_NODE), b.rng.choice((1, 2, 8))):
        b.fact(node, p, m.XID, t + b.u(0.0, 5.0), gpu=gpu, value=code)


def network(b: Builder, p: m.Problem, node: m.Node, t: float, long: bool) -> None:
    """Unreachable: Prometheus cannot scrape the node, the kubelet stops reporting Ready."""
    back = t + (b.u(30 * MIN, 2 * HOUR) if long else b.u(5 * MIN, 40 * MIN))
    b.fact(node, p, m.NODE_DOWN, t, back)
    b.fact(node, p, m.NOT_READY, t + 40.0, back + b.u(10.0, 30.0))
    if long:  # the NIC is replaced: cordoned while it is out, uncordoned after
        p.acted_at = t + b.u(10 * MIN, 30 * MIN)
        b.fact(node, p, m.CORDON, p.acted_at, back + b.u(10 * MIN, 30 * MIN))


def maintenance(b: Builder, p: m.Problem, node: m.Node, t: float) -> float:
    """Planned: cordon, drain, reboot, uncordon. Returns when the node is back."""
    reboot = t + b.u(10 * MIN, 40 * MIN)
    back = b.reboot(node, p, reboot)
    b.fact(node, p, m.CORDON, t, back + b.u(5 * MIN, 30 * MIN))
    return back


def thermal_interface(b: Builder, p: m.Problem, node: m.Node, t: float) -> None:
    gpu = b.rng.randrange(m.GPUS_PER_NODE)
    end = t + b.u(20 * MIN, 2 * HOUR)
    b.fact(node, p, m.THROTTLE, t, end, gpu=gpu, value=b.rng.choice((32, 64)))
    b.fact(node, p, m.HOT, t + b.u(0.0, 5 * MIN), end, gpu=gpu, value=b.u(86, 92))


def unplanned(b: Builder) -> None:
    gpu_days = len(b.fleet.nodes) * m.GPUS_PER_NODE * b.fleet.days
    expected = LLAMA3_INTERRUPTIONS * gpu_days / LLAMA3_GPU_DAYS
    total = sum(share for share, _, _ in MIX.values())
    for cause, (share, severity, worthy) in MIX.items():
        count = poisson(b.rng, expected * share / total)
        for _ in range(count):
            t = b.when()
            node = b.free_node(t, 3 * HOUR if b.rates.people is None else 6 * HOUR)
            p = b.problem(cause, [node], t, severity, worthy)
            if cause == "faulty_gpu":
                faulty_gpu(b, p, node, t)
            elif cause == "gpu_hbm3":
                gpu_memory(b, p, node, t, 48)
            elif cause == "gpu_sram":
                gpu_memory(b, p, node, t, 95)
            elif cause == "gpu_gsp":
                gpu_gsp(b, p, node, t)
            elif cause == "software_bug":
                software_bug(b, p, node, t)
            elif cause in ("network", "nic"):
                network(b, p, node, t, long=cause == "nic")
            elif cause == "host_maintenance":
                maintenance(b, p, node, t)
            elif cause == "gpu_thermal_interface":
                thermal_interface(b, p, node, t)
            # nccl_watchdog, silent_data_corruption: nothing the exporters show


# ----- planned work, flapping, hung exporters -----


def planned(b: Builder, rates: Rates, scale: float) -> None:
    for _ in range(poisson(b.rng, rates.maintenance * scale)):
        t = b.when()
        node = b.free_node(t, 2 * HOUR)
        p = b.problem("maintenance", [node], t, "info", False)
        back = maintenance(b, p, node, t)
        if b.rng.random() < rates.found_in_maintenance:  # the reboot finds a GPU that does not come back
            found = back + b.u(2 * MIN, 10 * MIN)
            q = b.problem("faulty_gpu_found_in_maintenance", [node], found, "critical", True)
            gpu = b.rng.randrange(m.GPUS_PER_NODE)
            b.fact(node, q, m.XID, found, gpu=gpu, value=79)
            b.fact(node, q, m.GPU_GONE, found + b.u(20.0, 90.0), found + b.u(HOUR, 3 * HOUR), gpu=gpu)
    for _ in range(poisson(b.rng, rates.flaps * scale)):
        t = b.when()
        flap(b, b.rng.choice(("flap_thermal", "flap_nvlink", "flap_xid")), t, b.free_node(t, 4 * HOUR))
    for _ in range(poisson(b.rng, rates.exporter_hangs * scale)):
        t = b.when()
        node = b.free_node(t, HOUR)
        p = b.problem("exporter_hang", [node], t, "warning", False)
        b.fact(node, p, m.EXPORTER_DOWN, t, t + b.u(8 * MIN, 60 * MIN))


def flap(b: Builder, cause: str, t: float, node: m.Node) -> None:
    """A GPU whose trouble comes and goes, nobody acting on it: 3-8 spells.

    Thermal: harmful clock-event reasons for 3-10 min, 2-15 min apart
    (warning). NVLink: recovery errors 6-30 min apart (the rule says
    warning). Xid: a failing HBM row, Xid 48 then Xid 63 (row remapped),
    again and again, 10-40 min apart (error: page-worthy, once).
    """
    severity = {"flap_thermal": "warning", "flap_nvlink": "warning", "flap_xid": "error"}[cause]
    p = b.problem(cause, [node], t, severity, severity == "error")
    gpu, at = b.rng.randrange(m.GPUS_PER_NODE), t
    for i in range(b.rng.randint(3, 8)):
        if cause == "flap_nvlink":
            b.fact(node, p, m.NVLINK, at, gpu=gpu, value=1)
            at += b.u(6 * MIN, 30 * MIN)
        elif cause == "flap_xid":
            b.fact(node, p, m.XID, at, gpu=gpu, value=48 if i % 2 == 0 else 63)
            at += b.u(10 * MIN, 40 * MIN)
        else:
            end = at + b.u(3 * MIN, 10 * MIN)
            b.fact(node, p, m.THROTTLE, at, end, gpu=gpu, value=32)
            at = end + b.u(2 * MIN, 15 * MIN)


# ----- storms -----


def storms(b: Builder, day_hours: list[float]) -> None:
    """Three storms on three different working days: a driver rollout, a rack's cooling, an exporter rollout."""
    nodes = b.fleet.nodes
    cluster = [n for n in nodes if n.cluster == nodes[0].cluster]
    t = day_hours[0]
    span = HOUR if b.rates.people is None else 3 * HOUR  # with people: until the last uncordon
    picked = [b.free_node(t, span, cluster) for _ in range(min(40, len(cluster)))]
    picked = list({n.name: n for n in picked}.values())
    p = b.problem("storm_driver_rollout", picked, t, "error", True, storm=True)
    first: dict[str, float] = {}
    for node in picked:
        at = first[node.name] = t + b.u(0.0, 15 * MIN)
        for gpu in b.rng.sample(range(m.GPUS_PER_NODE), b.rng.choice((1, 1, 2))):
            b.fact(node, p, m.XID, at + b.u(0.0, 3.0), gpu=gpu, value=119)
    if b.rates.people is not None:
        storm_response(b, picked, p, t, first)
        unrelated_during(b, cluster, t)

    t = day_hours[1]
    rack = b.rng.choice(sorted({n.rack for n in nodes}))
    members = [n for n in nodes if n.rack == rack]
    hit = b.rng.sample(members, min(len(members), b.rng.randint(12, 16)))
    # Each GPU's alerts are warnings; 12-16 nodes and 96-128 GPUs of one rack reach the thermal storm's
    # error step (rules/correlation.yml, escalate): the rack's cooling, which pages.
    p = b.problem("storm_rack_cooling", hit, t, "error", True, storm=True)
    p.extent_nodes = STORM_NODES
    for node in hit:
        at, end = t + b.u(0.0, 10 * MIN), t + b.u(40 * MIN, 90 * MIN)
        for gpu in range(m.GPUS_PER_NODE):
            b.fact(node, p, m.THROTTLE, at + b.u(0.0, 60.0), end, gpu=gpu, value=64)
            b.fact(node, p, m.HOT, at + b.u(0.0, 120.0), end, gpu=gpu, value=b.u(86, 95))

    # An exporter rollout updates one cluster's DaemonSet: alertd decides storms per cluster, and a rollout
    # pushed to two clusters at once is one fleet incident in each (docs/fleet-simulation.md).
    t = day_hours[2]
    rolled = b.rng.choice(sorted({n.cluster for n in nodes}))
    members = [n for n in nodes if n.cluster == rolled]
    count = max(5, len(members) // 12)
    hit = b.rng.sample(members, min(count, len(members)))
    p = b.problem("storm_exporter_rollout", hit, t, "warning", False, storm=True)
    for node in hit:
        at = t + b.u(0.0, 10 * MIN)
        b.fact(node, p, m.EXPORTER_DOWN, at, at + b.u(6 * MIN, 20 * MIN))


def unrelated_during(b: Builder, cluster: list[m.Node], t: float) -> None:
    """A GPU fault on another node of the storm's cluster while the storm is being answered: its own problem,
    which pages on its own and joins no fleet."""
    at = t + b.u(20 * MIN, 80 * MIN)
    node = b.free_node(at, 6 * HOUR, cluster)
    cause, xid = b.rng.choice((("faulty_gpu", 79), ("gpu_hbm3", 48), ("gpu_sram", 95)))
    p = b.problem(f"{cause}_during_storm", [node], at, "critical" if xid == 79 else "error", True)
    if xid == 79:
        faulty_gpu(b, p, node, at)
    else:
        gpu_memory(b, p, node, at, xid)


# ----- the fleet -----


def build_fleet(nodes: int, days: float, seed: int, rates: Rates = Rates()) -> m.Fleet:
    """Nodes in clusters of up to 1,024 and racks of 16, and every problem of the run, from one seed."""
    rng = random.Random(seed)
    fleet = m.Fleet([], {}, days)
    for i in range(nodes):
        cluster = f"h100-{chr(ord('a') + i // 1024)}"
        rack, slot = divmod(i, 16)
        fleet.nodes.append(m.Node(f"{cluster}-r{rack:03d}-n{slot:02d}", cluster, i, rack))
    b = Builder(fleet, rng, rates)
    horizon_days = max(1, int(days))
    storm_days = rng.sample(range(horizon_days), min(3, horizon_days)) if horizon_days >= 3 else [0, 0, 0]
    storm_times = [d * 86400.0 + rng.uniform(9 * HOUR, 17 * HOUR) + i * 2 * HOUR for i, d in enumerate(storm_days)]
    storms(b, [min(t, fleet.horizon - 8 * HOUR) for t in storm_times])
    unplanned(b)
    planned(b, rates, nodes * days / (2048 * 30))
    if rates.history:
        history_cases(b, seed)
    if rates.jobs:
        fleet.jobs = add_jobs(b, seed)
    return fleet
