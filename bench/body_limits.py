"""Peak memory of ``alertd serve`` while N clients each send a large body to a route that takes small ones.

Each client opens a connection, sends the headers of a ``POST /ui/login`` (by default
with ``Content-Length`` of 10 MiB; ``--chunked`` names no length) and then the body
as fast as the server takes it, until the server answers or closes. The figure
printed is the server's peak resident memory (VmHWM) before and after, and how
many clients got a 413.

    .venv/bin/python -m bench.body_limits --clients 30 --mib 10
    .venv/bin/python -m bench.body_limits --clients 30 --mib 10 --chunked
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path


from testkit.alertd_proc import AlertdProcess  # noqa: E402
from testkit.big_bodies import measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--mib", type=int, default=10)
    parser.add_argument("--chunked", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        proc = AlertdProcess(Path(work), {}, serve_args=["--receivers", "0"])
        proc.start()
        try:
            got = asyncio.run(measure(proc, args.clients, args.mib * 1024 * 1024, args.chunked))
        finally:
            proc.stop()
    kind = "chunked" if args.chunked else "Content-Length"
    print(f"{args.clients} clients x {args.mib} MiB ({kind}) to /ui/login: peak RSS {got['before_kb'] / 1024:.0f} -> "
          f"{got['peak_kb'] / 1024:.0f} MB (+{(got['peak_kb'] - got['before_kb']) / 1024:.1f} MB); "
          f"413 answers: {got['answered_413']}/{args.clients}; statuses {got['statuses']}")


if __name__ == "__main__":
    main()
