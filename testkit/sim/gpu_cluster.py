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

Beside it: testkit/sim/prometheus_config.py (a scrape config for the simulator)
and testkit/sim/fast_rules.py (a copy of the shipped alert rules that fires in seconds).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web

from testkit.sim.cluster_state import DCGM_FIELDS, GPU, Node, PodRef, UnknownNode
from testkit.sim.exposition import Exposition
from testkit.sim.kube_state import ksm_text, node_exporter_text
from testkit.sim.targets import ScrapeTargets

DEFAULT_MODEL = "NVIDIA H100 80GB HBM3"
DEFAULT_DRIVER = "550.90.07"
# PCI buses of the eight GPUs on an HGX H100 board, in dcgm-exporter's format.
HGX_PCI_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
# Kubernetes' random-suffix alphabet (no vowels, no look-alikes).
_K8S_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# ------------------------------------------------------------------ simulator


class GPUClusterSim(ScrapeTargets):
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

    def cordon(self, node: str, on: bool = True, mark: str | None = None) -> None:
        """Cordon or uncordon. ``mark``: cordoned by alertd's remediation for that incident, which also sets
        its taint (alertd/remediation/kube.py; key from rules/remediation.yml); an uncordon removes it."""
        with self._lock:
            n = self._node(node)
            n.cordoned = on
            n.marked_for = mark if on else None

    def reload_driver(self, node: str) -> None:
        """What the reboot of a repair does to the GPUs (Xid gauge and volatile counters back to 0, a GPU
        that fell off the bus back), leaving the cordon and the Ready condition as they are."""
        with self._lock:
            for gpu in self._node(node).gpus:
                gpu.reset()

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
            out = Exposition()
            for name, kind, help_text, read in DCGM_FIELDS:
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

    def _render_xid_count(self, out: Exposition, n: Node, gpus: list[GPU]) -> None:
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
            return node_exporter_text(self._node(node))

    def render_ksm(self) -> str:
        with self._lock:
            return ksm_text(list(self.nodes.values()), self.cluster)

    # ------------------------------------------------------------------- HTTP

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/control/state", self._h_state)
        app.router.add_post("/control/{action}", self._h_control)
        return app

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
            return self.exposition(self.render_dcgm(node))

    async def _h_node(self, request: web.Request) -> web.Response:
        node = request.match_info["node"]
        with self._lock:
            self._scrapeable(node, exporter=False)
            return self.exposition(self.render_node_exporter(node))

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
    def url(self) -> str:
        return f"http://{self.address}"


# action -> (method, accepted JSON keys)
CONTROL_ACTIONS: dict[str, tuple[str, frozenset[str]]] = {
    "xid": ("inject_xid", frozenset({"node", "gpu", "code"})),
    "exporter_down": ("exporter_down", frozenset({"node", "down"})),
    "node_down": ("node_down", frozenset({"node", "down"})),
    "cordon": ("cordon", frozenset({"node", "on", "mark"})),
    "reload_driver": ("reload_driver", frozenset({"node"})),
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


# ----------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    """Run the simulator standalone: python -m testkit.sim.gpu_cluster --port 9400"""
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
