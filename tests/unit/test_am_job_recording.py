"""The real Prometheus + Alertmanager run of training jobs (tests/fixtures/alertmanager-runs/job-hang).

Recorded by ``bench/record_am_run.py --scenario job-hang`` (bench/am_run_job_scenario.py): the real Prometheus
scraping tests/sim/job_fleet.py every 15 s and evaluating the shipped gpu-alerts.yml and gpu-job-alerts.yml,
two clustered Alertmanager pairs delivering to ``alertd serve --record``. What the recording must hold:

  hang       NodeInfiniBandPortDown for the NIC's node before the stall; GPUJobStalled on every node of the
             hung job, naming the job, its stall time within one evaluation of the real one
  straggler  GPUStraggler for the slow GPU and no other
  quiet      GPUTelemetryQuiet for the quiet GPU
  pause      nothing about the job that paused for its checkpoints
  every job alert resolved once its fault was over
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.support.am_recordings import JOB_HANG, ROUTES, AmRun, ts

RUN = AmRun(JOB_HANG)
JOB_ALERTS = ("GPUJobStalled", "GPUStraggler", "GPUTelemetryQuiet", "GPUPCIeReplaysGrowing",
              "GPULinkTrafficCollapsed", "NodeInfiniBandPortDown", "NodeInfiniBandPortFlapping")
EVALUATION = timedelta(seconds=15)


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
    # Ten idle minutes after the stall, not before, and within two minutes of them (evaluation, group_wait).
    first = min(r for r, _ in stalled) - stall_at
    assert timedelta(minutes=10) <= first <= timedelta(minutes=12), first


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
    # Its pauses were real: the longest (8 minutes) lies between the job's start and the end of the run.
    assert max(end - start for start, end in pause["detail"]["pauses_s"]) == 480


@pytest.mark.parametrize("route", ROUTES)
def test_every_job_alert_resolved_once_its_fault_was_over(route):
    last: dict[frozenset[tuple[str, str]], str] = {}
    for _, body in RUN.webhooks(route):
        for a in body["alerts"]:
            if a["labels"]["alertname"] in JOB_ALERTS:
                last[frozenset(a["labels"].items())] = a["status"]
    assert last and set(last.values()) == {"resolved"}
