"""A simulated GPU Kubernetes cluster for end-to-end tests.

One aiohttp server on 127.0.0.1 plays every scrape target Prometheus would see
on a real GPU cluster:

  /nodes/{node}/metrics       dcgm-exporter on that node (DCGM_FI_* series)
  /nodes/{node}/node-metrics  node-exporter on that node (a trivial gauge)
  /ksm/metrics                kube-state-metrics (kube_node_* series)
  /control/...                JSON fault switches (see CONTROL_ACTIONS)

Series and labels follow dcgm-exporter's output, including its pitfalls: the
`Hostname` label is the exporter POD's name (dcgm-exporter-x7k2p), not the node's,
and DCGM_FI_DEV_XID_ERRORS keeps the last Xid until the driver reloads (`clear`).

Faults are switched from a test in-process::

    sim = GPUClusterSim(nodes=3, gpus_per_node=8)
    await sim.start()
    sim.inject_xid("node-1", 3, 79)
    sim.cordon("node-1")
    ...
    await sim.stop()

or, from synchronous code, with the server on its own thread::

    with GPUClusterSim().running_in_thread() as sim:
        sim.exporter_down("node-2")

or over HTTP: ``POST /control/xid {"node": "node-1", "gpu": 3, "code": 79}``.

Also here: `write_prometheus_config` (a scrape config for the simulator) and
`derive_fast_rules` (a copy of the shipped alert rules that fires in seconds).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from tests.support.loopback import LoopbackServer, serving_in_thread

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_RULES = REPO_ROOT / "deploy" / "prometheus" / "gpu-alerts.yml"

DEFAULT_MODEL = "NVIDIA H100 80GB HBM3"
DEFAULT_DRIVER = "550.90.07"
# PCI buses of the eight GPUs on an HGX H100 board, in dcgm-exporter's format.
HGX_PCI_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
# Kubernetes' random-suffix alphabet (no vowels, no look-alikes).
_K8S_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# Clock-event reasons of a healthy GPU: idle when nothing runs, otherwise none
# (a busy GPU often shows 0x4 power cap, which is just as benign).
CLOCKS_IDLE = 0x1
CLOCKS_BUSY = 0x0


# --------------------------------------------------------------------- state


@dataclass
class PodRef:
    namespace: str
    pod: str
    container: str


@dataclass
class GPU:
    index: int
    uuid: str
    pci_bus_id: str
    pod: PodRef | None = None
    present: bool = True
    xid: int = 0
    xid_events: list[tuple[float, int]] = field(default_factory=list)
    temp: float = 38.0
    clocks_event_reasons: int | None = None  # None = healthy baseline (idle/busy)
    ecc_dbe_vol_total: int = 0
    row_remap_failure: int = 0
    row_remap_pending: int = 0
    nvlink_crc_flit_total: int = 0

    @property
    def device(self) -> str:
        return f"nvidia{self.index}"

    def reasons(self) -> int:
        if self.clocks_event_reasons is not None:
            return self.clocks_event_reasons
        return CLOCKS_BUSY if self.pod else CLOCKS_IDLE

    def util(self) -> int:
        return 97 if self.pod else 0

    def reset(self) -> None:
        """What a driver reload does: volatile state and the sticky Xid go back to 0."""
        self.present = True
        self.xid = 0
        self.xid_events.clear()
        self.temp = 38.0
        self.clocks_event_reasons = None
        self.ecc_dbe_vol_total = 0
        self.row_remap_failure = 0
        self.row_remap_pending = 0
        self.nvlink_crc_flit_total = 0


@dataclass
class Node:
    name: str
    index: int
    exporter_pod: str
    gpus: list[GPU]
    internal_ip: str
    exporter_down: bool = False
    node_down: bool = False
    cordoned: bool = False
    ready: str = "true"  # Ready condition: "true" | "false" | "unknown"

    def reset(self) -> None:
        self.exporter_down = False
        self.node_down = False
        self.cordoned = False
        self.ready = "true"
        for gpu in self.gpus:
            gpu.reset()


class UnknownNode(KeyError):
    pass


# ------------------------------------------------------------ text exposition


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{_escape(str(v))}"' for k, v in pairs)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Exposition:
    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: Iterable[tuple[str, str]], value: float) -> None:
        self._lines.append(f"{name}{{{_labels(labels)}}} {_num(value)}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


# dcgm-exporter field, Prometheus type, help text and how to read it from a GPU.
_DCGM_FIELDS: tuple[tuple[str, str, str, Any], ...] = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temp),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: g.util()),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda g: g.xid),
    (
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)",
        lambda g: g.reasons(),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        lambda g: g.ecc_dbe_vol_total,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        lambda g: g.row_remap_failure,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "gauge",
        "Whether remapping of rows is pending",
        lambda g: g.row_remap_pending,
    ),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
        lambda g: g.nvlink_crc_flit_total,
    ),
)


# ------------------------------------------------------------------ simulator


class GPUClusterSim(LoopbackServer):
    """N nodes x G GPUs with dcgm-exporter, node-exporter and kube-state-metrics.

    Fault methods are plain (non-async) and thread-safe, so a test can call them
    whether the server runs in the test's event loop (`start`/`stop`) or on a
    thread (`running_in_thread`).
    """

    def __init__(
        self,
        nodes: int | Iterable[str] = 3,
        gpus_per_node: int = 8,
        *,
        cluster: str = "sim",
        job_gpus: int | Mapping[str, Iterable[int]] = 4,
        job_namespace: str = "ml-train",
        job_name: str = "llm-pretrain",
        job_container: str = "pytorch",
        model_name: str = DEFAULT_MODEL,
        driver_version: str = DEFAULT_DRIVER,
        xid_count_metric: bool = False,
        xid_count_window_s: float = 300.0,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 1,
        hostname_is_node: bool = False,
    ) -> None:
        """
        nodes: a count (names node-1..node-N) or explicit node names.
        job_gpus: GPUs running the training job's pods, as a count per node (GPUs
            0..k-1 of every node) or {node: [gpu indexes]}. Their series carry
            pod/namespace/container like dcgm-exporter's Kubernetes pod mapping.
        xid_count_metric: also expose DCGM_EXP_XID_ERRORS_COUNT (off by default,
            as in dcgm-exporter's default counters).
        hostname_is_node: `Hostname` is the node's name (dcgm-exporter on the host
            network) instead of the exporter pod's.
        """
        names = [f"node-{i}" for i in range(1, nodes + 1)] if isinstance(nodes, int) else list(nodes)
        if not names:
            raise ValueError("at least one node")
        super().__init__(host=host, port=port)
        self.cluster = cluster
        self.model_name = model_name
        self.driver_version = driver_version
        self.xid_count_metric = xid_count_metric
        self.xid_count_window_s = xid_count_window_s
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._job = (job_namespace, job_name, job_container)
        self.nodes: dict[str, Node] = {}
        for i, name in enumerate(names):
            gpus = [
                GPU(index=g, uuid=self._uuid(), pci_bus_id=self._pci_bus_id(g))
                for g in range(gpus_per_node)
            ]
            self.nodes[name] = Node(
                name=name,
                index=i,
                exporter_pod=name if hostname_is_node else self._exporter_pod_name(),
                gpus=gpus,
                internal_ip=f"10.0.{i // 250}.{i % 250 + 1}",
            )
        for name, node in self.nodes.items():
            if isinstance(job_gpus, int):
                indexes: Iterable[int] = range(min(job_gpus, gpus_per_node))
            else:
                indexes = job_gpus.get(name, ())
            for g in indexes:
                self.assign_pod(name, g, job_namespace, f"{job_name}-worker-{node.index}", job_container)

    # ------------------------------------------------------------- identity

    def _uuid(self) -> str:
        h = "%032x" % self._rng.getrandbits(128)
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    @staticmethod
    def _pci_bus_id(index: int) -> str:
        bus = HGX_PCI_BUSES[index] if index < len(HGX_PCI_BUSES) else "%02X" % (0xC0 + index)
        return f"00000000:{bus}:00.0"

    def _exporter_pod_name(self) -> str:
        return "dcgm-exporter-" + "".join(self._rng.choice(_K8S_SUFFIX_ALPHABET) for _ in range(5))

    @property
    def node_names(self) -> list[str]:
        return list(self.nodes)

    def gpu(self, node: str, gpu: int) -> GPU:
        n = self._node(node)
        try:
            return n.gpus[gpu]
        except IndexError:
            raise UnknownNode(f"{node} has no GPU {gpu}") from None

    def _node(self, node: str) -> Node:
        try:
            return self.nodes[node]
        except KeyError:
            raise UnknownNode(f"unknown node {node!r}") from None

    # ----------------------------------------------------------------- faults

    def inject_xid(self, node: str, gpu: int, code: int) -> None:
        """An Xid on one GPU: the last-value gauge takes the code and keeps it."""
        with self._lock:
            g = self.gpu(node, gpu)
            g.xid = int(code)
            g.xid_events.append((time.monotonic(), int(code)))

    def exporter_down(self, node: str, down: bool = True) -> None:
        """dcgm-exporter on the node answers 503 (Prometheus: up == 0)."""
        with self._lock:
            self._node(node).exporter_down = down

    def node_down(self, node: str, down: bool = True) -> None:
        """Node unreachable: its node-exporter and dcgm-exporter answer 503.
        kube-state-metrics is not changed; combine with `not_ready` for that."""
        with self._lock:
            self._node(node).node_down = down

    def cordon(self, node: str, on: bool = True) -> None:
        with self._lock:
            self._node(node).cordoned = on

    def not_ready(self, node: str, on: bool = True, status: str = "false") -> None:
        """Ready condition false (kubelet says so) or "unknown" (kubelet silent)."""
        if status not in ("false", "unknown"):
            raise ValueError("status must be 'false' or 'unknown'")
        with self._lock:
            self._node(node).ready = status if on else "true"

    def throttle(self, node: str, gpu: int, reasons_bitmask: int | None) -> None:
        """Set DCGM_FI_DEV_CLOCKS_EVENT_REASONS; None returns to the healthy baseline."""
        with self._lock:
            self.gpu(node, gpu).clocks_event_reasons = None if reasons_bitmask is None else int(reasons_bitmask)

    def set_temperature(self, node: str, gpu: int, celsius: float) -> None:
        with self._lock:
            self.gpu(node, gpu).temp = float(celsius)

    def inject_ecc_dbe(self, node: str, gpu: int, count: int = 1) -> None:
        with self._lock:
            self.gpu(node, gpu).ecc_dbe_vol_total += int(count)

    def row_remap(self, node: str, gpu: int, *, failure: bool | None = None, pending: bool | None = None) -> None:
        with self._lock:
            g = self.gpu(node, gpu)
            if failure is not None:
                g.row_remap_failure = int(failure)
            if pending is not None:
                g.row_remap_pending = int(pending)

    def nvlink_errors(self, node: str, gpu: int, crc_flit: int) -> None:
        """Add CRC flit errors to the GPU's NVLink counter."""
        with self._lock:
            self.gpu(node, gpu).nvlink_crc_flit_total += int(crc_flit)

    def gpu_lost(self, node: str, gpu: int, lost: bool = True) -> None:
        """The GPU disappears from the exporter's output (fallen off the bus)."""
        with self._lock:
            self.gpu(node, gpu).present = not lost

    def restart_exporter(self, node: str) -> str:
        """New exporter pod name, so every series gets a new `Hostname`."""
        with self._lock:
            n = self._node(node)
            n.exporter_pod = self._exporter_pod_name()
            return n.exporter_pod

    def assign_pod(self, node: str, gpu: int, namespace: str, pod: str, container: str) -> None:
        with self._lock:
            self.gpu(node, gpu).pod = PodRef(namespace, pod, container)

    def unassign_pod(self, node: str, gpu: int) -> None:
        with self._lock:
            self.gpu(node, gpu).pod = None

    def clear(self, node: str | None = None) -> None:
        """Back to healthy: every fault off, Xid gauge 0 (as after a driver reload).
        Pod assignments and exporter pod names stay."""
        with self._lock:
            for n in [self._node(node)] if node is not None else self.nodes.values():
                n.reset()

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {
                "cluster": self.cluster,
                "nodes": {
                    n.name: {
                        "exporter_pod": n.exporter_pod,
                        "exporter_down": n.exporter_down,
                        "node_down": n.node_down,
                        "cordoned": n.cordoned,
                        "ready": n.ready,
                        "gpus": [
                            {
                                "gpu": g.index,
                                "UUID": g.uuid,
                                "pci_bus_id": g.pci_bus_id,
                                "present": g.present,
                                "xid": g.xid,
                                "temp": g.temp,
                                "clocks_event_reasons": g.reasons(),
                                "ecc_dbe_vol_total": g.ecc_dbe_vol_total,
                                "row_remap_failure": g.row_remap_failure,
                                "row_remap_pending": g.row_remap_pending,
                                "nvlink_crc_flit_total": g.nvlink_crc_flit_total,
                                "pod": None if g.pod is None else vars(g.pod),
                            }
                            for g in n.gpus
                        ],
                    }
                    for n in self.nodes.values()
                },
            }

    # ------------------------------------------------------------- rendering

    def render_dcgm(self, node: str) -> str:
        """dcgm-exporter's /metrics for one node."""
        with self._lock:
            n = self._node(node)
            gpus = [g for g in n.gpus if g.present]
            out = _Exposition()
            for name, kind, help_text, read in _DCGM_FIELDS:
                out.family(name, kind, help_text)
                for g in gpus:
                    out.sample(name, self._gpu_labels(n, g), read(g))
            if self.xid_count_metric:
                self._render_xid_count(out, n, gpus)
            return out.text()

    def _gpu_labels(self, n: Node, g: GPU) -> list[tuple[str, str]]:
        labels = [
            ("gpu", str(g.index)),
            ("UUID", g.uuid),
            ("pci_bus_id", g.pci_bus_id),
            ("device", g.device),
            ("modelName", self.model_name),
            ("Hostname", n.exporter_pod),
            ("DCGM_FI_DRIVER_VERSION", self.driver_version),
        ]
        if g.pod is not None:
            labels += [("container", g.pod.container), ("namespace", g.pod.namespace), ("pod", g.pod.pod)]
        return labels

    def _render_xid_count(self, out: _Exposition, n: Node, gpus: list[GPU]) -> None:
        name = "DCGM_EXP_XID_ERRORS_COUNT"
        out.family(name, "gauge", "Count of XID Errors within user-specified time window (see xid-count-window-size param).")
        horizon = time.monotonic() - self.xid_count_window_s
        window_ms = str(int(self.xid_count_window_s * 1000))
        for g in gpus:
            g.xid_events[:] = [e for e in g.xid_events if e[0] >= horizon]
            counts: dict[int, int] = {}
            for _, code in g.xid_events:
                counts[code] = counts.get(code, 0) + 1
            base = self._gpu_labels(n, g)
            if not counts:
                out.sample(name, base + [("window_size_in_ms", window_ms)], 0)
            for code, count in sorted(counts.items()):
                out.sample(name, base + [("window_size_in_ms", window_ms), ("xid", str(code))], count)

    def render_node_exporter(self, node: str) -> str:
        with self._lock:
            n = self._node(node)
            out = _Exposition()
            out.family("node_uname_info", "gauge", "Labeled system information as provided by the uname system call.")
            out.sample(
                "node_uname_info",
                [("machine", "x86_64"), ("nodename", n.name), ("release", "5.15.0-105-generic"), ("sysname", "Linux")],
                1,
            )
            out.family("node_boot_time_seconds", "gauge", "Node boot time, in unixtime.")
            out.sample("node_boot_time_seconds", [], 1_700_000_000 + n.index)
            return out.text()

    def render_ksm(self) -> str:
        with self._lock:
            out = _Exposition()
            nodes = list(self.nodes.values())
            out.family("kube_node_info", "gauge", "Information about a cluster node.")
            for n in nodes:
                out.sample(
                    "kube_node_info",
                    [
                        ("node", n.name),
                        ("kernel_version", "5.15.0-105-generic"),
                        ("os_image", "Ubuntu 22.04.4 LTS"),
                        ("container_runtime_version", "containerd://1.7.13"),
                        ("kubelet_version", "v1.29.4"),
                        ("kubeproxy_version", "deprecated"),
                        ("provider_id", f"sim://{self.cluster}/{n.name}"),
                        ("pod_cidr", f"10.244.{n.index}.0/24"),
                        ("system_uuid", "%08x-0000-4000-8000-%012x" % (n.index, n.index)),
                        ("internal_ip", n.internal_ip),
                    ],
                    1,
                )
            out.family("kube_node_spec_unschedulable", "gauge", "Whether a node can schedule new pods.")
            for n in nodes:
                out.sample("kube_node_spec_unschedulable", [("node", n.name)], int(n.cordoned))
            out.family("kube_node_spec_taint", "gauge", "The taint of a cluster node.")
            for n in nodes:
                for key, value, effect in self._taints(n):
                    out.sample(
                        "kube_node_spec_taint",
                        [("node", n.name), ("key", key), ("value", value), ("effect", effect)],
                        1,
                    )
            out.family(
                "kube_node_status_condition", "gauge", "The condition of a cluster node."
            )
            for n in nodes:
                conditions = {"Ready": n.ready, "MemoryPressure": "false", "DiskPressure": "false", "PIDPressure": "false"}
                if n.ready == "unknown":
                    conditions = dict.fromkeys(conditions, "unknown")
                for condition, current in conditions.items():
                    for status in ("true", "false", "unknown"):
                        out.sample(
                            "kube_node_status_condition",
                            [("node", n.name), ("condition", condition), ("status", status)],
                            int(status == current),
                        )
            for family in ("kube_node_status_capacity", "kube_node_status_allocatable"):
                out.family(family, "gauge", "The resources of a node.")
                for n in nodes:
                    out.sample(
                        family,
                        [("node", n.name), ("resource", "nvidia_com_gpu"), ("unit", "integer")],
                        len(n.gpus),
                    )
            return out.text()

    @staticmethod
    def _taints(n: Node) -> list[tuple[str, str, str]]:
        taints = [("nvidia.com/gpu", "present", "NoSchedule")]
        if n.cordoned:
            taints.append(("node.kubernetes.io/unschedulable", "", "NoSchedule"))
        if n.ready == "false":
            taints += [("node.kubernetes.io/not-ready", "", "NoSchedule"), ("node.kubernetes.io/not-ready", "", "NoExecute")]
        elif n.ready == "unknown":
            taints += [("node.kubernetes.io/unreachable", "", "NoSchedule"), ("node.kubernetes.io/unreachable", "", "NoExecute")]
        return taints

    # ------------------------------------------------------------------- HTTP

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/nodes/{node}/metrics", self._h_dcgm)
        app.router.add_get("/nodes/{node}/node-metrics", self._h_node)
        app.router.add_get("/ksm/metrics", self._h_ksm)
        app.router.add_get("/control/state", self._h_state)
        app.router.add_post("/control/{action}", self._h_control)
        return app

    @staticmethod
    def _text(body: str) -> web.Response:
        return web.Response(text=body, content_type="text/plain", charset="utf-8")

    def _scrapeable(self, node: str, *, exporter: bool) -> Node:
        try:
            n = self._node(node)
        except UnknownNode:
            raise web.HTTPNotFound(text=f"unknown node {node}\n") from None
        if n.node_down or (exporter and n.exporter_down):
            raise web.HTTPServiceUnavailable(text="target down (simulated)\n")
        return n

    async def _h_dcgm(self, request: web.Request) -> web.Response:
        node = request.match_info["node"]
        with self._lock:
            self._scrapeable(node, exporter=True)
            return self._text(self.render_dcgm(node))

    async def _h_node(self, request: web.Request) -> web.Response:
        node = request.match_info["node"]
        with self._lock:
            self._scrapeable(node, exporter=False)
            return self._text(self.render_node_exporter(node))

    async def _h_ksm(self, request: web.Request) -> web.Response:
        return self._text(self.render_ksm())

    async def _h_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    async def _h_control(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        spec = CONTROL_ACTIONS.get(action)
        if spec is None:
            return web.json_response({"error": f"unknown action {action!r}", "actions": sorted(CONTROL_ACTIONS)}, status=404)
        method_name, allowed = spec
        try:
            body = await request.json() if request.can_read_body else {}
        except json.JSONDecodeError:
            return web.json_response({"error": "body must be JSON"}, status=400)
        if not isinstance(body, dict) or set(body) - allowed:
            return web.json_response({"error": f"{action} takes {sorted(allowed)}"}, status=400)
        try:
            result = getattr(self, method_name)(**body)
        except UnknownNode as e:
            return web.json_response({"error": str(e.args[0])}, status=404)
        except (TypeError, ValueError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"ok": True, "action": action, "result": result})

    # -------------------------------------------------------------- lifecycle

    @property
    def address(self) -> str:
        """host:port, as a Prometheus target."""
        if self.port is None:
            raise RuntimeError("simulator not started")
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @contextlib.contextmanager
    def running_in_thread(self, timeout: float = 10.0) -> Iterator[GPUClusterSim]:
        """Run the server on a private event loop in a daemon thread."""
        with serving_in_thread(self, timeout=timeout):
            yield self

    # ------------------------------------------------------ Prometheus config

    def write_prometheus_config(self, path: str | Path, **kwargs: Any) -> Path:
        """`write_prometheus_config` for this running simulator."""
        return write_prometheus_config(path, self.address, self.node_names, cluster=self.cluster, **kwargs)


