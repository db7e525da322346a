"""The fleet's state over time and the ground truth it is scored against.

Times are seconds after the simulation's start (floats, rounded to the
millisecond where they become timestamps). A :class:`Fact` is one piece of
state a fault or an operator sets on one node: an interval (the exporter is
down from ``start`` to ``end``) or an instant (``end == start``: an Xid written
to the gauge, an ECC counter step). Every fact names the problem that caused
it, which is how each alert is traced back to its problem.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone

START = datetime(2026, 11, 2, tzinfo=timezone.utc)  # the run's second 0, a Monday
EPOCH = START.timestamp()
GPUS_PER_NODE = 8
PCI_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
H100 = "NVIDIA H100 80GB HBM3"
DRIVER = "550.90.07"

# Fact kinds. Interval facts hold from start to end; instant facts happen at start.
XID = "xid"                        # instant, gpu, value = Xid code written to DCGM_FI_DEV_XID_ERRORS
ECC_DBE = "ecc_dbe"                # instant, gpu: DCGM_FI_DEV_ECC_DBE_VOL_TOTAL steps up
NVLINK = "nvlink"                  # instant, gpu: DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL steps up
EXPORTER_DOWN = "exporter_down"    # interval: dcgm-exporter's scrape fails (up == 0, its series go stale)
NODE_DOWN = "node_down"            # interval: node-exporter and kubelet do not answer (and dcgm-exporter)
NOT_READY = "not_ready"            # interval: kube_node_status_condition Ready=true is 0
CORDON = "cordon"                  # interval: kube_node_spec_unschedulable == 1; value 1: alertd's cordon (its mark)
GPU_GONE = "gpu_gone"              # interval, gpu: the GPU's series are missing (fell off the bus)
HOT = "hot"                        # interval, gpu, value = temperature (>= 85 C)
THROTTLE = "throttle"              # interval, gpu, value = harmful clock-event bits (masked, e.g. 32, 64)
REMAP_FAIL = "remap_fail"          # interval, gpu: DCGM_FI_DEV_ROW_REMAP_FAILURE > 0
REMAP_PENDING = "remap_pending"    # interval, gpu: DCGM_FI_DEV_ROW_REMAP_PENDING > 0

# The jobs the nodes run (--jobs, bench/fleetsim/jobs.py): what the job rules (gpu-job-alerts.yml) read.
IB_DOWN = "ib_down"                # interval, value = the port's device index (mlx5_<value>): state not active
SLOW = "slow"                      # interval, gpu, value = the GPU's reading over its job's median; label: metric
QUIET = "quiet"                    # interval, gpu: the GPU's samples stop while its node's others go on
STALL = "stall"                    # interval: every GPU of the node's job idle and nothing on its wire (a hang)

INSTANT = frozenset({XID, ECC_DBE, NVLINK})


@dataclass(slots=True)
class Fact:
    kind: str
    start: float
    end: float
    problem: str
    gpu: int = -1
    value: float = 0.0
    label: str = ""  # SLOW: the metric the GPU lags in (tensor_active, sm_clock, power)


# Healthy pauses of a job (--jobs): what its GPUs and its nodes' network counters show meanwhile.
CHECKPOINT = "checkpoint"      # every GPU idle; a node writes the checkpoint (~1 GB/s on its network)
DATA_LOADING = "data_loading"  # every GPU idle; the nodes read their next shards (hundreds of MB/s)
EVALUATION = "evaluation"      # forward passes: tensor activity stays above 1 %, never idle


@dataclass(frozen=True, slots=True)
class Pause:
    start: float
    end: float
    problem: str
    kind: str = CHECKPOINT

    @property
    def idle(self) -> bool:
        """Every GPU of the job under 1 % tensor activity meanwhile."""
        return self.kind != EVALUATION


@dataclass(slots=True)
class Job:
    """A training job (--jobs): its pods' top owner and its nodes; its healthy pauses (checkpoints,
    data loading, evaluations) are kept once here, not per node. ``counters``: its nodes export
    node-exporter's netdev and infiniband byte counters (what tells a hang from a pause on the wire)."""

    namespace: str
    kind: str
    name: str
    nodes: list[str]
    pauses: list[Pause] = field(default_factory=list)
    counters: bool = True

    @property
    def labels(self) -> dict[str, str]:
        return {"namespace": self.namespace, "owner_kind": self.kind, "owner_name": self.name}


