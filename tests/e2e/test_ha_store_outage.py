"""PostgreSQL stopped for longer than the engine lease under load, with two replicas (a PostgreSQL of its
own: stopping the session's shared one would hurt other tests).

While it is down every webhook is answered 503 with Retry-After (Alertmanager retries those) and
/readyz fails; when it is back the replicas reconnect, one leads again (the lease lapsed meanwhile: a
new election, not a renewal), and every webhook that was acknowledged (before, during, after) is stored
once and processed: nothing acknowledged is lost.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from alertd.config.settings import HAConfig
from testkit.alertd_proc import AlertdProcess
from tests.support.fixtures import require
from testkit.ha_cluster import Storm, inbox_state, pending, replica_config, wait_for_leader
from testkit.pipeline import wait, write_rules
from testkit.process import http
from testkit.services import start_postgres
from testkit.webhooks import UniqueWebhooks

pytestmark = pytest.mark.e2e
# Past the lease (5 s by default) with room to spare: when PostgreSQL is back the lease row has expired,
# so leading again goes through an election. Nothing else in alertd waits on the outage's length: a stopped
# server refuses connections at once, and every call reconnects.
OUTAGE = 2 * HAConfig().lease_ttl + 2.0
NODES = 40
# Webhooks acknowledged before the outage (one per node: every node has an incident), and again after it.
LOAD = NODES


def all_unready(replicas: list[AlertdProcess]) -> bool:
    return all(http("GET", r.url + "/readyz")[0] == 503 for r in replicas)


def test_postgres_stopped_mid_load(tmp_path: Path) -> None:
    pg = require(start_postgres, tmp_path / "pg")
    cfg = replica_config(pg.dsn, write_rules(tmp_path / "rules", hold_down="3s"))
    replicas = [AlertdProcess(tmp_path / f"replica-{i}", cfg, serve_args=["--receivers", "0"]) for i in range(2)]
    storm = Storm(replicas, rate=30, seconds=OUTAGE + 120, gen=UniqueWebhooks(run="outage", nodes=NODES, seed=5))
    try:
        for r in replicas:
            r.start(timeout=60)
        wait_for_leader(replicas)
        thread = storm.in_thread()
        wait("load acknowledged before the outage", lambda: len(storm.acked) >= LOAD, 30, every=0.1)
        before = len(storm.acked)
        pg.pause()  # type: ignore[attr-defined]
        stopped = time.monotonic()
        wait("every replica unready", lambda: all_unready(replicas), OUTAGE - 2, every=0.2)
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - stopped)))  # the outage's length is the scenario
        assert all_unready(replicas), "unready through the whole outage"
        during = len(storm.acked)
        pg.resume()  # type: ignore[attr-defined]
        leader = wait_for_leader(replicas, timeout=30)
        wait("load acknowledged after the outage", lambda: len(storm.acked) >= during + LOAD, 30, every=0.1)
        storm.stop.set()
        thread.join(30)
        assert storm.statuses[503] > 0 and storm.retry_after == {"5"}, (storm.statuses, storm.retry_after)
        assert before > 0 and len(storm.acked) > during, "load was acknowledged before and after the outage"
        wait("the inbox drained after the outage", lambda: pending(pg.dsn) == 0, 60)
        state = inbox_state(pg.dsn)
        keys = storm.acked_keys()
        assert [k for k in keys if k not in state] == []
        assert all(state[k] == 1 for k in keys)
        status, data = leader.get_json("/api/v1/incidents?limit=1000")
        assert status == 200 and len({r["node"] for r in data["incidents"]}) == NODES
    finally:
        storm.stop.set()
        for r in replicas:
            r.stop()
        pg.stop()
