"""What the receive path costs per webhook, in process and without HTTP: decoding and validating the
body, building the inbox entries, and the durable inbox append (SQLite, synchronous=FULL, group commit
of 16 concurrent webhooks, as 16 connections would give).

    python -m bench.receive                  # 4,000 webhooks of 8 GPU alerts, best of 5 rounds
    python -m bench.receive --webhooks 8000 --group 32

The schema path (decode_body + jsonschema) is what a refused webhook, or one only msgspec is stricter
about, goes through; it is shown for comparison. A benchmark: it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from alertd.receive.payload import (  # noqa: E402
    decode_body, delivery_key, parse_notification, read_notification, read_stored)
from alertd.store.sqlite import SqliteStore  # noqa: E402
from testkit.webhooks import UniqueWebhooks, dumps  # noqa: E402


def best_cpu_us(fn, items: list, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for item in items:
            fn(item)
        best = min(best, time.process_time() - started)
    return best / len(items) * 1e6


async def append(bodies: list[bytes], group: int, work: Path) -> tuple[float, float, float]:
    now = datetime.now(timezone.utc)
    store = SqliteStore(work / "alertd.sqlite3")
    await store.open()
    try:
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for i in range(0, len(bodies), group):
            await asyncio.gather(*(store.append_hook(body, now, 8) for body in bodies[i:i + group]))
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    finally:
        await store.close()
    n = len(bodies)
    return wall / n * 1e6, (after.ru_utime - before.ru_utime) / n * 1e6, (after.ru_stime - before.ru_stime) / n * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--webhooks", type=int, default=4000)
    parser.add_argument("--group", type=int, default=16, help="webhooks appended concurrently (one group commit)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    gen = UniqueWebhooks(run="receive", nodes=args.webhooks, seed=7)
    bodies = [dumps(gen.next()) for _ in range(args.webhooks)]
    now = datetime.now(timezone.utc)
    print(f"{args.webhooks} webhooks of 8 GPU alerts ({sum(map(len, bodies)) // len(bodies):,} bytes each); "
          f"CPU per webhook, best of {args.rounds}")
    print("| step | µs per webhook |\n|---|---:|")
    checked = best_cpu_us(lambda b: read_notification(b, now, build=False), bodies, args.rounds)
    fast = best_cpu_us(lambda b: read_notification(b, now), bodies, args.rounds)
    stored = best_cpu_us(lambda b: read_stored(b, now), bodies, args.rounds)
    slow = best_cpu_us(lambda b: parse_notification(decode_body(b), now), bodies, max(1, args.rounds // 2))
    notes = [read_notification(b, now) for b in bodies]
    entries = best_cpu_us(lambda n: [delivery_key(a) for a in n.alerts], notes, args.rounds)
    print(f"| decode and check (msgspec, calendar), no alerts built: the receive path | {checked:.0f} |")
    print(f"| decode and validate, alerts built (read_notification) | {fast:.0f} |")
    print(f"| the engine reading a stored webhook (read_stored: no time pattern again), alerts built | {stored:.0f} |")
    print(f"| the same through decode_body + jsonschema (refusals) | {slow:.0f} |")
    print(f"| idempotency keys (computed by the engine when it takes the webhook) | {entries:.0f} |")
    work = Path(tempfile.mkdtemp(prefix="alertd-bench-receive-"))
    try:
        wall, user, system = asyncio.run(append(bodies, args.group, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"| inbox log append, groups of {args.group} (SQLite, synchronous=FULL): wall / user CPU / system CPU | "
          f"{wall:.0f} / {user:.0f} / {system:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
