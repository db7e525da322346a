"""A network partition between the leader and PostgreSQL, on loopback.

Three `alertd serve` replicas on the real PostgreSQL; the leader reaches the database through a TCP
proxy (testkit/partition_proxy.py), the two others directly. While a stream of webhooks goes
to the two others, the proxy blackholes the leader's database traffic right after a statement of
its that locks the lease row (a renewal, or the fence check every engine write starts with) reached
the server: the worst moment, its open transaction holds the row every takeover must lock, and the
answers are lost. Nothing is reset: the leader keeps running, keeps its in-flight transaction and
keeps its Slack and PagerDuty connections, which go through their own (never cut) proxies so every
byte it sends them is timed.

Asserts: a follower leads within 10 s (printed); the old leader stops its engine within ttl/2 plus
one round, before the new one is elected (printed); the followers answer every webhook meanwhile
within 3 s (they do not wait for the lease row the cut-off transaction holds); no byte from the old leader reaches Slack or
PagerDuty after the election; after the heal it rejoins as a follower and takes webhooks; every
acknowledged alert is stored once and processed; one incident per node; one Slack message per
incident and channel; one PagerDuty alert per critical incident.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from testkit.alertd_proc import AlertdProcess
from testkit.ha_cluster import (
    TOKEN,
    check_pages,
    Storm,
    fresh_database,
    inbox_state,
    pending,
    replica_config,
    role_of,
    slack_messages_per_incident,
    wait_for_leader,
)
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.partition_proxy import PartitionProxy
from testkit.pipeline import incidents, wait, write_rules
from testkit.slack_server import SlackTestServer
from testkit.webhooks import UniqueWebhooks, node_webhook

pytestmark = pytest.mark.e2e
TTL, RENEW = 5.0, 1.0  # the ha defaults


@dataclass
class FailingGpus:
    """Each call, a new node whose GPU fell off the bus: Xid 79, critical, so a Slack post and a page."""

    run: str = "failing"
    count: int = 0
    start: datetime = field(default_factory=lambda: datetime.now(timezone.utc).replace(microsecond=0))

    def next(self) -> dict:
        i, self.count = self.count, self.count + 1
        # four nodes per cluster: below the storm threshold, every node keeps its own incident
        return node_webhook(f"{self.run}-c{i // 4}", f"{self.run}-gpu-node-{i:03d}", starts_at=self.start, kind=0,
                            gpus=1, extra={"xid": "79"})


def lease_holder(dsn: str) -> str:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute("SELECT holder FROM leases WHERE name = 'engine'").fetchone()
    assert row, "no engine lease"
    return str(row[0])


def session_states(dsn: str, client_ports: set[int]) -> list[str]:
    """The states of the server sessions opened from these local ports (the proxy's side)."""
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        rows = conn.execute("SELECT state FROM pg_stat_activity WHERE client_port = ANY(%s)",
                            (sorted(client_ports),)).fetchall()
    return [str(r[0]) for r in rows]


def _target(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or 0


def test_partitioned_leader_is_replaced_fenced_and_rejoins(tmp_path: Path, postgres) -> None:
    slack, pagerduty = SlackTestServer(token="xoxb-ha"), PagerDutyTestServer()
    with serving_in_thread(slack, pagerduty):
        dsn = fresh_database(postgres.dsn)
        # every node's incident is posted and paged at once here, not held for a storm that may be forming
        rules = write_rules(tmp_path / "rules", hold_down="3s", pending="0s")
        with PartitionProxy(_target(dsn)) as db_link, PartitionProxy(_target(slack.url)) as slack_link, \
                PartitionProxy(_target(pagerduty.url)) as pd_link:

            def config(db: str, slack_url: str, pd_url: str) -> dict:
                return replica_config(db, rules, slack_url=slack_url, pagerduty_url=pd_url,
                                      routing_key=PagerDutyTestServer.ROUTING_KEY, log={"level": "info"})

            cut = AlertdProcess(tmp_path / "cut", config(db_link.dsn(dsn), slack_link.url(slack.url),
                                                         pd_link.url(pagerduty.url)), serve_args=["--receivers", "0"])
            others = [AlertdProcess(tmp_path / f"replica-{i}", config(dsn, slack.url, pagerduty.url),
                                    serve_args=["--receivers", "0"]) for i in range(2)]
            replicas = [cut, *others]
            try:
                cut.start(timeout=60)
                assert wait_for_leader([cut], timeout=15) is cut
                for r in others:
                    r.start(timeout=60)
                # Eight nodes re-firing (every webhook new work) and, every 1.6 s, a new node losing a GPU,
                # from before the cut until the old leader is back as a follower (stopped then; 40 s at most).
                storm = Storm(others, rate=30, seconds=40,
                              gen=UniqueWebhooks(run="part", nodes=8, nodes_per_cluster=4, seed=5))
                failing = Storm(others, rate=0.6, seconds=40, gen=FailingGpus())  # type: ignore[arg-type]
                threads = [storm.in_thread(), failing.in_thread()]
                wait("the leader's first Slack posts", lambda: slack_link.bytes_up and len(incidents(cut)) >= 2, 20,
                     every=0.1)

                # Partition the leader right after a statement of its that locks the lease row (a renewal, or
                # the fence check an engine write starts with) reached PostgreSQL: both name the holder.
                db_link.blackhole_after(lease_holder(dsn).encode())
                wait("the leader's next statement on the lease", lambda: db_link.blackholed_at, 10, every=0.02)
                cut_at = db_link.blackholed_at
                assert cut_at is not None
                # The worst case was produced: the server holds the cut-off leader's transaction open.
                wait("the cut-off transaction on the server",
                     lambda: "idle in transaction" in session_states(dsn, db_link.upstream_ports), 2, every=0.05)
                stepped_down = elected = None
                new_leader: AlertdProcess | None = None
                deadline = cut_at + 20
                while time.monotonic() < deadline and (stepped_down is None or elected is None):
                    if stepped_down is None and role_of(cut) != "leader":
                        stepped_down = time.monotonic() - cut_at
                    if elected is None:
                        leaders = [r for r in others if role_of(r) == "leader"]
                        if leaders:
                            new_leader, elected = leaders[0], time.monotonic() - cut_at
                    time.sleep(0.05)
                print(f"\npartition: the old leader stepped down {stepped_down} s and a follower led "
                      f"{elected} s after the blackhole")
                assert elected is not None and elected < 10, elected
                assert stepped_down is not None and stepped_down < TTL / 2 + 2 * RENEW, stepped_down
                assert stepped_down < elected  # never two engines: it stopped before another could start
                assert "could not renew the engine lease" in cut.log_tail(400)  # its renewal timed out
                assert new_leader is not None
                elected_at = cut_at + elected
                assert "idle in transaction" not in session_states(dsn, db_link.upstream_ports)  # ended by the server

                # The new leader works (a node that lost its GPU since: a new incident) while the old one
                # stays cut off.
                known = len(incidents(new_leader, limit="1000"))
                wait("a new incident from the new leader", lambda: len(incidents(new_leader, limit="1000")) > known,
                     20, every=0.1)
                assert role_of(cut) == "follower"
                db_link.heal()
                healed_at = time.monotonic()

                # Back: a follower that takes webhooks (its first calls may still fail on the dead session).
                doc = FailingGpus(run="late").next()
                for _ in range(40):
                    status = cut.post(doc, {"Authorization": f"Bearer {TOKEN}"}, timeout=10)[0]
                    if status == 200:
                        failing.acked.append(doc)
                        break
                    time.sleep(0.25)
                assert status == 200, status
                print(f"after the heal: the old leader took a webhook {time.monotonic() - healed_at:.2f} s later")
                assert role_of(cut) == "follower" and role_of(new_leader) == "leader"
                for st in (storm, failing):
                    st.stop.set()
                for thread in threads:
                    thread.join(30)
                acked = storm.acked + failing.acked

                def every_node_has_its_incident() -> list[dict] | None:
                    rows = incidents(new_leader, limit="1000")
                    nodes = {a["labels"]["node"] for d in acked for a in d["alerts"]}
                    return rows if nodes <= {r["node"] for r in rows} else None

                rows = wait("an incident for every node", every_node_has_its_incident, 60)
                wait("the inbox drained", lambda: pending(dsn) == 0, 60)
                rows = incidents(new_leader, limit="1000")

                def slack_settled() -> Counter | None:
                    got = slack_messages_per_incident(slack)
                    return got if {i for _, i in got} >= {r["id"] for r in rows} else None

                wait("a Slack message for every incident", slack_settled, 60)
                critical = [r["id"] for r in rows if r["severity"] == "critical"]
                assert critical, Counter((r["severity"], r["title"][:30]) for r in rows)
                wait("a page for every critical incident",
                     lambda: all(pagerduty.status_of(i) == "triggered" for i in critical), 60)
                time.sleep(1)  # a last delivery round: a second post would show now
            finally:
                for r in replicas:
                    r.stop()

            # Nothing from the old leader reached Slack or PagerDuty after the election.
            for name, link in (("Slack", slack_link), ("PagerDuty", pd_link)):
                assert link.last_up_at is None or link.last_up_at < elected_at, \
                    f"the old leader sent to {name} {link.last_up_at - elected_at:.2f} s after the election"
            # The followers kept answering: their lease rounds do not queue their webhooks behind the row lock
            # the cut-off leader's transaction holds until PostgreSQL ends it.
            assert max(storm.slowest, failing.slowest) < 3, (storm.slowest, failing.slowest)
            refused = cut.log_path.read_text(errors="replace").count("write refused")
            print(f"old leader: {refused} writes refused by the fencing token; "
                  f"{storm.refused + failing.refused} stream posts refused and retried, {len(acked)} acknowledged, "
                  f"slowest answer {max(storm.slowest, failing.slowest):.2f} s")

        # 0 acknowledged alerts lost: each one stored once and through the engine.
        state = inbox_state(dsn)
        keys = storm.acked_keys() + failing.acked_keys()
        missing = [k for k in keys if k not in state]
        assert not missing, f"{len(missing)} acknowledged alerts lost, e.g. {missing[:3]}"
        assert all(state[k] == 1 for k in keys), Counter(state[k] for k in keys)

        # Exactly one incident per node; one Slack message per incident and channel; one page per critical one.
        per_node = Counter(r["node"] for r in rows if not r["fleet"])
        assert per_node and all(n == 1 for n in per_node.values()), {n: c for n, c in per_node.items() if c != 1}
        seen = slack_messages_per_incident(slack)
        assert all(n == 1 for n in seen.values()), {k: n for k, n in seen.items() if n > 1}
        check_pages(pagerduty, rows, critical)
