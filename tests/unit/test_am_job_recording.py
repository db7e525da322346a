"""The real Prometheus + Alertmanager run of training jobs (tests/fixtures/alertmanager-runs/job-hang).

Recorded by ``bench/record_am_run.py --scenario job-hang`` (bench/am_run_job_scenario.py): the real Prometheus
scraping testkit/sim/job_fleet.py every 15 s and evaluating the shipped gpu-alerts.yml and gpu-job-alerts.yml,
two clustered Alertmanager pairs delivering to ``alertd serve --record``. What the recording must hold:

  hang       NodeInfiniBandPortDown for the NIC's node before the stall; GPUJobStalled on every node of the
             hung job, naming the job, its stall time within one evaluation of the real one, 150 s of idle
             and quiet network after the stall and within 5 minutes of the NIC going
  straggler  GPUStraggler for the slow GPU and no other
  quiet      GPUTelemetryQuiet for the quiet GPU
  pause      nothing about the job that paused 12 minutes for a checkpoint and 5 for its data
  network    the rules of the run read node-exporter's netdev and InfiniBand byte counters, and the stall
             alerts delivered are those of the network-aware rule (a recording of an older rule fails)
  every job alert resolved once its fault was over
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from testkit.am_recordings import JOB_HANG, ROUTES, AmRun, ts

RUN = AmRun(JOB_HANG)
SHIPPED_JOB_RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "gpu-job-alerts.yml"
JOB_ALERTS = ("GPUJobStalled", "GPUStraggler", "GPUTelemetryQuiet", "GPUPCIeReplaysGrowing",
              "GPULinkTrafficCollapsed", "NodeInfiniBandPortDown", "NodeInfiniBandPortFlapping")
EVALUATION = timedelta(seconds=15)
QUIET_IDLE = timedelta(seconds=150)  # GPUJobStalled's idle time on a quiet network


def applied(problem: str, action: str, **kwargs):
    """When the run applied that step of the schedule (groundtruth.json's wall clock)."""
    return next(ts(s["at"]) for s in RUN.truth["steps"]
                if s["problem"] == problem and s["action"] == action and all(s.get(k) == v for k, v in kwargs.items()))


@pytest.mark.parametrize("route", ROUTES)
def test_the_hung_job_stalls_on_all_its_nodes_after_its_nic_went_down(route):
    hang = RUN.problem("hang")
    stalled = RUN.alerts(route, "GPUJobStalled")
    assert {a["labels"]["node"] for _, a in stalled} == set(hang["nodes"])
    assert {(a["labels"]["namespace"], a["labels"]["owner_kind"], a["labels"]["owner_name"], a["labels"]["signal"])
            for _, a in stalled} == {("ml-train", "PyTorchJob", "llama-70b", "job_stalled")}
    since = {float(a["annotations"]["stalled_since"]) for _, a in stalled}
    assert len(since) == 1  # one stall, the same on every node
    # The last evaluation that saw a GPU active: after the last scrape before the stall, before the one after.
    stall_at = applied("hang", "job_state", state="hung")
    assert stall_at - EVALUATION <= datetime.fromtimestamp(since.pop(), timezone.utc) <= stall_at + 2 * EVALUATION

    nic = RUN.alerts(route, "NodeInfiniBandPortDown")
    assert {(a["labels"]["node"], a["labels"]["device"], a["labels"]["port"], a["labels"]["owner_name"])
            for _, a in nic} == {(hang["detail"]["culprit"], hang["detail"]["device"], "1", "llama-70b")}
    assert min(r for r, _ in nic) < min(r for r, _ in stalled)  # alertd hears of the NIC first
    assert max(ts(a["startsAt"]) for _, a in nic) < min(ts(a["startsAt"]) for _, a in stalled)
    # 150 idle seconds on a quiet network after the stall, not before, and within 5 minutes of the NIC going.
    first = min(r for r, _ in stalled)
    assert stall_at + QUIET_IDLE <= first <= applied("hang", "nic_down", down=None) + timedelta(minutes=5), first


@pytest.mark.parametrize("route", ROUTES)
def test_the_straggler_is_the_slow_gpu(route):
    slow = RUN.problem("straggler")
    got = RUN.alerts(route, "GPUStraggler")
    assert got, "no GPUStraggler delivered"
    assert {(a["labels"]["node"], a["labels"]["gpu"], a["labels"]["owner_name"]) for _, a in got} == {
        (slow["nodes"][0], str(slow["detail"]["gpu"]), "mixtral-ft")}
    assert {a["labels"]["metric"] for _, a in got} <= {"sm_clock", "power"}
    for _, a in got:
        assert float(a["annotations"]["value"]) < 0.8 * float(a["annotations"]["job_median"])
    # Held 15 minutes below the median: never delivered before that.
    assert min(r for r, _ in got) >= applied("straggler", "slow_gpu") + timedelta(minutes=15)


@pytest.mark.parametrize("route", ROUTES)
def test_the_quiet_gpu_is_named(route):
    quiet = RUN.problem("quiet")
    got = RUN.alerts(route, "GPUTelemetryQuiet")
    assert {(a["labels"]["node"], a["labels"]["gpu"], a["labels"].get("owner_name")) for _, a in got} == {
        (quiet["nodes"][0], str(quiet["detail"]["gpu"]), "bert-large")}


@pytest.mark.parametrize("route", ROUTES)
def test_nothing_for_the_paused_job(route):
    pause = RUN.problem("pause")
    about = [a["labels"]["alertname"] for _, body in RUN.webhooks(route) for a in body["alerts"]
             if a["labels"].get("node") in pause["nodes"] or a["labels"].get("owner_name") == "vit-h"]
    assert about == []
    # Its pauses were real: a checkpoint longer than the 10 idle minutes GPUJobStalled once waited, a data pause.
    pauses = {what: end - start for (start, end), what in zip(pause["detail"]["pauses_s"], pause["detail"]["pause_kinds"])}
    assert pauses["checkpoint"] > 600 and pauses["data loading"] > QUIET_IDLE.total_seconds(), pauses
    states = [s["state"] for s in RUN.truth["steps"] if s["problem"] == "pause"]
    assert states == ["paused", "training", "loading", "training"]


def test_the_run_read_the_jobs_network() -> None:
    doc = yaml.safe_load((JOB_HANG / "config" / "gpu-job-alerts.yml").read_text())
    rules = {r.get("record") or r.get("alert"): r["expr"] for g in doc["groups"] for r in g["rules"]}
    per_node = rules["node:network_bytes:rate2m"]
    for series in ('node_network_receive_bytes_total{device!="lo"}', 'node_network_transmit_bytes_total{device!="lo"}',
                   "node_infiniband_port_data_received_bytes_total",
                   "node_infiniband_port_data_transmitted_bytes_total"):
        assert series in per_node, series
    assert "node:network_bytes:rate2m" in rules["job:node_network_bytes:max_rate2m"]
    assert "job:node_network_bytes:max_rate2m < 5e7" in rules["GPUJobStalled"]


@pytest.mark.parametrize("route", ROUTES)
def test_the_stall_alerts_delivered_are_the_network_aware_rules(route):
    stalled = RUN.alerts(route, "GPUJobStalled")
    assert stalled
    for _, a in stalled:
        [expr] = parse_qs(urlparse(a["generatorURL"]).query)["g0.expr"]
        # Prometheus prints the rule's 5e7 as 5e+07; the arms' idle times are the shipped rule's.
        assert "job:node_network_bytes:max_rate2m < 5e+07" in expr, expr
        assert re.findall(r"time\(\) - (\d+)", expr) == re.findall(r"time\(\) - (\d+)", _shipped_stall_rule())


def _shipped_stall_rule() -> str:
    doc = yaml.safe_load(SHIPPED_JOB_RULES.read_text())
    return next(r["expr"] for g in doc["groups"] for r in g["rules"] if r.get("alert") == "GPUJobStalled")


def test_the_recording_ran_the_shipped_job_rules():
    """A change to deploy/prometheus/gpu-job-alerts.yml asks for the run to be recorded again."""
    assert (JOB_HANG / "config" / "gpu-job-alerts.yml").read_text() == SHIPPED_JOB_RULES.read_text()


@pytest.mark.parametrize("route", ROUTES)
def test_every_job_alert_resolved_once_its_fault_was_over(route):
    last: dict[frozenset[tuple[str, str]], str] = {}
    for _, body in RUN.webhooks(route):
        for a in body["alerts"]:
            if a["labels"]["alertname"] in JOB_ALERTS:
                last[frozenset(a["labels"].items())] = a["status"]
    assert last and set(last.values()) == {"resolved"}
