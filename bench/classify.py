"""Classification alone: microseconds per alert for each way an alert can be decided.

    python -m bench.classify               # 20,000 alerts per case, best of 5 runs
    python -m bench.classify --alerts 100000 --repeat 3

Cases: a shipped name (signals.yml decides); a site's rule whose generatorURL
repeats (the parsed expression comes from the cache, as with real Alertmanager
traffic: one URL per rule); the same with every URL new (a PromQL parse per
alert: the worst case); an alert reading a recording rule (expanded from the
site's rules) and a clock-event bit test (its bits read by 512 runs of the
expression), cached and new each; the Xid code read from the summary text; an
alert nothing classifies (every source tried); stock dcgm-exporter labels on
Kubernetes (the node found through the exporter pod's answer in the Kubernetes
index); a log alert (node in host, Xid code and GPU from the NVRM line).
Normalize included, correlation not.
"""
from __future__ import annotations

import argparse
import time
from urllib.parse import quote_plus

from dataclasses import replace

from alertd.engine.classify import classify_explained
from alertd.gpu import clocks
from alertd.promql import bittest
from alertd.promql import expr as promql
from alertd.promql import recording
from alertd.promql.recording import RecordingIndex, collect
from alertd.engine.normalize import NormalizeConfig, normalize
from testkit.builders import alert, shipped_rules

XID_EXPR = "DCGM_FI_DEV_XID_ERRORS != 0 and on (node) kube_node_spec_unschedulable == 0"
RECORDED = collect([("node:dcgm_up:min", 'min by (cluster, node) (up{job="dcgm-exporter"})'),
                    ("gpu:clock_reasons:max", "max without (pod, namespace) (DCGM_FI_DEV_CLOCKS_EVENT_REASONS)")])


def url(expr: str) -> str:
    return f"http://prometheus-0:9090/graph?g0.expr={quote_plus(expr)}&g0.tab=1"


def make(case: str, n: int) -> list:
    out = []
    for i in range(n):
        node, gpu = f"gpu-node-{i // 8}", str(i % 8)
        if case == "shipped name":
            a = alert("GPUXidError", node=node, gpu=gpu, xid="79", UUID=f"GPU-{i}")
        elif case == "recording rule, cached URL":
            a = alert("GpuTelemetryLost", node=node)
            a.generator_url = url("node:dcgm_up:min == 0")
        elif case.startswith("bit test"):
            a = alert("GpuThermalSlowdown", node=node, gpu=gpu, UUID=f"GPU-{i}")
            extra = f" > {-i - 1}" if case.endswith("new URL each") else ""
            a.generator_url = url(f"(floor(gpu:clock_reasons:max / 32) % 2 == 1){extra}")
        elif case == "stock dcgm labels":
            pod = f"nvidia-dcgm-exporter-{i // 8:05d}"
            a = alert("GPUXidError", Hostname=pod, pod=pod, namespace="gpu-operator", gpu=gpu, xid="79",
                      UUID=f"GPU-{i}", instance=f"10.244.{i // 2000}.{i // 8 % 250}:9400", exported_pod="trainer-0",
                      exported_namespace="ml", pci_bus_id="00000000:3B:00.0")
        elif case == "log alert, NVRM line":
            a = alert("GPUXidLog", host=node, annotations={
                "description": f"NVRM: Xid (PCI:0000:{0x18 + int(gpu):02x}:00): 79, pid='<unknown>', name=<unknown>, "
                               "GPU has fallen off the bus."})
        elif case == "no rule matches":
            a = alert("GPUPowerDrawAtLimit", node=node, gpu=gpu, UUID=f"GPU-{i}")
            a.generator_url = url("DCGM_FI_DEV_POWER_USAGE > 690")
        else:
            a = alert("GPU_Hardware_Error", node=node, gpu=gpu, UUID=f"GPU-{i}",
                      annotations={"summary": f"{node} gpu{gpu}: XID 79"})
            if case == "expression, cached URL":
                a.generator_url = url(XID_EXPR)
            elif case == "expression, new URL each":
                a.generator_url = url(XID_EXPR + f" > {-i - 1}")  # a different expression per alert
        out.append(a)
    return out


def run(case: str, n: int, repeat: int) -> tuple[float, str]:
    """The best of ``repeat`` runs (the machine's other load only ever adds time)."""
    rules, ncfg, index = shipped_rules(), NormalizeConfig(), PodIndex()
    rules = replace(rules, recorded=RecordingIndex(RECORDED))
    best = float("inf")
    for _ in range(repeat):
        promql.facts_of_url.cache_clear()
        promql.facts_of_expr.cache_clear()
        bittest._clock_test.cache_clear()
        clocks._tested.cache_clear()
        recording.facts_of_url_expanded.cache_clear()
        alerts = make(case, n)
        started = time.perf_counter()
        for a in alerts:
            normalize(a, ncfg, index)
            d = classify_explained(a, rules, ncfg)
        best = min(best, time.perf_counter() - started)
    return best / n * 1e6, f"{d.stage} -> {d.signal.kind}"


CASES = ("shipped name", "expression, cached URL", "expression, new URL each", "recording rule, cached URL",
         "bit test, cached URL", "bit test, new URL each", "annotation text", "no rule matches",
         "stock dcgm labels", "log alert, NVRM line")


class PodIndex:
    """The service's Kubernetes index as the engine reads it: every exporter pod on gpu-node-<n>."""

    generation = 0

    def node_of_pod(self, cluster: str, namespace: str, pod: str) -> str:
        return "gpu-node-" + pod.rpartition("-")[2].lstrip("0")

    def node_of_address(self, cluster: str, address: str) -> str:
        return ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alerts", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5, help="runs per case; the best is printed")
    args = ap.parse_args()
    for case in CASES:
        us, what = run(case, args.alerts, args.repeat)
        print(f"{case:<26} {us:6.1f} us/alert  ({what})")
    hits, misses = promql.cache_info()
    print(f"URL cache in the last case: {hits} hits, {misses} misses")


if __name__ == "__main__":
    main()
