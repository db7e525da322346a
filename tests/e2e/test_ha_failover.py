"""Failover under a storm, with every real part a site would run:

three `alertd serve` replicas on one real PostgreSQL; two real Alertmanagers clustered by gossip
over loopback, each delivering to every replica; the simulated GPU cluster scraped by the real
Prometheus (shipped GPU alert rules, windows shortened); the Slack and PagerDuty test servers.
A storm of unique webhooks goes to the replicas in turn while four nodes fail in the simulator;
the leader is killed with SIGKILL in the middle. Prometheus also scrapes the replicas with the shipped
alerts on alertd itself.

Asserts: a follower leads within 10 s (the time is printed); every acknowledged alert is stored
once and processed; exactly one incident per failing node; exactly one Slack message per incident
and channel; one PagerDuty alert per paged incident; the Alertmanager peers' duplicates (each
notification reaches every replica, from both peers) never show; on the replicas' real metrics, the
shipped alertd rules see one engine before and after, and the killed replica down, not alertd.
"""
from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from testkit.sim.fast_rules import derive_fast_rules
from testkit.sim.gpu_cluster import GPUClusterSim
from testkit.alertd_proc import AlertdProcess
from tests.support.fixtures import require
from testkit.ha_cluster import (
    TOKEN,
    check_pages,
    Storm,
    alert_all,
    alertmanager_peers,
    fresh_database,
    inbox_state,
    pending,
    replica_config,
    role_of,
    slack_messages_per_incident,
    start_alertmanager_pair,
    wait_for_leader,
    write_alertmanager_config,
)
from testkit.loopback import serving_in_thread
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.pipeline import incidents, wait, write_rules
from testkit.prom import ALERTD_RULES, alerting_rules, query, scrape_alertd
from testkit.services import start_prometheus
from testkit.slack_server import SlackTestServer
from testkit.webhooks import UniqueWebhooks

pytestmark = pytest.mark.e2e
FAILING = ["node-1", "node-2", "node-3", "node-4"]  # below the storm threshold: one incident per node


def test_kill_leader_during_storm(tmp_path: Path, postgres) -> None:
    slack, pagerduty = SlackTestServer(token="xoxb-ha"), PagerDutyTestServer()
    with serving_in_thread(slack, pagerduty):
        dsn = fresh_database(postgres.dsn)
        # four nodes with the same Xid are paged each at once here, not held for a storm that may be forming
        rules = write_rules(tmp_path / "rules", hold_down="3s", pending="0s")
        cfg = replica_config(dsn, rules, slack_url=slack.url, pagerduty_url=pagerduty.url,
                             routing_key=PagerDutyTestServer.ROUTING_KEY, log={"level": "info"})
        replicas = [AlertdProcess(tmp_path / f"replica-{i}", cfg, serve_args=["--receivers", "0"]) for i in range(3)]
        sim = GPUClusterSim(nodes=6)
        ams, prom = [], None
        try:
            for r in replicas:
                r.start(timeout=60)
            leader = wait_for_leader(replicas)
            with sim.running_in_thread():
                am_cfg = write_alertmanager_config(tmp_path / "am.yml", [r.url for r in replicas], tmp_path / "token")
                ams = start_alertmanager_pair(am_cfg, tmp_path)
                wait("the Alertmanagers to see each other", lambda: all(alertmanager_peers(a) == 2 for a in ams), 30)
                prom_cfg = sim.write_prometheus_config(tmp_path / "prometheus.yml", alertmanager_url=ams[0].url,
                                                       rule_files=[derive_fast_rules(tmp_path / "fast.yml")])
                scrape_alertd(alert_all(prom_cfg, ams), [r.address for r in replicas])
                prom = require(start_prometheus, prom_cfg, tmp_path / "prom")
                wait("every target up", lambda: len(query(prom.url, "up == 1")) == 2 * 6 + 1 + len(replicas), 60)
                on_alertd = {r["alert"]: r["expr"] for r in alerting_rules(ALERTD_RULES.read_text())}
                wait("one engine among the scraped replicas",
                     lambda: query(prom.url, 'sum(alertd_engine_leader{job="alertd"})')[0]["value"][1] == "1", 30)

                # 8 storm nodes re-firing (every webhook new work, 8 incidents: Slack takes ~1 post/s per channel),
                # from before the faults until the survivors have taken a second of it after the failover.
                storm = Storm(replicas, rate=60, seconds=30,
                              gen=UniqueWebhooks(run="storm", nodes=8, nodes_per_cluster=4, seed=3))
                thread = storm.in_thread()
                wait("the storm under way", lambda: len(storm.acked) >= 60, 20, every=0.1)
                for node in FAILING:
                    sim.inject_xid(node, 2, 79)
                wait("the failing nodes' alerts reaching the leader",
                     lambda: len({r["node"] for r in incidents(leader, limit="1000")} & set(FAILING)) >= 2, 30, every=0.1)
                killed_at = time.monotonic()
                leader.kill9()
                survivors = [r for r in replicas if r is not leader]
                new_leader = wait_for_leader(survivors, timeout=20)
                took = time.monotonic() - killed_at
                after = len(storm.acked)
                wait("the storm acknowledged after the failover", lambda: len(storm.acked) >= after + 60, 20, every=0.1)
                storm.stop.set()
                thread.join(30)
                print(f"\nfailover: a follower reported leader {took:.2f} s after kill -9 of the leader "
                      f"(storm: {len(storm.acked)} webhooks acknowledged, {storm.refused} refused and retried)")
                assert took < 10, took
                # A new alert after the failover: Alertmanager sends it to every replica, so the survivors
                # store two copies and the new leader must drop one (everything before may have been taken
                # by the old leader already, whose counters died with it).
                sim.inject_xid(FAILING[0], 5, 79)

                def sim_incidents() -> dict[str, list[dict]] | None:
                    rows = incidents(new_leader, limit="1000")
                    got = {n: [r for r in rows if r["node"] == n] for n in FAILING}
                    return got if all(got.values()) else None

                wait("an incident for every failing simulated node", sim_incidents, 60)
                wait("the inbox drained", lambda: pending(dsn) == 0, 60)
                # The shipped rules on the replicas' own metrics: the killed one down, one engine again.
                wait("AlertdReplicaDown to name the killed replica", lambda: [
                    x["metric"]["instance"] for x in query(prom.url, on_alertd["AlertdReplicaDown"])] == [leader.address], 30)
                assert query(prom.url, on_alertd["AlertdNoEngine"]) == []
                assert query(prom.url, on_alertd["AlertdDown"]) == []
                assert query(prom.url, 'ALERTS{alertname="AlertdNoEngine",alertstate="firing"}') == []
                time.sleep(3)  # a few more Alertmanager rounds: redeliveries must stay duplicates

            # 0 acknowledged alerts lost: each one stored once and through the engine.
            state = inbox_state(dsn)
            keys = storm.acked_keys()
            missing = [k for k in keys if k not in state]
            assert not missing, f"{len(missing)} acknowledged alerts lost, e.g. {missing[:3]}"
            assert all(state[k] == 1 for k in keys), Counter(state[k] for k in keys)

            # Exactly one incident per failing node (storm nodes and simulated nodes alike).
            rows = incidents(new_leader, limit="1000")
            per_node = Counter(r["node"] for r in rows if not r["fleet"])
            storm_nodes = {a["labels"]["node"] for d in storm.acked for a in d["alerts"]}
            assert storm_nodes | set(FAILING) <= set(per_node), sorted(storm_nodes | set(FAILING) - set(per_node))[:5]
            assert all(per_node[n] == 1 for n in storm_nodes | set(FAILING)), \
                {n: c for n, c in per_node.items() if c != 1}
            assert not [r for r in rows if r["fleet"]]

            # Exactly one Slack message per incident and channel, and every incident has one.
            def slack_settled() -> Counter | None:
                seen = slack_messages_per_incident(slack)
                return seen if {i for _, i in seen} >= {r["id"] for r in rows} else None

            seen = wait("a Slack message for every incident", slack_settled, 90)
            assert all(n == 1 for n in seen.values()), {k: n for k, n in seen.items() if n > 1}

            # One PagerDuty alert (one page) per critical incident, whoever was leader when it was sent.
            critical = [r["id"] for r in rows if r["severity"] == "critical"]
            assert critical
            wait("a page for every critical incident", lambda: all(pagerduty.status_of(i) == "triggered" for i in critical), 60)
            check_pages(pagerduty, rows, critical)

            # The Alertmanager peers did deliver duplicates (every replica, both peers): all dropped.
            wait("the survivors' duplicate copies dropped and counted",
                 lambda: sum(r.metrics().get("alertd_alerts_duplicate_total", 0) for r in survivors) > 0, 30)
            assert {role_of(r) for r in survivors} == {"leader", "follower"}
        finally:
            if prom is not None:
                prom.stop()
            for am in ams:
                am.stop()
            for r in replicas:
                r.stop()



