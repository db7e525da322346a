"""Pages and first-page latency of hand-built stories, replayed as Alertmanager delivers them.

    python -m bench.paging [--group-wait 2s,30s,60s] [--seeds 5] [--pending 5m10s]

Each story (bench/amcadence.py) is delivered with Alertmanager's cadence
(group_wait 30s, group_interval 5m, by alertname+cluster+node and by
alertname+cluster), replayed through ``alertd replay``'s code with the shipped
rules, and scored: PagerDuty triggers (a first page of an incident on a
routing key; a fleet page that takes over a node's page is no new trigger) and
the delay of each trigger from the first alert alertd received for its incident
(a fleet: for its first node). Prints one
line per story, route and group_wait, and a summary line per group_wait.
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any


from alertd.authoring.replay import Recording, replay  # noqa: E402
from alertd.core.durations import parse_duration  # noqa: E402
from alertd.rules.ruleset import RuleSet, load_rules  # noqa: E402
from bench.amcadence import Life, deliver  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ROUTES = {"node": ("alertname", "cluster", "node"), "name": ("alertname", "cluster")}


@dataclasses.dataclass(slots=True)
class Score:
    triggers: int  # PagerDuty triggers on the paging keys
    first_alert: datetime | None  # the first alert alertd received
    first_page: datetime | None
    incidents: int
    posts: int  # top-level Slack posts
    delays: list[float] = dataclasses.field(default_factory=list)  # per trigger: after its incident's first alert

    @property
    def delay(self) -> float | None:
        if self.first_page is None or self.first_alert is None:
            return None
        return (self.first_page - self.first_alert).total_seconds()


def score(lives: list[Life], rules: RuleSet, group_by: tuple[str, ...]) -> Score:
    rec = Recording(webhooks=deliver(lives, group_by=group_by))
    res = replay(rec, rules, tail=timedelta(hours=1))
    run = res.run
    first_target: dict[tuple[str, str], Any] = {}
    for sent, fate in run.outcomes():
        item = sent.item
        if fate or item.intent == "escalate":
            continue
        first_target.setdefault((item.incident_id, item.target.main), item)
    triggers, first_page, posts, delays = 0, None, 0, []
    for (inc_id, target), item in first_target.items():
        inc = run.incidents[inc_id]
        closed_first = inc.resolved_at is not None and inc.resolved_at <= item.due_at
        adopted = first_target.get((item.payload.adopt, target))  # as the PagerDuty notifier:
        adopts = adopted is not None and adopted.intent == "page" and adopted.due_at <= item.due_at  # a page sent
        if target.startswith("pagerduty:") and item.intent == "page" and not closed_first and not adopts:
            triggers += 1
            first_page = min(first_page or item.due_at, item.due_at)
            began = min([inc.opened_at] + [run.incidents[c].opened_at for c in inc.children if c in run.incidents])
            delays.append((item.due_at - began).total_seconds())
        if target.startswith("slack:") and not item.payload.only_if_posted:
            posts += 1
    return Score(triggers, res.first, first_page, len([i for i in run.incidents.values() if not i.parent_id
                                                       or i.fleet]), posts, delays)


# ----- stories -----

def maintenance(rng: random.Random, node: str = "n1", at: float = 0) -> list[Life]:
    """Cordon, drain, reboot (NodeDown, NotReady), exporter slow to come back, uncordon: planned work."""
    drain = rng.uniform(60, 600)
    down = rng.uniform(150, 600)  # how long the node is down
    back = at + drain + down
    return [Life.of("KubeNodeCordoned", at, back + rng.uniform(400, 900), node=node, severity="info"),
            Life.of("NodeDown", at + drain + 120, back, node=node, severity="critical"),
            Life.of("KubeNodeNotReady", at + drain + 120, back, node=node, severity="warning"),
            Life.of("DCGMExporterDown", back + 300, back + 300 + rng.uniform(30, 200), node=node, severity="warning")]


def xid_fault(rng: random.Random, node: str = "n1", at: float = 0, cordon: bool = True) -> list[Life]:
    """A GPU falls off the bus; the operator cordons it minutes later, reboots it later still."""
    lives = [Life.of("GPUXidError", at, at + rng.uniform(60, 900), node=node, xid="79", gpu="3", severity="critical"),
             Life.of("DCGMExporterDown", at + 300, at + 1800, node=node, severity="warning")]
    if cordon:
        c = at + rng.uniform(60, 280)  # within DCGMExporterDown's for: of the exporter's death
        lives += [Life.of("KubeNodeCordoned", c, at + 3600, node=node, severity="info"),
                  Life.of("NodeDown", at + 2000 + 120, at + 2400, node=node, severity="critical")]
    return lives


def storm(rng: random.Random, nodes: int = 40, spread: float = 900) -> list[Life]:
    """An Xid 119 rollout: nodes fail over ``spread`` seconds, each dies with its exporter."""
    out: list[Life] = []
    for i in range(nodes):
        t = rng.uniform(0, spread)
        out += [Life.of("GPUXidError", t, t + rng.uniform(120, 1800), node=f"s{i}", xid="119", gpu=str(i % 8),
                        severity="critical"),
                Life.of("DCGMExporterDown", t + 300, t + 2400, node=f"s{i}", severity="warning")]
    return out


def rollout(rng: random.Random, nodes: int = 12) -> list[Life]:
    """A planned driver rollout: nodes cordoned and drained one after another, each reboots."""
    out: list[Life] = []
    for i in range(nodes):
        out += maintenance(rng, node=f"r{i}", at=i * rng.uniform(30, 90))
    return out


def coincidence(rng: random.Random, codes: tuple[str, str] = ("79", "48")) -> list[Life]:
    """Two unrelated GPU faults on two nodes of a cluster a minute or two apart: two pages."""
    gap = rng.uniform(20, 240)
    return [Life.of("GPUXidError", 0, 600, node="c1", xid=codes[0], gpu="1", severity="critical"),
            Life.of("GPUXidError", gap, gap + 600, node="c2", xid=codes[1], gpu="5", severity="critical")]


def same_code(rng: random.Random) -> list[Life]:
    """As ``coincidence``, both Xid 79: alertd cannot tell it from a storm's first nodes (the storm-pending
    hold's price)."""
    return coincidence(rng, ("79", "79"))