@dataclass(slots=True)
class Problem:
    """One real problem: what the score counts incidents and pages against."""

    id: str
    cause: str                  # e.g. "faulty_gpu", "maintenance", "flap_thermal", "storm_driver_rollout"
    nodes: list[str]
    start: float
    end: float = 0.0
    page_worthy: bool = False
    severity: str = "warning"   # the site's intent: the most severe signal the problem itself causes
    storm: bool = False
    alerts: list[tuple[str, float]] = field(default_factory=list)  # (fingerprint, startsAt) it caused
    spells: list[tuple[float, float]] = field(default_factory=list)  # when those alerts fired: (startsAt, resolved)
    first_received: float | None = None  # when its first alert reached alertd
    # Page-worthy by its extent alone (a storm of warnings, rules/correlation.yml escalate): no page can come
    # before alerts of this many of its nodes reached alertd (a storm is one from correlation.storm.min_nodes
    # nodes), so promptness counts from then (extent_received).
    extent_nodes: int = 0
    extent_received: float | None = None
    acted_at: float | None = None  # when the operator first acted on it (cordon); later alerts are the repair's
    responder: str = ""  # who answered it: "on-call" or "alertd" (its approved remediation), "" nobody
    repair_failed_at: float | None = None  # when its repair was seen to fail (back NotReady, or the fault again)
    names: tuple[str, ...] = ()  # words naming its cause ("Xid 79", "ECC"), one of which its incident's final title
    #                               should hold (case-insensitive)
    expect_verdict: str | None = None  # a history case (bench/fleetsim/history.py): the rule of the verdict its
    #                                     incident should get ("" for none); None: not a history case
    job: str = ""  # a job's hang or straggler (--jobs): "namespace/name" of the job
    culprit: str = ""  # a hang: the node whose fault stalled the job ("" when nothing shows it: NCCL, corruption)
    stalled: float | None = None  # a hang: when its job stopped computing (its STALL facts' start)
    domain: str = ""  # a domain fault: the domain its incident should name ("rack r012", "NVLink domain c07")


@dataclass(slots=True)
class Node:
    name: str
    cluster: str
    index: int
    rack: int
    facts: list[Fact] = field(default_factory=list)
    topology: dict[str, str] = field(default_factory=dict)  # --jobs: rack, clique, zone labels joined onto its alerts
    job: Job | None = None  # --jobs: the job it runs

    def gpu_labels(self, gpu: int) -> dict[str, str]:
        """The labels dcgm-exporter's series of one GPU carry after the scrape's relabeling."""
        digest = hashlib.md5(f"{self.cluster}/{self.name}".encode()).hexdigest()
        uuid = hashlib.md5(f"{self.cluster}/{self.name}/{gpu}".encode()).hexdigest()
        return {
            "cluster": self.cluster,
            "node": self.name,
            "Hostname": f"nvidia-dcgm-exporter-{digest[:5]}",
            "gpu": str(gpu),
            "UUID": f"GPU-{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}",
            "pci_bus_id": f"00000000:{PCI_BUSES[gpu]}:00.0",
            "device": f"nvidia{gpu}",
            "modelName": H100,
            "DCGM_FI_DRIVER_VERSION": DRIVER,
            "instance": self.exporter_instance(),
            "job": "dcgm-exporter",
            "namespace": "gpu-operator",
            "container": "nvidia-dcgm-exporter",
            **self.topology,
        }

    def exporter_instance(self) -> str:
        i = self.index
        return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}:9400"


@dataclass(slots=True)
class Fleet:
    nodes: list[Node]
    problems: dict[str, Problem]
    days: float
    jobs: list[Job] = field(default_factory=list)

    @property
    def horizon(self) -> float:
        return self.days * 86400.0
