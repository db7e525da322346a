"""The adversarial corpus (tests/fixtures/adversarial/) sent alongside a steady stream of good webhooks, against
the same stream alone: does hostile input delay good webhooks, fail /readyz or lose anything acknowledged?

    python -m bench.adversarial                                  # SQLite, then PostgreSQL with two replicas
    python -m bench.adversarial --phases sqlite --seconds 20 --rate 100

Each phase runs twice on a fresh store: good webhooks only, then good webhooks plus the corpus. Good webhooks
are one node's 8 GPU alerts each, every one a node never seen (4 nodes per cluster, so each keeps an incident
of its own), sent open loop at ``--rate`` per second for ``--seconds``; on PostgreSQL they alternate between
the replicas. The corpus is sent ``--corpus-passes`` times, the passes spread evenly over the run, by one sender
with ``--corpus-pause`` between requests; every pass gives the taken cases' alerts new fingerprints and nodes,
so the engine classifies them again instead of dropping them as redeliveries. Printed per run: the delay from sending a good webhook to its incident being opened (the
incident's openedAt, same clock), /readyz answers other than 200 (polled every 100 ms on every replica), good
webhooks acknowledged but with no complete incident (lost), the worst CPU time one alert's classification took
(alertd_classify_seconds_max), what was set aside, and the corpus answers by status. A benchmark: it prints
figures and asserts nothing. Bounded in time and count.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]

from testkit.alertd_proc import AlertdProcess  # noqa: E402
from testkit.ha_cluster import fresh_database  # noqa: E402
from testkit.services import start_postgres  # noqa: E402
from testkit.webhooks import UniqueWebhooks  # noqa: E402

SLACK_SECRET = "adversarial-signing-secret"  # what the corpus's signed Slack cases are signed with
CONFIG = {"log": {"level": "error"}, "notify": {"slack": {"signing_secret": SLACK_SECRET}}}
CORPUS = [json.loads(p.read_text()) for p in sorted((REPO / "tests" / "fixtures" / "adversarial").glob("*.json"))]
HOOK = "/api/v1/alerts/alertmanager"
TIMEOUT = aiohttp.ClientTimeout(total=60)
SETTLE = 900  # seconds a run may take to drain after sending


@dataclass
class Run:
    sent: dict[str, float] = field(default_factory=dict)  # node -> when its webhook was sent (epoch seconds)
    refused: Counter = field(default_factory=Counter)
    unready: Counter = field(default_factory=Counter)
    corpus: Counter = field(default_factory=Counter)  # status -> answers
    corpus_5xx: Counter = field(default_factory=Counter)  # case -> 5xx answers
    delays: list[float] = field(default_factory=list)
    lost: int = 0
    settled: bool = True  # False: still missing ones when SETTLE ran out (late, not known to be lost)
    worst_alert: float = 0.0
    set_aside: int = 0


def varied(case: dict[str, Any], n: int) -> bytes:
    """A taken case with new fingerprints and nodes for pass ``n`` (raw 4xx cases are sent as they are)."""
    if case["expect"] != "taken" or n == 0:
        return case["body"].encode()
    doc = json.loads(case["body"])
    for a in doc["alerts"]:
        a["fingerprint"] = hashlib.sha256(f"{a['fingerprint']}|{n}".encode()).hexdigest()[:16]
        a["labels"]["node"] = f"{a['labels'].get('node', '')}-p{n}"
    return json.dumps(doc).encode()


async def good_stream(session: aiohttp.ClientSession, urls: list[str], run: Run, rate: float, seconds: float) -> None:
    gen = UniqueWebhooks(run=f"good{int(time.time())}", distinct_nodes=True, nodes_per_cluster=4, seed=5)
    start = time.monotonic()
    tasks = []

    async def one(doc: dict[str, Any], url: str) -> None:
        node = doc["alerts"][0]["labels"]["node"]
        sent = time.time()
        async with session.post(url + HOOK, json=doc) as resp:
            await resp.read()
            if resp.status == 200:
                run.sent[node] = sent
            else:
                run.refused[resp.status] += 1
    for i in range(int(rate * seconds)):
        await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        tasks.append(asyncio.create_task(one(gen.next(), urls[i % len(urls)])))
    await asyncio.gather(*tasks)


async def corpus_stream(session: aiohttp.ClientSession, urls: list[str], run: Run, pause: float, passes: int,
                        seconds: float) -> None:
    """``passes`` passes over the corpus, started evenly over the run."""
    start = time.monotonic()
    for n in range(passes):
        await asyncio.sleep(max(0.0, start + n * seconds / passes - time.monotonic()))
        for case in CORPUS:
            url = urls[n % len(urls)] + case["path"]
            async with session.request(case["method"], url, data=varied(case, n), headers=case["headers"]) as resp:
                await resp.read()
                run.corpus[resp.status] += 1
                if resp.status >= 500:
                    run.corpus_5xx[case["name"]] += 1
            await asyncio.sleep(pause)


async def poll_ready(session: aiohttp.ClientSession, urls: list[str], run: Run, done: asyncio.Event) -> None:
    while not done.is_set():
        for url in urls:
            try:
                async with session.get(url + "/readyz", timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status != 200:
                        run.unready[resp.status] += 1
            except (aiohttp.ClientError, asyncio.TimeoutError):
                run.unready["no answer"] += 1
        await asyncio.sleep(0.1)


async def incidents(session: aiohttp.ClientSession, url: str) -> dict[str, dict[str, Any]]:
    """node -> its newest incident, every page."""
    out: dict[str, dict[str, Any]] = {}
    cursor = ""
    while True:
        async with session.get(url + "/api/v1/incidents", params={"limit": "1000", **({"cursor": cursor} if cursor else {})}) as resp:
            page = await resp.json()
        for inc in page["incidents"]:
            out.setdefault(inc.get("node") or "", inc)
        cursor = page.get("next") or ""
        if not cursor:
            return out


async def backlog(session: aiohttp.ClientSession, urls: list[str]) -> float:
    """Stored alerts and webhooks the engine has not taken yet, as the replicas' metrics say."""
    total = 0.0
    for url in urls:
        async with session.get(url + "/metrics") as resp:
            for line in (await resp.text()).splitlines():
                if line.startswith(("alertd_inbox_pending ", "alertd_inbox_backlog_webhooks ")):
                    total += float(line.split()[1])
    return total


