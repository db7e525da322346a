"""How long alertd's part of a silence preview takes for a storm: the matchers from a fleet's node incidents,
and the open incidents on its nodes read and matched (alertd/app/silence_preview.py).

    python -m bench.silence_preview                     # 60 and 500 nodes, SQLite
    python -m bench.silence_preview --nodes 60 500 2000 --runs 5

A rack's heat on N nodes (GPUTemperatureHigh and GPUClockEventThrottling on two GPUs each, the labels of
deploy/prometheus/gpu-alerts.yml) goes through the shipped rules' engine and is committed to SQLite
through ``commit_step``, as the engine commits it; an hour later, one GPU of each node reports an Xid 79
(it joins the node's incident, so the silence's alertnames include it). Alertmanager's answer is left out (a stub answers no alerts): its
``GET /api/v2/alerts`` is one request whatever the size. Each figure is the median of ``--runs``.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from alertd.alertmanager.silences import Matcher
from alertd.app.silence_preview import preview_silence
from alertd.config.settings import parse_config
from alertd.core.json_types import JSONObject
from alertd.core.model import Alert
from alertd.engine.pipeline import Engine
from alertd.receive.payload import fingerprint_of
from alertd.rules.ruleset import load_rules
from alertd.store.base import Step
from alertd.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)


class NoAlerts:
    async def alerts_matching(self, matchers: list[Matcher]) -> list[JSONObject]:
        return []


def alert(alertname: str, node: str, gpu: int, **extra: str) -> Alert:
    labels = {"alertname": alertname, "cluster": "prod", "node": node, "gpu": str(gpu), "severity": "warning",
              "UUID": f"GPU-{node}-{gpu}", "pci_bus_id": f"00000000:{0x18 + gpu:02X}:00.0", **extra}
    return Alert(fingerprint=fingerprint_of(labels), status="firing", labels=labels, annotations={},
                 starts_at=T0 - timedelta(minutes=5), ends_at=None, received_at=T0)


async def run(nodes: int, runs: int) -> tuple[float, int, int]:
    rules = load_rules([str(ROOT / "rules")])
    engine = Engine(rules)
    names = [f"gpu-r{n // 20:02d}-{n % 20:02d}" for n in range(nodes)]
    heat = [alert(a, n, g, **extra) for n in names for g in (0, 1)
            for a, extra in (("GPUTemperatureHigh", {}), ("GPUClockEventThrottling", {"clock_event_reasons": "64"}))]
    changes = engine.ingest(heat, T0)
    changes += engine.ingest([alert("GPUXidError", n, 5, xid="79", severity="critical") for n in names],
                             T0 + timedelta(hours=1))
    store = SqliteStore(Path(tempfile.mkdtemp(prefix="alertd-silence-bench-")) / "alertd.sqlite3")
    await store.open()
    try:
        await store.commit_step(Step(changes=changes, next_seq=engine.state.next_seq))
        fleet = next(i for i in engine.state.incidents.values() if i.fleet and "thermal" in i.signals)
        cfg = parse_config({}, "bench")
        times, muted, overlap = [], 0, 0
        for _ in range(runs):
            started = time.perf_counter()
            preview = await preview_silence(store, NoAlerts(), cfg, fleet)
            times.append((time.perf_counter() - started) * 1000)
            muted, overlap = len(preview.incidents), len(preview.overlap)
        return statistics.median(times), muted, overlap
    finally:
        await store.close()


async def main(args: argparse.Namespace) -> None:
    print(f"{'nodes':>6} {'median ms':>10} {'node incidents muted':>21} {'other incidents muted':>22}")
    for n in args.nodes:
        ms, muted, overlap = await run(n, args.runs)
        print(f"{n:6} {ms:10.1f} {muted:21} {overlap:22}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[60, 500])
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
