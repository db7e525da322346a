"""The pure engine alone: normalize + classify + correlate, microseconds per alert.

    python -m bench.engine                 # 30,000 alerts, storm folding off and on
    python -m bench.engine --alerts 100000
    python -m bench.engine --cold          # a cold storm through engine + router + commit (bench/engine_cold.py)

No store, no HTTP: the cost that every other figure builds on. Alerts mimic a
fleet: 8 GPUs per node, an Xid on every fifth alert, the other GPU and node
signals on the rest, fed in steps of 2,000 as the service would.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

from testkit.builders import alert, at, engine, xid

KINDS = ("DCGMExporterDown", "KubeNodeCordoned", "GPUNVLinkErrors", "GPUTemperatureHigh")


def make_alerts(n: int) -> list:
    out = []
    for i in range(n):
        node = f"n{i // 8}"
        a = xid(79 if i % 3 else 48, node=node, gpu=str(i % 8)) if i % 5 == 0 else \
            alert(KINDS[i % 4], node=node, gpu=str(i % 8), UUID=f"GPU-{i}", severity="warning")
        a.fingerprint = f"{i:016x}"
        out.append(a)
    return out


def run(n: int, storm: bool) -> tuple[float, float, int]:
    """Microseconds per alert the first time, then with every alert sent again (Alertmanager's repeat: same
    labels and annotations, a later start), and the open incidents."""
    e = engine()
    if not storm:
        e.correlator.rules = replace(e.correlator.rules, storm=replace(e.correlator.rules.storm, enabled=False))
    alerts = make_alerts(n)
    again = [replace(a, starts_at=at(600), received_at=at(600)) for a in alerts]
    took = []
    for batch, offset in ((alerts, 0), (again, 600)):
        started = time.perf_counter()
        for k in range(0, n, 2000):
            e.ingest(batch[k:k + 2000], at(offset + k / 100))
        took.append((time.perf_counter() - started) / n * 1e6)
    return took[0], took[1], len(e.state.incidents)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alerts", type=int, default=30000)
    ap.add_argument("--cold", action="store_true", help="the cold storm phase: CPU per webhook, engine/router/store")
    ap.add_argument("--nodes", type=int, default=10000, help="--cold: never-seen nodes, one webhook each")
    ap.add_argument("--step", type=int, default=32, help="--cold: webhooks per engine step")
    ap.add_argument("--profile", default="", help="--cold: write a cProfile of the run here")
    args = ap.parse_args()
    if args.cold:
        from bench.engine_cold import report
        report(args.nodes, args.step, args.profile)
        return
    for storm in (False, True):
        first, again, incidents = run(args.alerts, storm)
        print(f"storm folding {'on ' if storm else 'off'}: {first:6.1f} us/alert, {args.alerts} alerts -> {incidents} "
              f"open incidents; sent again: {again:6.1f} us/alert")


if __name__ == "__main__":
    main()
