"""The multi-signal storm: what reaches Slack and PagerDuty, and how fast.

20 nodes each lose a GPU within two seconds, one webhook per node (GPUXidError
79 + DCGMExporterDown + KubeNodeCordoned, the shipped alert names), through a
real ``alertd serve`` subprocess on the shipped rules, against the Slack and
PagerDuty test servers (testkit/storm.py). Per scenario and run it prints
the top-level Slack posts per channel, PagerDuty triggers per routing key,
whether the posts name every node, and the seconds from the first webhook to
the fleet incident's Slack post and page. Then the price of the hold: one node
failing alone, seconds from its webhook to its post and page, with the
shipped group_wait (2s) and with group_wait 0s.

    python -m bench.storm                    # about 3 minutes
    python -m bench.storm --runs 1 --skip-outage

Scenarios: ``hold`` (shipped rules, group_wait 2s), ``no-hold`` (group_wait
0s: what the hold buys), ``outage`` (Slack answers 503 and PagerDuty refuses
connections for the first 30 s; notify.retry.max_backoff 3s). A benchmark, not
a test: it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from testkit.loopback import serving_in_thread  # noqa: E402
from testkit.pagerduty_server import PagerDutyTestServer  # noqa: E402
from testkit.slack_server import SlackTestServer  # noqa: E402
from testkit.storm import ESCALATION_KEY, SLACK_TOKEN, StormRun  # noqa: E402


def servers() -> tuple[SlackTestServer, PagerDutyTestServer]:
    return SlackTestServer(token=SLACK_TOKEN), PagerDutyTestServer(routing_keys=[PagerDutyTestServer.ROUTING_KEY, ESCALATION_KEY])


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def storm_run(work: Path, group_wait: str, outage: float, nodes: int, seed: int) -> str:
    slack, pd = servers()
    with serving_in_thread(slack, pd), StormRun(work, slack, pd, group_wait=group_wait) as run:
        r = run.storm(nodes=nodes, spread=2.0, outage=outage, seed=seed, timeout=90 + outage)
        posts = {cid: len(ms) for cid, ms in r.top_posts.items() if ms}
        named = all(r.names_every_node(ms[0]) for ms in r.top_posts.values() if ms)
        triggers = {("infra" if k == PagerDutyTestServer.ROUTING_KEY else k[:8]): len(v) for k, v in r.triggers.items()}
        fleets = sum(1 for i in r.incidents if i["fleet"])
        return (f"top-level posts {sum(posts.values()):2d} ({max(posts.values(), default=0)} max per channel)  "
                f"pages {sum(triggers.values()):2d} {triggers}  every node named {named}  fleet incidents {fleets}  "
                f"fleet post {fmt(r.fleet_post_s)} s  page {fmt(r.fleet_page_s)} s  all delivered {fmt(r.complete_s)} s")


def single_runs(work: Path, group_wait: str, count: int) -> tuple[list[float], list[float]]:
    slack, pd = servers()
    posts, pages = [], []
    with serving_in_thread(slack, pd), StormRun(work, slack, pd, group_wait=group_wait) as run:
        for i in range(count):
            post, page = run.single(node=f"lone-{i}")
            posts.append(post)
            pages.append(page)
            time.sleep(1.1)  # Slack's one post per second per channel is not what we measure
    return posts, pages


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs per storm scenario (default 3)")
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--singles", type=int, default=5, help="lone-node incidents per group_wait setting (default 5)")
    ap.add_argument("--skip-outage", action="store_true")
    args = ap.parse_args(argv)
    scenarios = [("hold", "2s", 0.0), ("no-hold", "0s", 0.0)] + ([] if args.skip_outage else [("outage", "2s", 30.0)])
    with tempfile.TemporaryDirectory(prefix="alertd-bench-storm-") as tmp:
        base = Path(tmp)
        print(f"{args.nodes} nodes x (GPUXidError 79 + DCGMExporterDown + KubeNodeCordoned), one webhook per node within 2 s")
        for name, wait, outage in scenarios:
            for run in range(args.runs):
                line = storm_run(base / f"{name}-{run}", wait, outage, args.nodes, seed=run + 1)
                print(f"  {name:8s} run {run + 1}: {line}", flush=True)
        print("one node failing alone: seconds from its webhook to its first Slack post / its page")
        for wait in ("2s", "0s"):
            posts, pages = single_runs(base / f"single-{wait}", wait, args.singles)
            print(f"  group_wait {wait}: post median {statistics.median(posts):.3f} max {max(posts):.3f}   "
                  f"page median {statistics.median(pages):.3f} max {max(pages):.3f}", flush=True)


if __name__ == "__main__":
    main()
