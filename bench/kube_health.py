"""The kube-health source's cost per watch event and its memory per node, without an API server.

A fleet of N GPU nodes as a list (each with Ready, NPD's GPUXidError and the EKS AcceleratedHardwareReady
conditions, a tenth of them bad), then M MODIFIED events as heartbeats deliver them (nothing changed: the
common case, which must store nothing), then an admission storm (R pods rejected on one node). Prints the
rates and the source's memory (tracemalloc) after the list. The inbox append is a no-op counter: the store's
cost is bench/receive.py's.

    python -m bench.kube_health --nodes 5000 --events 50000 --rejections 2000
"""
from __future__ import annotations

import argparse
import asyncio
import time
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any


from alertd.rules.ruleset import load_rules  # noqa: E402
from alertd.sources.kube_health import KubeHealthSource  # noqa: E402
from alertd.sources.settings import KubeHealthSettings  # noqa: E402

NOW = datetime.now(timezone.utc)
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2817, name=python3, GPU has fallen off the bus."


def ts(seconds: float = 0) -> str:
    return (NOW + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(i: int, beat: int = 0) -> dict[str, Any]:
    bad = i % 10 == 0
    return {"metadata": {"name": f"gpu-node-{i:05d}", "resourceVersion": str(i + beat)}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": ts(beat),
         "lastTransitionTime": ts(-86400)},
        {"type": "GPUXidError", "status": "True" if bad else "False", "reason": "GPUXidCritical" if bad else "NoGPUXidError",
         "message": XID79 if bad else "no critical NVRM Xid in the kernel log", "lastHeartbeatTime": ts(beat),
         "lastTransitionTime": ts(-600)},
        {"type": "AcceleratedHardwareReady", "status": "True", "reason": "NvidiaAcceleratedHardwareReady",
         "lastHeartbeatTime": ts(beat), "lastTransitionTime": ts(-86400)}]}}


class Api:
    async def read(self, api_name: str, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"metadata": {"labels": {"job-name": f"job-{hash(args[0]) % 50}"}}}

    async def stream(self, api_name: str, method: str, **kwargs: Any) -> Any:
        raise RuntimeError("no watch in the benchmark")


async def main(args: argparse.Namespace) -> None:
    rules = load_rules([Path(__file__).resolve().parents[1] / "rules"])
    stored = [0]

    async def receive(body: bytes, alerts: int, received_at: datetime | None = None) -> int:
        stored[0] += alerts
        return stored[0]

    tracemalloc.start()
    base = tracemalloc.take_snapshot()
    src = KubeHealthSource(KubeHealthSettings(enabled=True), lambda: rules.kube_health, Api(), receive,
                           clock=lambda: NOW)
    nodes = [node(i) for i in range(args.nodes)]
    t0 = time.perf_counter()
    for n in nodes:
        await src.node_seen(n)
    listed = time.perf_counter() - t0
    del nodes, n  # only what the source keeps is measured
    size = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(base, "filename"))
    tracemalloc.stop()
    print(f"list of {args.nodes} nodes: {listed:.2f} s ({args.nodes / listed:,.0f} nodes/s), "
          f"{stored[0]} alerts stored, source memory {size / 1024 / 1024:.1f} MiB ({size / args.nodes:,.0f} B/node)")
    before = stored[0]
    t0 = time.perf_counter()
    for j in range(args.events):
        await src.node_seen(node(j % args.nodes, beat=j))
    beats = time.perf_counter() - t0
    print(f"{args.events} heartbeat MODIFIED events: {beats:.2f} s ({args.events / beats:,.0f} events/s), "
          f"{stored[0] - before} alerts stored")
    t0 = time.perf_counter()
    for r in range(args.rejections):
        await src.event_seen({"metadata": {"name": f"p{r}.1", "namespace": "train"}, "type": "Warning",
                              "involvedObject": {"kind": "Pod", "namespace": "train", "name": f"p{r}"},
                              "reason": "UnexpectedAdmissionError", "source": {"component": "kubelet",
                                                                               "host": "gpu-node-00001"},
                              "message": "Allocate failed due to requested number of devices unavailable for "
                                         "nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected",
                              "firstTimestamp": ts(), "lastTimestamp": ts()})
    src.clock = lambda: NOW + timedelta(seconds=10)
    await src.admission_due()
    storm = time.perf_counter() - t0
    assert src.admission is not None
    kept = sum(len(b.pods) for b in src.admission.bursts.values())
    print(f"{args.rejections} admission failures on one node: {storm:.2f} s ({args.rejections / storm:,.0f}/s), "
          f"{kept} pods kept (max_pods), {stored[0] - before} alert stored")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--events", type=int, default=50000)
    parser.add_argument("--rejections", type=int, default=2000)
    asyncio.run(main(parser.parse_args()))
