"""Disk use through an alert storm: N nodes x 8 GPU alerts against `alertd serve` on durable SQLite.

    python -m bench.disk_storm --nodes 20000

Prints the peak WAL, the peak and final data directory and the bytes per alert (sampled every 0.5 s),
and the largest tables (SQLite dbstat). Bounded: one storm, every wait has a deadline. Loopback only.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from testkit.alertd_proc import AlertdProcess  # noqa: E402
from testkit.disk_storm import run_storm  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="alertd-disk-storm-") as work:
        server = AlertdProcess(Path(work), {"log": {"level": "warning"}})
        server.start()
        try:
            sizes = run_storm(server, args.nodes, conns=args.conns, timeout=args.timeout)
            print(sizes.summary())
            with server.db() as conn:
                rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 12")
                for name, size in rows:
                    print(f"  {name:40} {size / 1024 / 1024:8.1f} MB  {size / sizes.alerts:6.0f} B/alert")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