# action -> (method, accepted JSON keys)
CONTROL_ACTIONS: dict[str, tuple[str, frozenset[str]]] = {
    "xid": ("inject_xid", frozenset({"node", "gpu", "code"})),
    "exporter_down": ("exporter_down", frozenset({"node", "down"})),
    "node_down": ("node_down", frozenset({"node", "down"})),
    "cordon": ("cordon", frozenset({"node", "on"})),
    "not_ready": ("not_ready", frozenset({"node", "on", "status"})),
    "throttle": ("throttle", frozenset({"node", "gpu", "reasons_bitmask"})),
    "temperature": ("set_temperature", frozenset({"node", "gpu", "celsius"})),
    "ecc_dbe": ("inject_ecc_dbe", frozenset({"node", "gpu", "count"})),
    "row_remap": ("row_remap", frozenset({"node", "gpu", "failure", "pending"})),
    "nvlink_errors": ("nvlink_errors", frozenset({"node", "gpu", "crc_flit"})),
    "gpu_lost": ("gpu_lost", frozenset({"node", "gpu", "lost"})),
    "restart_exporter": ("restart_exporter", frozenset({"node"})),
    "assign_pod": ("assign_pod", frozenset({"node", "gpu", "namespace", "pod", "container"})),
    "unassign_pod": ("unassign_pod", frozenset({"node", "gpu"})),
    "clear": ("clear", frozenset({"node"})),
}


