"""How a growing thermal storm's steps scale: one rack node after another, each with 8 hot throttling GPUs,
one node per engine step (testkit/thermal.py's shapes), on the pure engine and a virtual clock.

Every step notes the new node's GPUs in the fleet's ``storm_gpus`` and says its readings again
(alertd/engine/storm/extent.py); a step's cost must not grow with the GPUs noted before it.

    python -m bench.thermal_storm                 # 500, 1,000 and 2,000 nodes
    python -m bench.thermal_storm --sizes 4000
"""
from __future__ import annotations

import argparse
import time
from typing import Sequence

from testkit.builders import at, engine
from testkit.thermal import hot_node, rack_temps


def run(nodes: int) -> tuple[float, str]:
    """CPU seconds (other work on the machine aside) to feed ``nodes`` nodes one per step, and what the
    fleet says at the end (to compare runs)."""
    e = engine()
    started = time.process_time()
    for i in range(nodes):
        e.ingest(hot_node(f"gpu-r07-n{i:04d}", rack_temps(i)), at(i * 0.5))
        e.tick(at(i * 0.5))
    took = time.process_time() - started
    [fleet] = [f for f in e.state.incidents.values() if f.fleet]
    return took, f"{fleet.severity} | {fleet.title}"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="500,1000,2000", help="comma-separated node counts")
    args = ap.parse_args(argv)
    for size in (int(s) for s in args.sizes.split(",")):
        took, said = run(size)
        print(f"{size:>6} nodes  {took:7.2f} s  {took / size * 1000:6.2f} ms/step  {said}")


if __name__ == "__main__":
    main()
