"""alertd/core/service_metrics.py: one view of several processes (serve --receivers N), and per-instance registries without.

Multiprocess mode changes prometheus_client's value class for the whole interpreter, so each process of
the group here is a real subprocess, as in ``serve``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from prometheus_client.multiprocess import mark_process_dead

from alertd.core.service_metrics import Metrics
from testkit.alertd_proc import REPO, parse_metrics

ENGINE = """
from prometheus_client.core import CounterMetricFamily
from alertd.core.service_metrics import Metrics

class Searches:  # a collector keeping its counts as plain ints, like enrichment's
    value = 7
    def collect(self):
        fam = CounterMetricFamily("alertd_test_searches", "Searches.", labels=["outcome"])
        fam.add_metric(["hit"], self.value)
        yield fam

m = Metrics()
m.reload_ok.set(1)  # as Service does at its start
searches = Searches()
m.add_collector(searches)
m.publish()
searches.value = 9
m.publish()
m.publish()
m.incidents.labels("open").set(5)
m.leader.set(1)
m.webhooks.inc(3)
m.ack_latency.observe(0.002)
"""
RECEIVER = """
import os
from alertd.core.service_metrics import Metrics

m = Metrics()
m.webhooks.inc(4)
m.ack_latency.observe(0.02)
m.reload_ok.set(0)
m.leader.set(0)
"""
SCRAPER = """
import sys
from alertd.core.service_metrics import Metrics

m = Metrics()
m.reload_ok.set(1)
m.measure_store_bytes(lambda: 12345.0)
sys.stdout.write(m.exposition().decode())
"""


def run(code: str, directory: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_scrape_on_any_process_shows_the_group(tmp_path: Path) -> None:
    run(ENGINE, tmp_path)
    run(RECEIVER, tmp_path)
    m = parse_metrics(run(SCRAPER, tmp_path).stdout)
    assert m["alertd_webhooks_received_total"] == 7  # summed: 3 + 4 (+ 0 from the scraper)
    assert m["alertd_webhook_ack_seconds_count"] == 2 and m['alertd_webhook_ack_seconds_bucket{le="0.005"}'] == 1
    assert m['alertd_incidents{state="open"}'] == 5  # the engine's, not a sum or another process's 0
    assert m["alertd_engine_leader"] == 1
    assert m["alertd_rules_last_reload_successful"] == 0  # one process's last reload failed
    assert m["alertd_store_bytes"] == 12345  # measured by the answering process at the scrape
    assert m['alertd_test_searches_total{outcome="hit"}'] == 9  # the collector's count copied once, not 7 + 9


def test_a_dead_process_leaves_its_gauges_and_keeps_its_counts(tmp_path: Path) -> None:
    run(ENGINE, tmp_path)
    receiver_pid = int(run(RECEIVER + "print(os.getpid())\n", tmp_path).stdout)
    mark_process_dead(receiver_pid, str(tmp_path))  # what ReceiverPool does when it restarts a receiver
    m = parse_metrics(run(SCRAPER, tmp_path).stdout)
    assert m["alertd_rules_last_reload_successful"] == 1  # the failed reload left with its process
    assert m["alertd_webhooks_received_total"] == 7  # its counts did not


def test_without_the_variable_each_instance_keeps_its_own_registry() -> None:
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    a, b = Metrics(), Metrics()
    a.webhooks.inc(2)
    b.webhooks.inc(5)
    b.measure_store_bytes(lambda: 42.0)
    assert parse_metrics(a.exposition().decode())["alertd_webhooks_received_total"] == 2
    mb = parse_metrics(b.exposition().decode())
    assert mb["alertd_webhooks_received_total"] == 5 and mb["alertd_store_bytes"] == 42