# ----------------------------------------------------------- Prometheus config


def write_prometheus_config(
    path: str | Path,
    sim_address: str,
    nodes: Iterable[str],
    *,
    cluster: str = "sim",
    alertmanager_url: str | None = None,
    rule_files: Iterable[str | Path] = (),
    scrape_interval: str = "1s",
    evaluation_interval: str = "1s",
    node_label: bool = True,
) -> Path:
    """Write a prometheus.yml that scrapes the simulator at sim_address (host:port).

    Jobs as on a real cluster: `dcgm-exporter` and `node-exporter` with one static
    target per node (labels node, cluster; __metrics_path__ per target), and
    `kube-state-metrics`. honor_labels on dcgm-exporter (keeps pod/namespace/
    container of the GPU's workload) and on kube-state-metrics.
    node_label=False: no `node` target label; `instance` is "<node>:<port>" instead
    (sites whose only node identity is the instance or dcgm's Hostname).
    """
    nodes = list(nodes)

    def per_node(suffix: str) -> list[dict[str, Any]]:
        port = 9400 if suffix == "metrics" else 9100
        return [
            {
                "targets": [sim_address],
                "labels": {**({"node": n} if node_label else {"instance": f"{n}:{port}"}), "cluster": cluster,
                           "__metrics_path__": f"/nodes/{n}/{suffix}"},
            }
            for n in nodes
        ]

    config: dict[str, Any] = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": evaluation_interval,
            "external_labels": {"cluster": cluster},
        },
        "rule_files": [str(Path(p).resolve()) for p in rule_files],
        "scrape_configs": [
            {"job_name": "dcgm-exporter", "honor_labels": True, "static_configs": per_node("metrics")},
            {"job_name": "node-exporter", "static_configs": per_node("node-metrics")},
            {
                "job_name": "kube-state-metrics",
                "honor_labels": True,
                "metrics_path": "/ksm/metrics",
                "static_configs": [{"targets": [sim_address], "labels": {"cluster": cluster}}],
            },
        ],
    }
    if alertmanager_url:
        m = re.match(r"^(https?)://([^/]+)(/.*)?$", alertmanager_url)
        if not m:
            raise ValueError(f"bad Alertmanager URL {alertmanager_url!r}")
        am: dict[str, Any] = {"scheme": m.group(1), "static_configs": [{"targets": [m.group(2)]}]}
        if m.group(3) and m.group(3) != "/":
            am["path_prefix"] = m.group(3)
        config["alerting"] = {"alertmanagers": [am]}
    path = Path(path)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# ------------------------------------------------------------------ fast rules

