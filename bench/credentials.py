"""What the edge's credential checks and the log's redaction cost, in process: CPU per call, best of 5.

    python -m bench.credentials
    python -m bench.credentials --calls 100000

The webhook lane asks ``Authenticator.receiver_principal`` for every webhook it takes: the token
comparison (right credentials are taken whatever the throttle says, so the throttle is asked only of
wrong ones, on aiohttp's route). Shown beside the comparison alone. The redaction filter
runs once per log line: shown for an ordinary line and for aiohttp's refusal of a 7.7 KB head. A benchmark:
it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import functools
import logging
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from multidict import CIMultiDict  # noqa: E402

from alertd.config.settings import parse_config  # noqa: E402
from alertd.core.redaction import RedactingFilter, Redactor  # noqa: E402
from alertd.web.auth import Authenticator  # noqa: E402
from alertd.web.guard import EdgePolicy, client_from  # noqa: E402
from testkit.webhooks import dumps, node_webhook  # noqa: E402

TOKEN = "rcv-7d2e9a41c6b8f0153e9d"


def best_us(fn, calls: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, time.process_time() - started)
    return best / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=50_000)
    calls = parser.parse_args().calls
    cfg = parse_config({"receiver": {"auth": {"bearer_token": TOKEN}}}, "bench")
    auth = Authenticator.from_config(cfg)
    auth.client_from = functools.partial(client_from, EdgePolicy.from_config(cfg))
    headers = CIMultiDict({"Host": "127.0.0.1:9095", "Authorization": f"Bearer {TOKEN}",
                           "Content-Type": "application/json"})
    from datetime import datetime, timezone
    body = dumps(node_webhook("bench", "bench-node-1", starts_at=datetime(2026, 12, 6, tzinfo=timezone.utc)))
    head = b"POST /api/v1/alerts/alertmanager HTTP/1.1\nAuthorization: Bearer " + TOKEN.encode() + b"\n\n" + body
    filt = RedactingFilter(Redactor([TOKEN, "adm-3f8b1e6c9a2d4075b8e1", "c4ca4238a0b923820dcc509a6f75849b"]))

    def redact(msg: str, *args: object) -> None:
        filt.filter(logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, msg, args, None))

    rows = [
        ("token comparison alone (Credentials.identify)", lambda: auth.receiver.identify(headers, "10.1.2.3")),
        ("the lane's question (receiver_principal)", lambda: auth.receiver_principal("10.1.2.3", headers)),
        ("redaction of an ordinary log line", lambda: redact("webhook stored: %d alerts from %s", 8, "10.1.2.3")),
        (f"redaction of a refused {len(head) / 1024:.1f} KB raw head", lambda: redact("Bad request: %r", head)),
    ]
    for name, fn in rows:
        print(f"{name:<55} {best_us(fn, calls if 'KB' not in name else calls // 50):8.2f} µs")


if __name__ == "__main__":
    main()
