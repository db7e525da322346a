"""Resident memory of ``alertd serve`` while N connections, each after one ``GET /healthz``, send a 1 MB head
(126 fields of 8.1 KB, the last line never ended) and stay open on the client's side.

    .venv/bin/python -m bench.head_memory --connections 400

Prints the server's RSS before, with every head sent, and a second after the client closed them, and what each
connection got (431: refused at ``connections.max_head_bytes``; held: the server kept reading). A benchmark:
it prints figures and asserts nothing."""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


from testkit.alertd_proc import AlertdProcess  # noqa: E402
from testkit.big_heads import measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        proc = AlertdProcess(Path(work), {"log": {"level": "warning"}}, serve_args=["--receivers", "0"],
                             nofile=args.connections + 1024)
        proc.start()
        try:
            print(measure(proc, args.connections).line())
        finally:
            proc.stop()


if __name__ == "__main__":
    main()
