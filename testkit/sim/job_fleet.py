"""A simulated GPU training fleet, for the job-level rules (deploy/prometheus/gpu-job-alerts.yml).

One aiohttp server on 127.0.0.1 plays every scrape target those rules read, in the exporters' own series,
labels and HELP/TYPE lines:

  /nodes/{node}/metrics       dcgm-exporter with its default profiling fields (etc/dcp-metrics-included.csv)
                              and its Kubernetes pod mapping (pod, namespace, container on a job's GPUs)
  /nodes/{node}/node-metrics  node-exporter's infiniband collector (eight HCAs mlx5_0..7, port 1 each) and
                              netdev collector (lo, the front-end NIC ens9f0np0 that reaches storage, its
                              unused second port ens9f1np1)
  /ksm/metrics                kube-state-metrics: nodes (Ready, allowlisted topology labels) and the jobs'
                              pods (kube_pod_owner, kube_pod_info, kube_pod_status_phase, and
                              kube_replicaset_owner / kube_job_owner for a pod owned through a ReplicaSet or Job)

The paths are those of testkit/sim/gpu_cluster.py, so testkit/sim/prometheus_config.py writes its scrape config.
What a GPU reports follows its job's state, as measured on real jobs:

  training  tensor pipe ~60 % busy, GPU_UTIL ~99 %, boost clock, ~690 W, PCIe and NVLink and InfiniBand moving
            data, the front-end NIC streaming batches in (~20 MB/s)
  paused    a checkpoint: every GPU idle at once (no kernel: GPU_UTIL 0), the state copied to the host over PCIe
            and written to storage by every node of the job (its shard, ~1 GB/s out of the front-end NIC)
  loading   a data-loading pause: every GPU idle, every node reading its next shards (~800 MB/s in)
  hung      every rank blocked in an NCCL collective: the kernel spins (GPU_UTIL 100 %, GR engine 1.0) while
            the tensor pipe, NVLink and InfiniBand carry nothing and power stays low; the NICs carry only
            background (kubelet, metrics, subnet management: KB/s)

and a GPU's own faults: ``slow_gpu`` (HW slowdown: clock 1260 MHz, 380 W, clock-event reason 8; in synchronous
training it computes longer, so its tensor activity is above its waiting peers'), ``quiet_gpu`` (DCGM stalls on
it: the exporter leaves its series out). ``nic_down`` takes an HCA port down (state 1, physical state polling,
link_downed + 1). Counters (NVLink, PCIe replays, InfiniBand and netdev bytes) advance with the injected
``clock``.

    with JobFleetSim(["gpu-node-01", "gpu-node-02"]).running_in_thread() as sim:
        sim.add_job("ml-train", "PyTorchJob", "llama-70b", ["gpu-node-01", "gpu-node-02"])
        sim.nic_down("gpu-node-02", "mlx5_3")
        sim.job_state("ml-train", "llama-70b", "hung")
"""
from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from testkit.sim.exposition import Exposition
from testkit.sim.targets import ScrapeTargets

MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "550.90.07"
HGX_PCI_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
STATES = ("training", "paused", "loading", "hung")
KSM_LABELS = (("zone", "label_topology_kubernetes_io_zone"), ("rack", "label_topology_kubernetes_io_rack"),
              ("clique", "label_nvidia_com_gpu_clique"))

