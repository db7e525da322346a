"""The pure parts of job impact, the fleet sample and the digest: the documented cost formula, the config that
sets it (JSON-schema validated), a node's sample, when a week's digest is due, and what it says."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from alertd.config.settings import parse_config
from alertd.core.errors import InvalidDocument
from alertd.core.findings import Findings, Job, jobs_line
from alertd.enrich.fleet_size import sample_of
from alertd.enrich.jobs import GangPod, JobImpact, OwnerGangs
from alertd.enrich.kube import KubeContext
from alertd.enrich.settings import CostModel, JobCostSettings, KubeSettings
from alertd.remediation.blast import GangLookup, build, summary
from alertd.report.digest import DigestSettings, due_week, text

H = timedelta(hours=1)


@pytest.mark.parametrize("interval, restart, ran, lost", [
    (H, 10 * timedelta(minutes=1), 3 * H, 0.5 * H + timedelta(minutes=10)),  # half an interval + the restart
    (4 * H, timedelta(0), H, H),  # a young job loses at most what it ran
    (timedelta(0), 5 * timedelta(minutes=1), 2 * H, 2 * H + timedelta(minutes=5)),  # never checkpoints: all of it
    (H, timedelta(0), -H, timedelta(0)),  # a clock skewed start counts as nothing run
])
def test_time_lost_is_the_documented_formula(interval, restart, ran, lost):
    assert CostModel(interval, restart).time_lost(ran) == lost


def test_namespace_overrides_come_from_the_config_and_bad_values_are_named():
    doc = {"checkpoint_interval": "2h", "restart_time": "15m",
           "namespaces": {"research-*": {"checkpoint_interval": "30m"}, "batch": {"restart_time": "1h"}}}
    s = JobCostSettings.from_doc(doc)
    assert s.for_namespace("research-llm") == CostModel(timedelta(minutes=30), timedelta(minutes=15))
    assert s.for_namespace("batch") == CostModel(2 * H, H)
    assert s.for_namespace("other") == CostModel(2 * H, timedelta(minutes=15))
    base = {"rules": {"paths": ["rules"]}}
    parse_config({**base, "enrich": {"kube": {"jobs": doc}}}, "test")
    with pytest.raises(InvalidDocument, match="checkpoint_interval"):
        parse_config({**base, "enrich": {"kube": {"jobs": {"checkpoint_interval": "hourly"}}}}, "test")
    with pytest.raises(InvalidDocument, match="restart"):
        parse_config({**base, "enrich": {"kube": {"jobs": {"namespaces": {"x": {"restart": "1m"}}}}}}, "test")


def test_gpu_hours_lost_and_the_slack_line():
    job = JobImpact("PyTorchJob", "llama-64", "research", owner="alice", team="ml",
                    gang=[GangPod("research", f"w-{i}", f"n{i}", 8) for i in range(8)], time_lost=H)
    assert (job.gpus, job.nodes[:2], job.gpu_hours_lost) == (64, ["n0", "n1"], 64.0)
    small = JobImpact("Job", "etl", "batch", gang=[GangPod("batch", "etl-1", "n9", 1)], time_lost=H / 2)
    line = jobs_line([job.to_finding(), small.to_finding(), replace(small.to_finding(), name="etl-2")])
    assert Job.from_json(job.to_finding().to_json()) == job.to_finding()
    assert line == ("PyTorchJob research/llama-64: 64 GPUs on 8 nodes (owner alice, team ml); "
                    "Job batch/etl: 1 GPU on 1 node and 1 more ≈ 65.0 GPU-hours lost")
    assert Findings.from_annotations({"jobs": "not a list"}).jobs_line() == ""


def test_a_node_sample_reads_allocatable_gpus_type_and_cordon():
    kube = KubeContext(KubeSettings())
    node = {"metadata": {"name": "gpu-1", "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
            "spec": {"unschedulable": True}, "status": {"allocatable": {"nvidia.com/gpu": "7", "cpu": "192"}}}
    s = sample_of(kube, node)
    assert s is not None and (s.node, s.node_type, s.gpus, s.cordoned) == ("gpu-1", "p5.48xlarge", 7, True)
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    assert sample_of(kube, node).node_type == "NVIDIA-H100-80GB-HBM3"  # the product label first
    assert sample_of(kube, {"metadata": {"name": "cpu-1"}, "status": {"allocatable": {"cpu": "64"}}}) is None
    assert sample_of(kube, {"metadata": {"name": "odd"}, "status": {"allocatable": {"nvidia.com/gpu": "x"}}}) is None


def test_the_digest_is_due_from_its_day_and_hour_and_covers_the_week_before():
    s = DigestSettings.from_doc({"channel": "#cap", "weekday": "tuesday", "hour": 8})
    tue = datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert due_week(s, tue + timedelta(hours=7, minutes=59))[0] == "digest-2026-11-24"  # not yet: last week's
    key, since, until = due_week(s, tue + timedelta(hours=8))
    assert (key, since, until) == ("digest-2026-12-01", tue - timedelta(days=7), tue)
    assert due_week(s, tue + timedelta(days=5))[0] == "digest-2026-12-01"  # the same week until next Tuesday
    assert due_week(s, tue - timedelta(hours=1))[0] == "digest-2026-11-24"  # Monday: last week's is still due


def test_the_digest_text_carries_the_figures():
    r = {"since": "2026-11-24T00:00:00Z", "until": "2026-12-01T00:00:00Z", "failures": 3, "gpuDays": 14336.0,
         "failuresPer1000GpuDays": 0.209, "byCause": [{"category": "hardware", "xid": 79, "failures": 3}],
         "mttrSeconds": {"median": 5400.0, "p90": 7200.0}, "gpuHoursOutOfService": 48.0, "jobsInterrupted": 2,
         "gpuHoursLost": 85.3, "lemons": {"nodes": [], "gpus": []}, "cordoned": {"now": {"H100": 2}}}
    out = text(r, "https://alertd.example/ui/reports/reliability?since=2026-11-24&until=2026-12-01")
    for part in ("3 hardware failures in 14,336 GPU-days = 0.21 per 1,000 GPU-days", "hardware Xid 79: 3",
                 "median 1.5 h, p90 2.0 h", "2 jobs interrupted", "≈ 85 GPU-hours", "H100 2",
                 "<https://alertd.example/ui/reports/reliability?since=2026-11-24&until=2026-12-01|The report>"):
        assert part in out


def test_owner_gangs_answer_a_blast_radius_gang_lookup():
    job = JobImpact("PyTorchJob", "llama-64", "research", owner="alice", team="ml", hit_pods=["w-3"],
                    gang=[GangPod("research", f"w-{i}", f"n{i}", 8) for i in range(8)], time_lost=H)
    solo = JobImpact("Pod", "notebook", "research", hit_pods=["notebook"],
                     gang=[GangPod("research", "notebook", "n3", 1)], time_lost=H)
    gangs: GangLookup = OwnerGangs([job, solo])
    assert gangs.gang("research", {"name": "w-3"}) == {
        "kind": "PyTorchJob", "name": "llama-64", "pods": 8, "nodes": [f"n{i}" for i in range(8)], "gpus": 64,
        "owner": "alice", "team": "ml", "gpuHoursLost": 64.0}
    assert gangs.gang("research", {"name": "notebook"}) is None  # alone: no gang
    assert gangs.gang("other", {"name": "w-3"}) is None
    pod = {"namespace": "research", "name": "w-3", "node": "n3", "phase": "Running", "gpus": 8,
           "owner_chain": [{"kind": "PyTorchJob", "name": "llama-64"}]}
    assert "PyTorchJob research/llama-64 (8 pods on 8 nodes)" in summary(build("drain", [pod], [], gangs))