def test_paused_leader_is_replaced_and_fenced(tmp_path: Path, postgres) -> None:
    """A leader that stops answering (SIGSTOP: to the others, as good as partitioned) is replaced
    within 10 s; resumed, it steps down and the alerts it then receives are processed by the new
    leader; incident ids stay one sequence."""
    dsn = fresh_database(postgres.dsn)
    cfg = replica_config(dsn, write_rules(tmp_path / "rules", hold_down="3s"), log={"level": "info"})
    replicas = [AlertdProcess(tmp_path / f"replica-{i}", cfg, serve_args=["--receivers", "0"]) for i in range(2)]
    gen = UniqueWebhooks(run="pause", nodes=3, nodes_per_cluster=3, seed=11)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        for r in replicas:
            r.start(timeout=60)
        old = wait_for_leader(replicas)
        other = next(r for r in replicas if r is not old)
        assert other.post(gen.next(), auth)[0] == 200
        wait("the first incident", lambda: len(incidents(other)) == 1, 20, every=0.1)
        os.kill(old.pid, signal.SIGSTOP)
        paused_at = time.monotonic()
        try:
            assert wait_for_leader([other], timeout=15) is other
            took = time.monotonic() - paused_at
            print(f"\nfailover from a paused leader: {took:.2f} s")
            assert took < 10
            assert other.post(gen.next(), auth)[0] == 200
            wait("the second incident", lambda: len(incidents(other)) == 2, 20, every=0.1)
        finally:
            os.kill(old.pid, signal.SIGCONT)
        assert old.post(gen.next(), auth)[0] == 200  # it still receives
        wait("the old leader stepping down", lambda: role_of(old) == "follower", 10, every=0.1,
             detail=lambda: f"{role_of(old)}\n{old.log_tail(20)}")
        wait("the third incident, made by the new leader", lambda: len(incidents(other)) == 3, 20, every=0.1)
        assert sorted(r["id"] for r in incidents(other)) == ["INC-1", "INC-2", "INC-3"]
        assert "stepping down as engine leader" in old.log_tail(200)
    finally:
        for r in replicas:
            r.stop()
