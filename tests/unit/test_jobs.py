"""The job as an incident subject (engine/jobs.py): one incident per job from Alertmanager's batches, its
culprit, its one page that takes over its suspect's, and its resolution."""
from __future__ import annotations

from alertd.core.model import CLOSED, JOB_SUSPECT, Incident
from alertd.engine.pipeline import Engine
from alertd.engine.state import EngineState
from alertd.engine.jobs import SIZE, SUSPECTS, is_job
from alertd.integrations.base import folded_unposted
from alertd.notify.router import Router
from testkit.builders import alert, at, engine, resolved, shipped_rules, xid

JOB = {"namespace": "llm-pretrain", "owner_kind": "PyTorchJob", "owner_name": "llama-70b"}


def stalled(node: str, starts: float, since: str, **extra: str):
    """GPUJobStalled as the job rules send it: one per job and node, the stall's start in an annotation."""
    return alert("GPUJobStalled", starts=starts, node=node, signal="job_stalled", severity="critical",
                 annotations={"stalled_since": since, "summary": "llm-pretrain/llama-70b stalled"}, **JOB, **extra)


def pages(items):
    return [i for i in items if i.target.kind == "pagerduty" and i.intent == "page" and not i.payload.only_if_posted]


def test_the_stall_of_every_node_folds_into_one_job_incident_listing_them():
    eng = engine()
    # Alertmanager grouping by [alertname, cluster]: the job's nodes arrive in two batches 5 minutes apart
    first = eng.ingest([stalled(f"gpu-b-{n:04}", 300, "1796040060") for n in range(1, 4)], at(330))
    later = eng.ingest([stalled(f"gpu-b-{n:04}", 310, "1796040060") for n in range(4, 6)], at(630))
    jobs = {c.incident.id for c in first + later if is_job(c.incident)}
    assert len(jobs) == 1 and len(eng.state.incidents) == 1
    job = eng.state.incidents[jobs.pop()]
    assert job.nodes == [f"gpu-b-{n:04}" for n in range(1, 6)] and job.node == ""
    # 1796040060 is 12:01 UTC: the stall's start, not the alert's (after its rule's for:)
    assert job.title.startswith("Job llm-pretrain/llama-70b (5 nodes) stalled since 12:01; no suspect")


def test_the_stall_start_is_read_in_every_form_a_rule_template_prints():
    for since in ("1796040060", "1796040060.123", "2026-11-30T12:01:00Z", "2026-11-30 12:01:00 +0000 UTC"):
        eng = engine()
        job = eng.ingest([stalled("n1", 300, since)], at(330))[0].incident
        assert "stalled since 12:01" in job.title, since
    eng = engine()  # nothing readable: the alert's own start
    job = eng.ingest([stalled("n1", 300, "a while ago")], at(330))[0].incident
    assert "stalled since 12:05" in job.title


def test_an_xid_on_a_job_node_before_the_stall_is_the_suspect_and_its_page_is_taken_over(tmp_path):
    router = Router(shipped_rules().routing)
    eng = engine()
    sent = router.route(eng.ingest([xid(79, node="gpu-b-0003", gpu="5", starts=60)], at(60)), at(60))
    node_page = pages(sent)
    assert len(node_page) == 1  # paged at once: nothing stalled yet
    steps = eng.ingest([stalled("gpu-b-0002", 400, "1796040120"), stalled("gpu-b-0003", 400, "1796040120")], at(400))
    job = next(c.incident for c in steps if is_job(c.incident))
    node = eng.state.incidents[node_page[0].incident_id]
    assert job.title.startswith("Job llm-pretrain/llama-70b (2 nodes) stalled since 12:02; suspect gpu-b-0003: Xid 79")
    assert job.title.endswith("(GPU 5) at 12:01")
    assert node.annotations[JOB_SUSPECT] == job.id and job.children == [node.id]
    items = router.route(steps, at(400))
    job_pages = pages(items)
    # the job pages once, taking the node's PagerDuty alert over; the node pages nothing more
    assert [(p.incident_id, p.payload.adopt) for p in job_pages] == [(job.id, node.id)]
    assert not [i for i in items if i.incident_id == node.id and not i.payload.only_if_posted]


def test_a_suspect_in_the_same_batch_as_the_stall_is_never_posted_alone():
    eng = engine()
    changes = eng.ingest([alert("NodeInfiniBandPortDown", starts=100, node="n2", device="mlx5_2", port="1",
                                signal="link_degraded", severity="error", **JOB),
                          stalled("n1", 100, "1796040000"), stalled("n2", 100, "1796040000")], at(120))
    node = next(c.incident for c in changes if c.incident.node == "n2")
    job = next(c.incident for c in changes if is_job(c.incident))
    assert job.title.endswith("; suspect n2: InfiniBand port mlx5_2 down at 12:01")
    assert folded_unposted(node, None)  # its held first post and page are dropped at delivery


def test_suspects_rank_by_kind_then_nearest_the_stall_those_before_it_first():
    eng = engine()
    eng.ingest([alert("GPUTelemetryQuiet", starts=0, node="n1", gpu="2", signal="gpu_quiet", severity="warning"),
                xid(79, node="n2", gpu="1", starts=-1200),
                xid(48, node="n3", gpu="4", starts=400)], at(400))  # long before, and after the span
    changes = eng.ingest([stalled(n, 700, "1796040300") for n in ("n1", "n2", "n3")], at(700))
    job = next(c.incident for c in changes if is_job(c.incident))
    kinds = [(s["node"], s["kind"]) for s in job.annotations[SUSPECTS]]
    assert kinds == [("n3", "xid"), ("n2", "xid"), ("n1", "gpu_quiet")]  # n3's Xid 48 began 100 s after, n2's 25 m before