# dcgm-exporter's field, type and help text (etc/dcp-metrics-included.csv), and the key of Reading it renders.
DCGM_FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temp"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", "pcie_replays"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "util"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "xid"),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).", "reasons"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes.",
     "nvlink_total"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", "gr_active"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", "tensor"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - including both "
     "protocol headers and data payloads - in bytes per second.", "pcie_tx"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - including both "
     "protocol headers and data payloads - in bytes per second.", "pcie_rx"),
)
# What a GPU reads in each state: (tensor, util, gr_active, sm_clock, power, temp, pcie_tx, pcie_rx, nvlink/s, reasons)
PROFILES: dict[str, tuple[float, ...]] = {
    "idle": (0.0, 0, 0.0, 345, 70, 31, 2e6, 2e6, 0, 1),
    "training": (0.62, 99, 0.97, 1980, 690, 62, 1.1e10, 1.3e10, 2.0e8, 0),
    "waiting": (0.45, 99, 0.97, 1980, 560, 58, 0.9e10, 1.0e10, 1.5e8, 0),  # peers of a slow GPU
    "slow": (0.70, 100, 0.99, 1260, 380, 79, 0.9e10, 1.0e10, 1.5e8, 8),    # HW slowdown
    "paused": (0.0, 0, 0.0, 1980, 120, 44, 2.2e10, 1e8, 0, 1),
    "loading": (0.0, 0, 0.0, 1980, 110, 42, 2e6, 2e6, 0, 1),
    "hung": (0.0, 100, 1.0, 1980, 140, 43, 5e6, 5e6, 0, 0),
}
BACKGROUND = 2e3  # bytes/s: what an idle link still carries (subnet management, kubelet, metrics)
IB_RATE = {"training": 2.2e10, "paused": BACKGROUND, "loading": BACKGROUND, "hung": BACKGROUND}  # per port, each way
# netdev: (receive, transmit) bytes/s per device and job state; None is a node without a job.
FRONT_NIC, SPARE_NIC = "ens9f0np0", "ens9f1np1"
NETDEV_RATE: dict[str | None, dict[str, tuple[float, float]]] = {
    None: {"lo": (2e4, 2e4), FRONT_NIC: (5e4, 3e4), SPARE_NIC: (0.0, 0.0)},
    "training": {"lo": (2e4, 2e4), FRONT_NIC: (2e7, 5e6), SPARE_NIC: (0.0, 0.0)},
    "paused": {"lo": (2e4, 2e4), FRONT_NIC: (2e6, 1.0e9), SPARE_NIC: (0.0, 0.0)},   # the checkpoint goes out
    "loading": {"lo": (2e4, 2e4), FRONT_NIC: (8e8, 2e6), SPARE_NIC: (0.0, 0.0)},    # the batches come in
    "hung": {"lo": (2e4, 2e4), FRONT_NIC: (5e4, 3e4), SPARE_NIC: (0.0, 0.0)},
}
# node-exporter's netdev collector: Network device statistic <key>. (collector/netdev_common.go), a counter
# each; packets at a 9000-byte MTU, no errors or drops.
NETDEV_KEYS = ("receive_bytes", "receive_packets", "receive_errs", "receive_drop",
               "transmit_bytes", "transmit_packets", "transmit_errs", "transmit_drop")


@dataclass
class Gpu:
    index: int
    uuid: str
    slow: bool = False
    quiet: bool = False
    nvlink_total: float = 0.0


@dataclass
class Port:
    device: str
    state_id: int = 4
    physical_state_id: int = 5
    link_downed: int = 0
    tx: float = 0.0
    rx: float = 0.0


@dataclass
class FleetNode:
    name: str
    index: int
    topology: dict[str, str]
    exporter_pod: str
    gpus: list[Gpu]
    ports: list[Port]
    netdev: dict[str, list[float]] = field(default_factory=dict)  # device -> [received, transmitted] bytes


@dataclass
class TrainingJob:
    namespace: str
    owner_kind: str           # the top owner: PyTorchJob, Deployment, JobSet, ...
    owner_name: str
    pods: dict[str, str]      # node -> pod name
    via: tuple[str, str] | None = None  # (ReplicaSet | Job, name) between the pod and the top owner
    container: str = "pytorch"
    state: str = "training"
    uids: dict[str, str] = field(default_factory=dict)