async def settle(session: aiohttp.ClientSession, urls: list[str], run: Run) -> None:
    """Wait until every acknowledged good webhook is an incident of 8 members, or the engine has taken
    everything (twice in a row, two seconds apart) and some are still missing: those are lost. At most
    ``SETTLE`` seconds."""
    deadline, drained = time.monotonic() + SETTLE, 0
    while True:
        found = await incidents(session, urls[0])
        missing = [n for n in run.sent if n not in found or found[n].get("memberCount", 0) < 8]
        drained = drained + 1 if missing and await backlog(session, urls) == 0 else 0
        if not missing or drained >= 2 or time.monotonic() > deadline:
            break
        await asyncio.sleep(2)
    run.lost = len(missing)
    run.settled = not missing or drained >= 2
    for node, sent in run.sent.items():
        if node in found:
            opened = datetime.fromisoformat(found[node]["openedAt"].replace("Z", "+00:00")).timestamp()
            run.delays.append(max(0.0, opened - sent))
    for url in urls:
        async with session.get(url + "/metrics") as resp:
            for line in (await resp.text()).splitlines():
                if line.startswith("alertd_classify_seconds_max "):
                    run.worst_alert = max(run.worst_alert, float(line.split()[1]))
    async with session.get(urls[0] + "/api/v1/quarantine", params={"limit": "1000"}) as resp:
        run.set_aside = len((await resp.json())["items"]) if resp.status == 200 else -1  # -1: no quarantine API