def test_the_job_incident_resolves_when_the_job_is_busy_again_or_gone():
    eng = engine()
    a, b = stalled("n1", 300, "1796040060"), stalled("n2", 300, "1796040060")
    eng.ingest([a, b], at(330))
    eng.ingest([resolved(a, 900), resolved(b, 900)], at(930))
    changes = eng.tick(at(930 + 301))
    assert [c.incident.status for c in changes if is_job(c.incident)] == [CLOSED]


def test_an_alert_without_its_job_folds_by_the_groups():
    eng = engine()
    lone = alert("GPUStraggler", node="n1", gpu="3", signal="straggler", metric="power", namespace="x")
    inc = eng.ingest([lone], at(0))[0].incident
    assert not is_job(inc) and inc.node == "n1"


def test_a_suspect_whose_port_came_back_stays_named_while_the_job_is_still_stalled():
    eng = engine()
    port = alert("NodeInfiniBandPortDown", starts=60, node="n2", device="mlx5_1", port="1", signal="link_degraded",
                 severity="critical", **JOB)
    eng.ingest([port], at(60))
    eng.ingest([stalled("n1", 700, "1796040070"), stalled("n2", 700, "1796040070")], at(700))
    eng.ingest([resolved(port, 1000)], at(1000))
    eng.tick(at(1400))  # the port's incident resolves after its hold-down; the job is still stalled
    changes = eng.ingest([stalled("n3", 1500, "1796040070")], at(1500))  # a later node of the job
    job = next(c.incident for c in changes if is_job(c.incident))
    assert "; suspect n2: InfiniBand port mlx5_1 down at 12:01" in job.title


def test_a_job_and_its_suspects_survive_a_restart():
    """What the job logic indexes is derived: a store reload (or a new leader) finds the same suspects."""
    eng = engine()
    eng.ingest([alert("NodeInfiniBandPortDown", starts=60, node="n2", device="mlx5_3", port="1",
                      signal="link_degraded", severity="critical", **JOB)], at(60))
    eng.ingest([stalled("n1", 700, "1796040070")], at(700))
    stored = [Incident.from_dict(i.to_dict()) for i in eng.state.incidents.values()]
    again = Engine(shipped_rules(), state=EngineState.from_incidents(stored, {}, eng.state.next_seq, None))
    changes = again.ingest([stalled("n3", 710, "1796040070"), xid(79, node="n3", gpu="2", starts=650)], at(710))
    job = next(c.incident for c in changes if is_job(c.incident))
    # the Xid began 9 minutes after the stall: a suspect, behind the port that went down before it
    assert job.title.endswith("; suspect n2: InfiniBand port mlx5_3 down at 12:01 (+1 more)")
    assert sorted(job.children) == sorted(i.id for i in again.state.incidents.values() if i.node in ("n2", "n3"))


def test_the_job_incident_lists_the_gpus_its_per_gpu_alerts_name():
    eng = engine()
    slow = [alert("GPUStraggler", starts=0, node=node, gpu=gpu, UUID=f"GPU-{node}-{gpu}", signal="straggler",
                  severity="warning", metric="power", **JOB) for node, gpu in (("n1", "3"), ("n2", "3"), ("n2", "5"))]
    job = eng.ingest(slow, at(0))[0].incident
    assert is_job(job) and job.nodes == ["n1", "n2"]
    assert [(g.get("index"), g.get("uuid")) for g in job.gpus] == [("3", "GPU-n1-3"), ("3", "GPU-n2-3"),
                                                                    ("5", "GPU-n2-5")]


def test_the_api_s_count_of_the_job_s_gpus_titles_a_hang_and_its_nodes_join_the_job():
    """A hang's alerts name nodes only; the job's pods read from the Kubernetes API (enrichment's
    ``job_size``) give its GPU count, and their nodes: a suspect on one whose stall alert has not come yet is
    found."""
    eng = engine()
    job = eng.ingest([stalled("n1", 300, "1796040060"), stalled("n2", 300, "1796040060")], at(330))[0].incident
    assert job.title.startswith("Job llm-pretrain/llama-70b (2 nodes) stalled since 12:01; no suspect: nothing on "
                                "its 2 node(s) from 11:31 to 12:11 (Xid, NVSwitch SXid, link,")
    eng.ingest([xid(79, node="n7", gpu="2", starts=30)], at(340))  # n7's own alert, not naming the job
    size = {"gpus": 512, "pods": 64, "nodes": [f"n{i}" for i in range(1, 65)]}
    changes = eng.correlator.enrich(job.id, at(350), "kubernetes", {SIZE: (size, "job: 512 GPUs")})
    assert job.nodes[:3] == ["n1", "n2", "n3"] and len(job.nodes) == 64
    assert job.title.startswith("Job llm-pretrain/llama-70b (512 GPUs) stalled since 12:01; suspect n7: Xid 79")
    assert job.title.endswith("(GPU 2) at 12:00")
    assert any(c.incident is job and "suspects" in c.kinds for c in changes)