class JobFleetSim(ScrapeTargets):
    """Nodes of 8 GPUs and 8 HCAs running training jobs; scenario methods are plain and thread-safe."""

    def __init__(self, nodes: list[str], *, cluster: str = "sim", topology: dict[str, dict[str, str]] | None = None,
                 clock: Callable[[], float] = time.monotonic, seed: int = 1, host: str = "127.0.0.1") -> None:
        super().__init__(host=host)
        self.cluster = cluster
        self._clock = clock
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._last = clock()
        self.jobs: list[TrainingJob] = []
        topology = topology or {}
        self.nodes = {name: FleetNode(
            name, i, dict(topology.get(name, {})), f"dcgm-exporter-{self._suffix(5)}",
            [Gpu(g, self._uuid()) for g in range(8)], [Port(f"mlx5_{p}") for p in range(8)],
            {dev: [0.0, 0.0] for dev in NETDEV_RATE[None]},
        ) for i, name in enumerate(nodes)}

    def _suffix(self, n: int) -> str:
        return "".join(self._rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))

    def _uuid(self) -> str:
        h = "%032x" % self._rng.getrandbits(128)
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    # ------------------------------------------------------------ scenario

    def add_job(self, namespace: str, owner_kind: str, owner_name: str, nodes: list[str], *,
                via: tuple[str, str] | None = None, container: str = "pytorch") -> TrainingJob:
        """A job training on every GPU of ``nodes``, one pod per node. ``via``: the pod's direct owner when it
        is a ReplicaSet or Job under the top owner (pods named as their controllers name them)."""
        with self._lock:
            for n in nodes:
                self._node(n)
                if self._job_on(n) is not None:
                    raise ValueError(f"{n} already runs a job")
            if via and via[0] == "ReplicaSet":
                pods = {n: f"{via[1]}-{self._suffix(5)}" for n in nodes}
            else:
                pods = {n: f"{owner_name}-worker-{i}" for i, n in enumerate(nodes)}
            job = TrainingJob(namespace, owner_kind, owner_name, pods, via, container)
            job.uids = {p: str(hashlib.sha1(f"{namespace}/{p}".encode()).hexdigest()) for p in pods.values()}
            self.jobs.append(job)
            return job

    def job_state(self, namespace: str, owner_name: str, state: str) -> None:
        if state not in STATES:
            raise ValueError(f"state {state!r}: one of {STATES}")
        with self._lock:
            self._advance()
            self._job(namespace, owner_name).state = state

    def nic_down(self, node: str, device: str, down: bool = True) -> None:
        """The HCA port loses its link (state 1 down, physical 2 polling) or gets it back (4, 5)."""
        with self._lock:
            self._advance()
            port = next((p for p in self._node(node).ports if p.device == device), None)
            if port is None:
                raise ValueError(f"{node} has no HCA {device}")
            if down and port.state_id == 4:
                port.link_downed += 1
            port.state_id, port.physical_state_id = (1, 2) if down else (4, 5)

    def slow_gpu(self, node: str, gpu: int, slow: bool = True) -> None:
        with self._lock:
            self._node(node).gpus[gpu].slow = slow

    def quiet_gpu(self, node: str, gpu: int, quiet: bool = True) -> None:
        with self._lock:
            self._node(node).gpus[gpu].quiet = quiet

    def _node(self, node: str) -> FleetNode:
        if node not in self.nodes:
            raise ValueError(f"unknown node {node!r}")
        return self.nodes[node]

    def _job(self, namespace: str, owner_name: str) -> TrainingJob:
        for job in self.jobs:
            if (job.namespace, job.owner_name) == (namespace, owner_name):
                return job
        raise ValueError(f"no job {namespace}/{owner_name}")

    def _job_on(self, node: str) -> TrainingJob | None:
        return next((j for j in self.jobs if node in j.pods), None)

    # ------------------------------------------------------------ readings

    def _profile(self, node: FleetNode, gpu: Gpu) -> tuple[float, ...]:
        job = self._job_on(node.name)
        if job is None:
            return PROFILES["idle"]
        if job.state != "training":
            return PROFILES[job.state]
        if gpu.slow:
            return PROFILES["slow"]
        slowed = any(g.slow for n in job.pods for g in self.nodes[n].gpus)
        return PROFILES["waiting" if slowed else "training"]

    def _advance(self) -> None:
        """Counters move on by their rates since the last reading."""
        now = self._clock()
        dt, self._last = max(0.0, now - self._last), now
        for node in self.nodes.values():
            job = self._job_on(node.name)
            for g in node.gpus:
                g.nvlink_total += self._profile(node, g)[8] * dt
            rate = IB_RATE[job.state] if job else BACKGROUND
            for p in node.ports:
                if p.state_id == 4:
                    p.tx += rate * dt
                    p.rx += rate * dt
            for dev, (rx, tx) in NETDEV_RATE[job.state if job else None].items():
                node.netdev[dev][0] += rx * dt
                node.netdev[dev][1] += tx * dt

    def _reading(self, node: FleetNode, gpu: Gpu) -> dict[str, float]:
        tensor, util, gr, clock, power, temp, tx, rx, _, reasons = self._profile(node, gpu)
        jitter = self._rng.uniform
        busy = tensor > 0
        return {
            "tensor": round(max(0.0, tensor + (jitter(-0.03, 0.03) if busy else 0.0)), 4),
            "util": util, "gr_active": gr, "sm_clock": clock,
            "power": round(power + jitter(-12, 12), 3), "temp": temp + self._rng.randint(-1, 1),
            "pcie_tx": round(tx * jitter(0.95, 1.05)), "pcie_rx": round(rx * jitter(0.95, 1.05)),
            "nvlink_total": int(gpu.nvlink_total), "pcie_replays": 0, "xid": 0,
            "reasons": reasons,
        }

    # ------------------------------------------------------------ exposition

    def render_dcgm(self, node: str) -> str:
        with self._lock:
            self._advance()
            n = self._node(node)
            job = self._job_on(node)
            gpus = [g for g in n.gpus if not g.quiet]
            readings = {g.index: self._reading(n, g) for g in gpus}
            out = Exposition()
            for name, kind, help_text, key in DCGM_FIELDS:
                out.family(name, kind, help_text)
                for g in gpus:
                    labels = [("gpu", str(g.index)), ("UUID", g.uuid), ("pci_bus_id", f"00000000:{HGX_PCI_BUSES[g.index]}:00.0"),
                              ("device", f"nvidia{g.index}"), ("modelName", MODEL), ("Hostname", n.exporter_pod),
                              ("DCGM_FI_DRIVER_VERSION", DRIVER)]
                    if job is not None:
                        labels += [("container", job.container), ("namespace", job.namespace), ("pod", job.pods[node])]
                    out.sample(name, labels, readings[g.index][key])
            return out.text()

    def render_node_exporter(self, node: str) -> str:
        with self._lock:
            self._advance()
            n = self._node(node)
            out = Exposition()
            out.family("node_infiniband_info", "gauge", "Non-numeric data from /sys/class/infiniband/<device>, value is always 1.")
            for p in n.ports:
                out.sample("node_infiniband_info", [("board_id", "MT_0000000838"), ("device", p.device),
                                                    ("firmware_version", "28.39.1002"), ("hca_type", "MT4129")], 1)
            families = (
                ("node_infiniband_link_downed_total", "counter",
                 "Number of times the link failed to recover from an error state and went down", lambda p: p.link_downed),
                ("node_infiniband_physical_state_id", "gauge", "Physical state of the InfiniBand port (0: no change, 1: "
                 "sleep, 2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)",
                 lambda p: p.physical_state_id),
                ("node_infiniband_port_data_received_bytes_total", "counter", "Number of data octets received on all links",
                 lambda p: int(p.rx)),
                ("node_infiniband_port_data_transmitted_bytes_total", "counter",
                 "Number of data octets transmitted on all links", lambda p: int(p.tx)),
                ("node_infiniband_rate_bytes_per_second", "gauge", "Maximum signal transfer rate", lambda p: 5e10),
                ("node_infiniband_state_id", "gauge", "State of the InfiniBand port (0: no change, 1: down, 2: init, "
                 "3: armed, 4: active, 5: act defer)", lambda p: p.state_id),
            )
            for name, kind, help_text, read in families:
                out.family(name, kind, help_text)
                for p in n.ports:
                    out.sample(name, [("device", p.device), ("port", "1")], read(p))
            self._render_netdev(n, out)
            return out.text()

    @staticmethod
    def _render_netdev(n: FleetNode, out: Exposition) -> None:
        for key in NETDEV_KEYS:
            name = f"node_network_{key}_total"
            out.family(name, "counter", f"Network device statistic {key}.")
            for dev, (rx, tx) in n.netdev.items():
                moved = rx if key.startswith("receive") else tx
                value = {"bytes": int(moved), "packets": int(moved // 9000)}.get(key.split("_")[1], 0)
                out.sample(name, [("device", dev)], value)

    def render_ksm(self) -> str:
        with self._lock:
            out = Exposition()
            out.family("kube_node_labels", "gauge", "Kubernetes labels converted to Prometheus labels.")
            for n in self.nodes.values():
                labels = [("node", n.name), ("label_kubernetes_io_hostname", n.name)]
                labels += [(ksm, n.topology[key]) for key, ksm in KSM_LABELS if n.topology.get(key)]
                out.sample("kube_node_labels", labels, 1)
            out.family("kube_node_status_condition", "gauge", "The condition of a cluster node.")
            for n in self.nodes.values():
                for status in ("true", "false", "unknown"):
                    out.sample("kube_node_status_condition",
                               [("node", n.name), ("condition", "Ready"), ("status", status)], int(status == "true"))
            self._render_pods(out)
            return out.text()

    def _render_pods(self, out: Exposition) -> None:
        pods = [(job, node, pod) for job in self.jobs for node, pod in job.pods.items()]
        out.family("kube_pod_owner", "gauge", "Information about the Pod's owner.")
        for job, _, pod in pods:
            kind, name = job.via or (job.owner_kind, job.owner_name)
            out.sample("kube_pod_owner", [("namespace", job.namespace), ("pod", pod), ("uid", job.uids[pod]),
                                          ("owner_kind", kind), ("owner_name", name), ("owner_is_controller", "true")], 1)
        out.family("kube_pod_info", "gauge", "Information about pod.")
        for job, node, pod in pods:
            n = self.nodes[node]
            kind, name = job.via or (job.owner_kind, job.owner_name)
            out.sample("kube_pod_info", [
                ("namespace", job.namespace), ("pod", pod), ("uid", job.uids[pod]), ("host_ip", f"10.0.0.{n.index + 1}"),
                ("pod_ip", f"10.244.{n.index}.{17 + len(pod) % 200}"), ("node", node), ("created_by_kind", kind),
                ("created_by_name", name), ("priority_class", "training"), ("host_network", "false")], 1)
        out.family("kube_pod_status_phase", "gauge", "The pods current phase.")
        for job, _, pod in pods:
            for phase in ("Pending", "Succeeded", "Failed", "Unknown", "Running"):
                out.sample("kube_pod_status_phase", [("namespace", job.namespace), ("pod", pod), ("uid", job.uids[pod]),
                                                     ("phase", phase)], int(phase == "Running"))
        for kind, family, key in (("ReplicaSet", "kube_replicaset_owner", "replicaset"), ("Job", "kube_job_owner", "job_name")):
            out.family(family, "gauge", f"Information about the {kind}'s owner.")
            for job in self.jobs:
                if job.via and job.via[0] == kind:
                    out.sample(family, [("namespace", job.namespace), (key, job.via[1]), ("owner_kind", job.owner_kind),
                                        ("owner_name", job.owner_name), ("owner_is_controller", "true")], 1)

    # ------------------------------------------------------------ serving

    async def _h_dcgm(self, request: web.Request) -> web.Response:
        return self._exporter(request, self.render_dcgm)

    async def _h_node(self, request: web.Request) -> web.Response:
        return self._exporter(request, self.render_node_exporter)

    def _exporter(self, request: web.Request, render: Callable[[str], str]) -> web.Response:
        node = request.match_info["node"]
        if node not in self.nodes:
            raise web.HTTPNotFound(text=f"unknown node {node}")
        return self.exposition(render(node))

    @property
    def node_names(self) -> list[str]:
        return list(self.nodes)
