"""The job schedule of ``bench/record_am_run.py --scenario job-hang``: training jobs on a simulated fleet
(testkit/sim/job_fleet.py) scraped by the real Prometheus with the shipped gpu-alerts.yml and gpu-job-alerts.yml.

Four jobs run side by side on 10 nodes, so one ~35 minute run records all of them:

  hang        ml-train/llama-70b, a PyTorchJob on gpu-node-01..04 (32 GPUs): gpu-node-03's HCA mlx5_2 loses
              its link at 4:00 and 10 s later every rank blocks in NCCL (the kernel spins, the tensor pipe
              stops); the operator cordons nothing, and at 21:00 the port is back and the job trains again
  straggler   ml-train/mixtral-ft, a PyTorchJob on gpu-node-05..06 (16 GPUs): GPU 5 of gpu-node-06 in HW
              slowdown from 1:00 to 25:00 (clock 1260 MHz, 380 W); its 15 peers wait for it
  pause       research/vit-h, a Deployment (pod -> ReplicaSet -> Deployment) on gpu-node-07: every GPU idle
              at once for 12 minutes (2:00) for a synchronous checkpoint, the node writing it out at ~1 GB/s,
              and for 5 minutes (16:00) waiting for data, the node reading at ~800 MB/s. Not a problem: the
              checkpoint outlasts the 10 idle minutes GPUJobStalled once waited, and the network says it is
              no hang (the rule's 150 s branch needs a quiet network, its 30 minute bound is not reached)
  quiet       research/bert-large, a JobSet's Job on gpu-node-08: DCGM stalls on its GPU 2 from 7:00 to 23:00
              (the exporter leaves the GPU's series out) while its other GPUs report

gpu-node-09 and gpu-node-10 run nothing. At ``END_CLEAR_S`` every fault is over, so the resolutions are
recorded too. Time is compressed only in the scenario's waits, as in the other recordings: a field operator
takes longer than 17 minutes to bring a hung 32-GPU job back, and a data-loading pause rarely follows a
checkpoint 2 minutes after it; the pauses' lengths, every `for:`, range window and Alertmanager timer are real.
"""
from __future__ import annotations

from pathlib import Path

from bench.am_run_scenario import Problem, Step
from testkit.sim.job_fleet import JobFleetSim

REPO = Path(__file__).resolve().parents[1]
RULE_FILES = [REPO / "deploy/prometheus/gpu-alerts.yml", REPO / "deploy/prometheus/gpu-job-alerts.yml"]
NODES = [f"gpu-node-{i:02d}" for i in range(1, 11)]
HANG_NODES, HANG_NIC_NODE, HANG_NIC = NODES[0:4], "gpu-node-03", "mlx5_2"
HANG_NIC_DOWN_S, HANG_STALL_S, HANG_BACK_S = 240, 250, 1260
STRAGGLER_NODES, STRAGGLER_NODE, STRAGGLER_GPU, STRAGGLER_S = NODES[4:6], "gpu-node-06", 5, (60, 1500)
PAUSE_NODE = "gpu-node-07"
PAUSES = [(120, 840, "paused", "checkpoint"), (960, 1260, "loading", "data loading")]  # start, end, state, what
QUIET_NODE, QUIET_GPU, QUIET_S = "gpu-node-08", 2, (420, 1380)
END_CLEAR_S = 1560
# Racks of four nodes, one NVLink clique per rack (as on a GB200 NVL72 rack), two zones.
TOPOLOGY = {n: {"zone": "us-east-1a" if i < 8 else "us-east-1b", "rack": f"r{i // 4 + 1:02d}",
                "clique": f"cl-{i // 4 + 1:02d}.1"} for i, n in enumerate(NODES)}


def simulator() -> JobFleetSim:
    sim = JobFleetSim(NODES, topology=TOPOLOGY)
    sim.add_job("ml-train", "PyTorchJob", "llama-70b", HANG_NODES)
    sim.add_job("ml-train", "PyTorchJob", "mixtral-ft", STRAGGLER_NODES)
    sim.add_job("research", "Deployment", "vit-h", [PAUSE_NODE], via=("ReplicaSet", "vit-h-6c8f9d7b5"),
                container="trainer")
    sim.add_job("research", "JobSet", "bert-large", [QUIET_NODE], via=("Job", "bert-large-trainer-0"))
    return sim