STORIES = {"maintenance": (maintenance, 0), "xid-fault": (xid_fault, 1), "storm-40": (storm, 1),
           "rollout-12": (rollout, 0), "coincidence": (coincidence, 2),
           "same-code": (same_code, 2)}


def rules_with(group_wait: timedelta, pending: timedelta = timedelta(0)) -> RuleSet:
    """The shipped rules with routing's ``group_wait`` and the engine's ``correlation.storm.pending``."""
    rules = load_rules([ROOT / "rules"])
    assert rules.routing is not None
    rules.routing = dataclasses.replace(rules.routing, group_wait=group_wait)
    storm = dataclasses.replace(rules.correlation.storm, pending=pending)
    rules.correlation = dataclasses.replace(rules.correlation, storm=storm)
    return rules


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--group-wait", default="2s,30s,60s")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--pending", default="0s", help="correlation.storm.pending for every run (default off)")
    args = ap.parse_args(argv)
    for text in args.group_wait.split(","):
        rules = rules_with(parse_duration(text), parse_duration(args.pending))
        wrong, delays, storm_posts = 0, [], []
        for name, (story, want) in STORIES.items():
            for route, group_by in ROUTES.items():
                got = []
                for seed in range(args.seeds):
                    s = score(story(random.Random(seed)), rules, group_by)
                    got.append(s)
                    wrong += s.triggers != want
                    if name.startswith("storm"):
                        storm_posts.append(s.posts)
                    delays += s.delays
                pages = ",".join(str(s.triggers) for s in got)
                lat = [",".join(f"{d:.0f}" for d in s.delays) for s in got if s.delays]
                print(f"group_wait {text:>4} pending {args.pending}  {name:<12} by {route:<4}  pages {pages} (want {want})  "
                      f"paged after {'/'.join(lat) or '-'} s  posts {','.join(str(s.posts) for s in got)}")
        delays.sort()
        print(f"group_wait {text:>4} pending {args.pending}  SUMMARY  stories paged wrongly {wrong}  page delay median "
              f"{delays[len(delays) // 2] if delays else 0:.0f} s, max {max(delays, default=0):.0f} s, "
              f"within 5m {sum(d <= 300 for d in delays)}/{len(delays)}; Slack posts per storm "
              f"{sum(storm_posts) / max(1, len(storm_posts)):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
