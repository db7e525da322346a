"""Notification latency and outbox throughput against the Slack Web API test server.

1. Latency: webhook sent -> first Slack post of its incident (chat.postMessage
   received by the test server), at a steady rate of new incidents (default 100
   per minute for 60 s), no enrichment, no debounce. Incidents are spread over
   a few clusters, each routed to its own channel, so Slack's one post per
   second per channel is not the bottleneck; ``--channels 1`` shows what that
   limit does when everything goes to one channel.
2. Throughput: N incidents queued at once, Slack answering every call after
   200 ms; posts per second, then the resolve wave (one edit and one thread
   reply per incident) in calls per second.

    python -m bench.notify_latency                # about 80 s
    python -m bench.notify_latency --quick        # 20 incidents in 12 s, small throughput run

alertd runs in-process with its real store (SQLite, synchronous=FULL in a temp
dir), engine, router, outbox and slack_sdk client; the test server is on
127.0.0.1 in the same process, so both sides read the same monotonic clock.
"""
from __future__ import annotations

from alertd.core.incident_commands import Resolve
import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

ROOT = Path(__file__).resolve().parents[1]

from alertd.config.settings import parse_config  # noqa: E402
from alertd.app.assemble import build_service  # noqa: E402
from alertd.rules.ruleset import load_rules  # noqa: E402
from alertd.store.sqlite import SqliteStore  # noqa: E402
from testkit.served import served  # noqa: E402
from testkit.slack_server import SlackTestServer  # noqa: E402
from testkit.webhooks import gpu_alert, webhook  # noqa: E402

HOOK = "/api/v1/alerts/alertmanager"


def routing_yaml(channels: int) -> str:
    receivers = "\n".join(f"    - name: c{i}\n      slack: \"#bench-{i}\"" for i in range(channels))
    routes = "\n".join(f"    - match: ['cluster=\"cluster-{i}\"']\n      receiver: c{i}" for i in range(channels))
    # group_wait 0s: this measures the notification path; what the default 2s hold costs is in bench/storm.py
    return f"routing:\n  group_wait: 0s\n  receivers:\n{receivers}\n  routes:\n{routes}\n  default_receiver: c0\n"


def make_rules(tmp: Path, channels: int) -> Path:
    d = tmp / "rules"
    d.mkdir()
    for name in ("xid-catalog.yml", "signals.yml"):
        shutil.copy(ROOT / "rules" / name, d / name)
    # Storm folding would (rightly) turn 25 nodes with Xid 79 into one fleet incident: off, so each is new.
    correlation = (ROOT / "rules" / "correlation.yml").read_text()
    assert "  storm:\n    enabled: true" in correlation
    (d / "correlation.yml").write_text(correlation.replace("  storm:\n    enabled: true", "  storm:\n    enabled: false"))
    (d / "routing.yml").write_text(routing_yaml(channels))
    return d


class Bench:
    def __init__(self, tmp: Path, slack: SlackTestServer, *, channels: int, per_channel: float):
        self.slack = slack
        doc = {
            "rules": {"paths": [str(make_rules(tmp, channels))]},
            "storage": {"sqlite_path": str(tmp / "alertd.sqlite3")},
            "notify": {"slack": {"token": slack.token, "base_url": slack.base_url, "debounce": "0s",
                                 "rate": {"per_channel": per_channel}}},
        }
        self.cfg = parse_config(doc, "bench")
        self.channels = channels

    async def start(self) -> None:
        store = SqliteStore(self.cfg.storage.sqlite_path)
        rules = load_rules(self.cfg.rule_paths)
        self.svc = build_service(self.cfg, store, rules)
        self.client = TestClient(TestServer(served(self.svc), host="127.0.0.1"))
        await self.client.start_server()

    async def stop(self) -> None:
        await self.client.close()

    def doc(self, i: int, run: str) -> dict:
        cluster = f"cluster-{i % self.channels}"
        node = f"{run}-node-{i:05d}"
        starts = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=30)
        a = gpu_alert(cluster, node, i % 8, 0, starts_at=starts, extra={"xid": "79", "severity": "critical"})
        return webhook([a], cluster=cluster, node=node)

    async def send(self, doc: dict) -> float:
        sent = time.monotonic()
        resp = await self.client.post(HOOK, data=json.dumps(doc), headers={"Content-Type": "application/json"})
        assert resp.status == 200, await resp.text()
        await resp.read()
        return sent


def first_posts(slack: SlackTestServer) -> dict[str, float]:
    """node -> time of the first top-level post naming it."""
    out: dict[str, float] = {}
    for c in slack.calls_of("chat.postMessage"):
        if c.params.get("thread_ts"):
            continue
        text = c.params.get("text", "")
        node = text.split(" on ", 1)[1].split(" ", 1)[0] if " on " in text else ""
        out.setdefault(node, c.at)
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))]