# Range windows of the shipped rules, shrunk so alerts fire and resolve within
# seconds at a 1 s scrape/evaluation interval. Unlisted durations are divided by 20
# (at least 5 s).
FAST_RANGES: dict[str, str] = {
    "1m": "5s",
    "2m": "10s",
    "5m": "15s",
    "10m": "30s",
    "15m": "30s",
    "30m": "1m",
    "1h": "1m",
}

_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = r"(?:\d+(?:ms|[smhdwy]))+"
# A range selector [5m] or a subquery range [1h:] / [1h:1m].
_RANGE_RE = re.compile(rf"\[({_DURATION})(?::({_DURATION})?)?\]")


def _seconds(duration: str) -> float:
    return sum(int(n) * _DURATION_UNITS[u] for n, u in re.findall(r"(\d+)(ms|[smhdwy])", duration))


def _fast_duration(duration: str, ranges: Mapping[str, str]) -> str:
    if duration in ranges:
        return ranges[duration]
    return f"{max(5, int(_seconds(duration) // 20))}s"


def fast_expr(expr: str, ranges: Mapping[str, str] = FAST_RANGES) -> str:
    """Shrink every range/subquery window in a PromQL expression; nothing else changes."""

    def sub(m: re.Match[str]) -> str:
        rng = _fast_duration(m.group(1), ranges)
        if ":" not in m.group(0):
            return f"[{rng}]"
        step = m.group(2)
        return f"[{rng}:{'1s' if step else ''}]"

    return _RANGE_RE.sub(sub, expr)