async def measure(urls: list[str], args: argparse.Namespace, with_corpus: bool) -> Run:
    run = Run()
    done = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        poller = asyncio.create_task(poll_ready(session, urls, run, done))
        jobs = [good_stream(session, urls, run, args.rate, args.seconds)]
        if with_corpus:
            jobs.append(corpus_stream(session, urls, run, args.corpus_pause, args.corpus_passes, args.seconds))
        await asyncio.gather(*jobs)
        await settle(session, urls, run)
        done.set()
        await poller
    return run


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(name: str, base: Run, hostile: Run) -> None:
    print(f"\n{name}")
    print("| run | good acked | p50 s | p99 s | max s | /readyz not 200 | lost | worst alert CPU s | set aside | corpus answers |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for label, r in (("good only", base), ("good + corpus", hostile)):
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(r.corpus.items())) or "-"
        print(f"| {label} | {len(r.sent):,} | {statistics.median(r.delays) if r.delays else float('nan'):.3f} | "
              f"{quantile(r.delays, 0.99):.3f} | {max(r.delays, default=float('nan')):.3f} | {sum(r.unready.values())} | "
              f"{r.lost}{'' if r.settled else ' (late)'} | {r.worst_alert:.4f} | {r.set_aside} | {answers} |")
    print(f"extra delay of good webhooks with the corpus: p50 {statistics.median(hostile.delays) - statistics.median(base.delays):+.3f} s, "
          f"p99 {quantile(hostile.delays, 0.99) - quantile(base.delays, 0.99):+.3f} s, "
          f"max {max(hostile.delays) - max(base.delays):+.3f} s")
    if hostile.corpus_5xx:
        print("corpus cases answered 5xx: " + ", ".join(f"{k} x{v}" for k, v in sorted(hostile.corpus_5xx.items())))
    for label, r in (("good only", base), ("good + corpus", hostile)):
        if r.unready:
            print(f"/readyz in the {label} run: " + ", ".join(f"{k}: {v}" for k, v in r.unready.items()))
    if base.refused or hostile.refused:
        print(f"good webhooks refused: {dict(base.refused)} / {dict(hostile.refused)}")


def sqlite_phase(args: argparse.Namespace, work: Path) -> None:
    runs = []
    for with_corpus in (False, True):
        proc = AlertdProcess(work / f"sqlite-{with_corpus}", CONFIG).start(timeout=60)
        try:
            runs.append(asyncio.run(measure([proc.url], args, with_corpus)))
        finally:
            proc.stop()
    report(f"SQLite, one alertd serve (defaults), {args.rate:.0f} good webhooks/s for {args.seconds:.0f} s", *runs)


def postgres_phase(args: argparse.Namespace, work: Path) -> None:
    pg = start_postgres(work / "pg")
    runs = []
    for with_corpus in (False, True):
        cfg = {**CONFIG, "storage": {"backend": "postgres", "postgres_dsn": fresh_database(pg.dsn)}}
        replicas = [AlertdProcess(work / f"pg-{with_corpus}-{i}", cfg).start(timeout=60) for i in range(2)]
        try:
            runs.append(asyncio.run(measure([r.url for r in replicas], args, with_corpus)))
        finally:
            for r in replicas:
                r.stop()
    report(f"PostgreSQL, two replicas, {args.rate:.0f} good webhooks/s for {args.seconds:.0f} s (alternating)", *runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phases", default="sqlite,postgres")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=200.0, help="good webhooks per second")
    ap.add_argument("--corpus-pause", type=float, default=0.05, help="seconds between corpus requests")
    ap.add_argument("--corpus-passes", type=int, default=6, help="passes over the corpus, spread over the run")
    args = ap.parse_args()
    args.seconds = min(args.seconds, 120.0)  # bounded
    with tempfile.TemporaryDirectory(prefix="alertd-adversarial-") as tmp:
        work = Path(tmp)
        phases = args.phases.split(",")
        if "sqlite" in phases:
            sqlite_phase(args, work)
        if "postgres" in phases:
            postgres_phase(args, work)


if __name__ == "__main__":
    main()