async def latency(n: int, seconds: float, channels: int, per_channel: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="alertd-bench-") as tmp:
        slack = SlackTestServer(token="xoxb-bench")
        await slack.start()
        bench = Bench(Path(tmp), slack, channels=channels, per_channel=per_channel)
        await bench.start()
        try:
            sent: dict[str, float] = {}
            interval = seconds / n
            t0 = time.monotonic()
            for i in range(n):
                delay = t0 + i * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                doc = bench.doc(i, "lat")
                sent[doc["groupLabels"]["node"]] = await bench.send(doc)
            deadline = time.monotonic() + 120
            while len(first_posts(slack).keys() & sent.keys()) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            posted = first_posts(slack)
            lat = [(posted[node] - at) * 1000 for node, at in sent.items() if node in posted]
            return {"incidents": n, "over_s": seconds, "channels": channels, "posted": len(lat),
                    "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "max_ms": max(lat)}
        finally:
            await bench.stop()
            await slack.stop()


async def throughput(n: int, channels: int, per_channel: float, delay: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="alertd-bench-") as tmp:
        slack = SlackTestServer(token="xoxb-bench", delay=delay)
        await slack.start()
        bench = Bench(Path(tmp), slack, channels=channels, per_channel=per_channel)
        await bench.start()
        try:
            t0 = time.monotonic()
            for i in range(n):
                await bench.send(bench.doc(i, "thr"))
            queued = time.monotonic() - t0
            while len(slack.calls_of("chat.postMessage")) < n:
                await asyncio.sleep(0.02)
            posts_s = time.monotonic() - t0
            # the resolve wave: every incident is edited and gets a summary reply
            rows = await bench.svc.store.list_incidents(status="open", limit=n)
            before = len(slack.calls)
            t1 = time.monotonic()
            for row in rows:
                await bench.svc.run(Resolve(row["id"], "bench"))
            while len(slack.calls) - before < 2 * len(rows):
                await asyncio.sleep(0.02)
            wave_s = time.monotonic() - t1
            return {"incidents": n, "channels": channels, "delay_ms": delay * 1000, "queued_s": queued,
                    "posts_per_s": n / posts_s, "resolve_calls_per_s": 2 * len(rows) / wave_s,
                    "posts_s": posts_s, "wave_s": wave_s}
        finally:
            await bench.stop()
            await slack.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--incidents", type=int, default=100, help="new incidents in the latency run (default 100)")
    ap.add_argument("--seconds", type=float, default=60.0, help="spread over this many seconds (default 60)")
    ap.add_argument("--channels", type=int, default=4, help="channels (one per cluster) in the latency run")
    ap.add_argument("--per-channel", type=float, default=1.0, help="posts per second per channel (default 1)")
    ap.add_argument("--slow-incidents", type=int, default=200, help="incidents in the throughput run")
    ap.add_argument("--slow-channels", type=int, default=50, help="channels in the throughput run")
    ap.add_argument("--delay", type=float, default=0.2, help="Slack answer delay in the throughput run (s)")
    ap.add_argument("--quick", action="store_true", help="small, fast run")
    args = ap.parse_args(argv)
    # Deferrals of a busy channel are logged as warnings; they are expected here.
    logging.basicConfig(level=logging.ERROR)
    if args.quick:
        args.incidents, args.seconds, args.slow_incidents, args.slow_channels = 20, 12.0, 40, 20
    lat = asyncio.run(latency(args.incidents, args.seconds, args.channels, args.per_channel))
    print(f"latency  webhook -> first Slack post: {lat['incidents']} new incidents over {lat['over_s']:.0f} s "
          f"({lat['incidents'] * 60 / lat['over_s']:.0f}/min), {lat['channels']} channel(s) at {args.per_channel:g} post/s, "
          f"debounce 0: p50 {lat['p50_ms']:.1f} ms, p95 {lat['p95_ms']:.1f} ms, max {lat['max_ms']:.1f} ms "
          f"({lat['posted']}/{lat['incidents']} posted)")
    thr = asyncio.run(throughput(args.slow_incidents, args.slow_channels, args.per_channel, args.delay))
    print(f"throughput  Slack answering in {thr['delay_ms']:.0f} ms: {thr['incidents']} incidents over "
          f"{thr['channels']} channels queued in {thr['queued_s']:.1f} s; posts {thr['posts_per_s']:.1f}/s "
          f"(all posted after {thr['posts_s']:.1f} s); resolve wave (edit + thread reply each) "
          f"{thr['resolve_calls_per_s']:.1f} calls/s ({thr['wave_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
