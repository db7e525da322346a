"""How fast one client address can guess the receiver's token: ``alertd serve``, and a guesser sending wrong
bearer tokens on C connections at once for T seconds, from one loopback address.

    .venv/bin/python -m bench.guessing --connections 32 --seconds 20

Prints the answers per second by status. A 401 is a comparison the guesser learnt from. A 429 is one too
where the credentials are compared before the throttle (a right token would have been taken), and none where
the throttle answers first. A benchmark: it prints figures and asserts nothing."""
from __future__ import annotations

import argparse
import http.client
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path


from testkit.alertd_proc import AlertdProcess  # noqa: E402

TOKEN = "rcv-5b1f0c7e93a24d68be10"
SOURCE = "127.0.0.9"


def guess(port: int, until: float, counts: Counter[int], lock: threading.Lock, seed: int) -> None:
    n = 0
    while time.monotonic() < until:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(SOURCE, 0))
        try:
            conn.request("POST", "/api/v1/alerts/alertmanager", b"{}", {
                "Content-Type": "application/json", "Authorization": f"Bearer guess-{seed:03d}-{n:08d}"})
            status = conn.getresponse().status
        except OSError:
            status = 0
        finally:
            conn.close()
        n += 1
        with lock:
            counts[status] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "token").write_text(TOKEN + "\n")
        proc = AlertdProcess(Path(work), {"log": {"level": "warning"},
                                          "receiver": {"auth": {"bearer_token_file": str(Path(work) / "token")}}},
                             serve_args=["--receivers", "0"])
        proc.start()
        counts: Counter[int] = Counter()
        lock = threading.Lock()
        try:
            until = time.monotonic() + args.seconds
            threads = [threading.Thread(target=guess, args=(proc.port, until, counts, lock, i))
                       for i in range(args.connections)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            proc.stop()
    rates = ", ".join(f"{status}: {count / args.seconds:.2f}/s" for status, count in sorted(counts.items()))
    print(f"{args.connections} connections for {args.seconds:g} s from one address: {sum(counts.values())} answers; "
          f"{rates}")


if __name__ == "__main__":
    main()
