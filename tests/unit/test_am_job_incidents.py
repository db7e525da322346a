"""What alertd makes of the real Prometheus + Alertmanager run of training jobs
(tests/fixtures/alertmanager-runs/job-hang), replayed with the shipped rules/:

  hang       one job incident for ml-train/llama-70b, opened within 5 minutes of the NIC going down, whose
             title names the NIC's node as first suspect, the NIC's own node incident folded under it, one
             page for both
  straggler  one job incident naming the slow GPU, its node and the gap to the job's median
  pause      no incident on the node of the job that paused 12 minutes for a checkpoint and 5 for its data
"""
from __future__ import annotations

from datetime import timedelta

import pytest

from testkit.am_recordings import JOB_HANG, ROUTES, AmRun, pages, ts

RUN = AmRun(JOB_HANG)


def job_incidents(route: str, job: str) -> list[dict]:
    ns, _, name = job.partition("/")
    return [i for i in RUN.replayed(route)["incidents"] if i["group"] == "job" and f"{ns}/{name}" in i["title"]]


@pytest.mark.parametrize("route", ROUTES)
def test_the_hang_is_one_job_incident_naming_the_nics_node(route):
    detail = RUN.problem("hang")["detail"]
    [job] = job_incidents(route, detail["job"])
    assert f"; suspect {detail['culprit']}: InfiniBand port {detail['device']} down" in job["title"], job["title"]
    assert job["annotations"]["job_suspects"][0]["node"] == detail["culprit"]
    # The hang began when the NIC went (the scenario's first step of it): a job incident within 5 minutes.
    began = min(ts(s["at"]) for s in RUN.truth["steps"] if s["problem"] == "hang")
    assert ts(job["openedAt"]) - began <= timedelta(minutes=5), (job["openedAt"], began)
    by_id = {i["id"]: i for i in RUN.replayed(route)["incidents"]}
    [suspect] = [by_id[c] for c in job["children"]]
    assert suspect["node"] == detail["culprit"]
    assert len(pages(RUN.replayed(route), {job["id"], suspect["id"]})) == 1


@pytest.mark.parametrize("route", ROUTES)
def test_the_straggler_incident_names_its_gpu(route):
    problem = RUN.problem("straggler")
    [job] = job_incidents(route, problem["detail"]["job"])
    gpu, [node] = problem["detail"]["gpu"], problem["nodes"]
    assert job["nodes"] == [node] and [g["index"] for g in job["gpus"]] == [str(gpu)]
    assert job["title"].startswith(f"GPU {gpu} on {node} slows {problem['detail']['job']}: "), job["title"]
    assert "against the job's median" in job["title"]


@pytest.mark.parametrize("route", ROUTES)
def test_no_incident_for_the_checkpoint_pauses(route):
    problem = RUN.problem("pause")
    assert not job_incidents(route, problem["detail"]["job"])
    assert not [i for i in RUN.replayed(route)["incidents"] if i.get("node") in problem["nodes"]]