def derive_fast_rules(
    dst: str | Path,
    src: str | Path = SHIPPED_RULES,
    *,
    for_duration: str = "0s",
    ranges: Mapping[str, str] = FAST_RANGES,
) -> Path:
    """Write a copy of the alert rules for tests: every `for:` set to for_duration,
    range windows shrunk (see FAST_RANGES), group `interval` removed (the global
    evaluation interval applies). Expressions are otherwise identical."""
    doc = yaml.safe_load(Path(src).read_text())
    for group in doc.get("groups", []):
        group.pop("interval", None)
        for rule in group.get("rules", []):
            rule["expr"] = fast_expr(str(rule["expr"]), ranges)
            if "alert" in rule:
                rule["for"] = for_duration
                rule.pop("keep_firing_for", None)
    dst = Path(dst)
    dst.write_text(yaml.dump(doc, Dumper=_BlockDumper, sort_keys=False, width=1000))
    return dst


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (expressions) as `|` blocks, so the copy stays readable."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_representer)


# ----------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    """Run the simulator standalone: python -m tests.sim.gpu_cluster --port 9400"""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--cluster", default="sim")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--xid-count-metric", action="store_true")
    p.add_argument("--prometheus-config", help="also write a prometheus.yml for it here")
    p.add_argument("--rules", help="rule file for --prometheus-config")
    p.add_argument("--alertmanager-url")
    args = p.parse_args(argv)

    async def run() -> None:
        sim = GPUClusterSim(
            args.nodes, args.gpus, cluster=args.cluster, port=args.port, xid_count_metric=args.xid_count_metric
        )
        await sim.start()
        print(f"gpu cluster simulator on {sim.url} nodes={','.join(sim.node_names)}", flush=True)
        if args.prometheus_config:
            sim.write_prometheus_config(
                args.prometheus_config,
                alertmanager_url=args.alertmanager_url,
                rule_files=[args.rules] if args.rules else (),
            )
        try:
            await asyncio.Event().wait()
        finally:
            await sim.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