def schedule(scale: float = 1.0) -> list[Step]:
    steps = [
        Step(HANG_NIC_DOWN_S, "nic_down", {"node": HANG_NIC_NODE, "device": HANG_NIC}, "hang",
             f"{HANG_NIC} port 1 loses its link"),
        Step(HANG_STALL_S, "job_state", {"namespace": "ml-train", "owner_name": "llama-70b", "state": "hung"}, "hang",
             "every rank blocks in an NCCL collective"),
        Step(HANG_BACK_S, "nic_down", {"node": HANG_NIC_NODE, "device": HANG_NIC, "down": False}, "hang",
             "port back (cable reseated)"),
        Step(HANG_BACK_S + 30, "job_state", {"namespace": "ml-train", "owner_name": "llama-70b", "state": "training"},
             "hang", "the job restarted from its checkpoint trains again"),
        Step(STRAGGLER_S[0], "slow_gpu", {"node": STRAGGLER_NODE, "gpu": STRAGGLER_GPU}, "straggler", "HW slowdown"),
        Step(STRAGGLER_S[1], "slow_gpu", {"node": STRAGGLER_NODE, "gpu": STRAGGLER_GPU, "slow": False}, "straggler",
             "GPU back to full clocks"),
        Step(QUIET_S[0], "quiet_gpu", {"node": QUIET_NODE, "gpu": QUIET_GPU}, "quiet", "DCGM stalls on the GPU"),
        Step(QUIET_S[1], "quiet_gpu", {"node": QUIET_NODE, "gpu": QUIET_GPU, "quiet": False}, "quiet",
             "the GPU reports again"),
    ]
    job = {"namespace": "research", "owner_name": "vit-h"}
    for start, end, state, what in PAUSES:
        steps.append(Step(start, "job_state", {**job, "state": state}, "pause", f"{what}: every GPU idle"))
        steps.append(Step(end, "job_state", {**job, "state": "training"}, "pause", f"{what} over: training"))
    steps.sort(key=lambda s: s.at_s)
    return [Step(s.at_s * scale, s.action, s.kwargs, s.problem, s.note) for s in steps]


def problems() -> list[Problem]:
    return [
        Problem("hang", "job_hang", list(HANG_NODES), True,
                f"ml-train/llama-70b hangs on its 4 nodes: {HANG_NIC} of {HANG_NIC_NODE} lost its link",
                {"job": "ml-train/llama-70b", "culprit": HANG_NIC_NODE, "device": HANG_NIC,
                 "nic_down_s": HANG_NIC_DOWN_S, "stalled_s": HANG_STALL_S, "back_s": HANG_BACK_S}),
        Problem("straggler", "straggler", [STRAGGLER_NODE], True,
                f"GPU {STRAGGLER_GPU} of {STRAGGLER_NODE} in HW slowdown slows ml-train/mixtral-ft",
                {"job": "ml-train/mixtral-ft", "job_nodes": list(STRAGGLER_NODES), "gpu": STRAGGLER_GPU,
                 "window_s": STRAGGLER_S}),
        Problem("pause", "healthy", [PAUSE_NODE], False,
                "research/vit-h pauses: every GPU idle at once for a 12 minute checkpoint and 5 minutes of data loading",
                {"job": "research/vit-h", "pauses_s": [[start, end] for start, end, _, _ in PAUSES],
                 "pause_kinds": [what for _, _, _, what in PAUSES]}),
        Problem("quiet", "gpu_quiet", [QUIET_NODE], True,
                f"GPU {QUIET_GPU} of {QUIET_NODE} stops reporting while its node's other GPUs report",
                {"job": "research/bert-large", "gpu": QUIET_GPU, "window_s": QUIET_S}),
    ]
