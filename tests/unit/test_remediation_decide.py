"""Remediation decisions without a cluster: the shipped policy, proposals, the circuit breaker, approvals,
the fleet rule and the uncordon guard."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from alertd.core.actor import Actor
from alertd.core.errors import InvalidDocument
from alertd.remediation import blast, decide
from alertd.remediation.model import (APPROVED, CANCELLED, HELD, PROPOSED, QUARANTINE, RUNNING, STOPPING, SUPERSEDED,
                                      Remediation)
from alertd.rules.remediation import RemediationPolicy
from alertd.rules.ruleset import load_rules
from testkit.builders import at, engine, xid

ROOT = Path(__file__).resolve().parents[2]
T0 = at(0)


def incident(code: int = 79, node: str = "gpu-node-1"):
    eng = engine()
    changes = eng.ingest([xid(code, node=node)], T0)
    return changes[0].incident


def shipped() -> RemediationPolicy:
    return load_rules([ROOT / "rules"]).remediation


def test_shipped_policy_is_dry_run_and_drains_gpu_pods_for_xid_79() -> None:
    policy = shipped()
    assert policy.dry_run is True
    chosen = decide.policy_for(incident(79), policy)
    assert chosen is not None and chosen.action == "drain-gpu"
    assert decide.policy_for(incident(13), policy) is None  # an application Xid: no node action


def test_bad_policy_is_reported_with_its_position(tmp_path: Path) -> None:
    (tmp_path / "r.yml").write_text("remediation:\n  policies:\n    - {name: a, xids: [79], action: reboot}\n"
                                    "    - {name: a, xids: [48], action: cordon}\n  drain: {timeout: soon}\n")
    with pytest.raises(InvalidDocument) as exc:
        load_rules([tmp_path / "r.yml"])
    assert "r.yml:3" in str(exc.value) and "reboot" in str(exc.value)


def test_duplicate_names_and_bad_durations(tmp_path: Path) -> None:
    (tmp_path / "r.yml").write_text("remediation:\n  policies:\n    - {name: a, xids: [79], action: cordon}\n"
                                    "    - {name: a, xids: [48], action: cordon}\n  drain: {timeout: soon}\n")
    with pytest.raises(InvalidDocument) as exc:
        load_rules([tmp_path / "r.yml"])
    text = str(exc.value)
    assert "duplicate remediation policy 'a'" in text and "soon" in text


def test_proposal_within_the_breaker_waits_for_approval() -> None:
    policy = dataclasses.replace(shipped(), max_share=0.5, max_per_hour=5)
    inc = incident()
    rem = decide.propose(inc, decide.policy_for(inc, policy), policy, decide.ClusterView(gpu_nodes=10), {}, T0)
    assert (rem.state, rem.nodes, rem.reason, rem.id) == (PROPOSED, ["gpu-node-1"], "", f"{inc.id}/{QUARANTINE}")


@pytest.mark.parametrize("view,why", [
    (decide.ClusterView(gpu_nodes=10, marked={"gpu-node-9": "INC-9"}), "2 of 10 GPU nodes"),
    (decide.ClusterView(gpu_nodes=100, cordons_last_hour=5), "6 cordons within an hour"),
    (decide.ClusterView(gpu_nodes=0), "GPU node count is unknown"),
])
def test_breaker_holds_and_says_why(view: decide.ClusterView, why: str) -> None:
    policy = dataclasses.replace(shipped(), max_share=0.1, max_per_hour=5)
    inc = incident()
    rem = decide.propose(inc, decide.policy_for(inc, policy), policy, view, {}, T0)
    assert rem.state == HELD and why in rem.reason
    same, refused = decide.approve(rem, Actor("alice"), "api", T0)
    assert same.state == HELD and "override" in refused
    lifted, ok = decide.approve(rem, Actor("alice"), "api", T0, override=True)
    assert ok == "" and lifted.state == APPROVED and lifted.approvals[0]["override"] == "yes"


def test_second_approver_must_be_someone_else() -> None:
    policy = dataclasses.replace(shipped(), second_approver_gpus=8)
    inc = incident()
    rem = decide.propose(inc, decide.policy_for(inc, policy), policy, decide.ClusterView(gpu_nodes=100),
                         {"evictedGpus": 8}, T0)
    assert rem.approvals_needed == 2
    one, _ = decide.approve(rem, Actor("alice"), "slack", T0)
    assert one.state == PROPOSED
    again, why = decide.approve(one, Actor("alice"), "api", T0)
    assert again is one and "second approver who signs in with other credentials" in why
    two, _ = decide.approve(one, Actor("bob"), "api", T0)
    assert two.state == APPROVED and [a["actor"] for a in two.approvals] == ["alice", "bob"]


def test_a_stated_name_never_makes_a_second_approver() -> None:
    """An admin token saying ?by=alice then ?by=bob, or a Slack user renamed between two clicks, is one principal."""
    policy = dataclasses.replace(shipped(), second_approver_gpus=8)
    inc = incident()
    rem = decide.propose(inc, decide.policy_for(inc, policy), policy, decide.ClusterView(gpu_nodes=100),
                         {"evictedGpus": 8}, T0)
    for first, second in ((Actor("admin", "alice"), Actor("admin", "bob")),
                          (Actor("slack:U0ANA", "ana"), Actor("slack:U0ANA", "ana-renamed"))):
        one, _ = decide.approve(rem, first, "api", T0)
        again, why = decide.approve(one, second, "api", T0)
        assert again is one and again.state == PROPOSED and first.principal in why
        assert one.approvals[0]["principal"] == first.principal and one.approvals[0]["actor"] == first.shown


def test_approvals_stored_before_principals_count_by_their_actor() -> None:
    policy = dataclasses.replace(shipped(), second_approver_gpus=8)
    inc = incident()
    rem = decide.propose(inc, decide.policy_for(inc, policy), policy, decide.ClusterView(gpu_nodes=100),
                         {"evictedGpus": 8}, T0)
    old = dataclasses.replace(rem, approvals=[{"actor": "oncall", "at": "2026-01-01T00:00:00Z", "via": "api"}])
    assert decide.approve(old, Actor("oncall"), "api", T0)[1]
    assert decide.approve(old, Actor("admin"), "api", T0)[0].state == APPROVED


def test_cancel_and_stop_follow_the_state() -> None:
    rem = decide.propose(incident(), shipped().policies[0], shipped(), decide.ClusterView(gpu_nodes=100), {}, T0)
    cancelled, _ = decide.cancel(rem, T0, reason="cancelled by bob")
    assert cancelled.state == CANCELLED
    _, why = decide.stop(rem, T0, reason="x")
    assert "not running" in why
    stopping, _ = decide.stop(dataclasses.replace(rem, state=RUNNING), T0, reason="stopped by bob")
    assert stopping.state == STOPPING
    _, why = decide.cancel(stopping, T0, reason="x")
    assert "stop it instead" in why


def test_node_folded_into_a_fleet_gives_its_proposal_up() -> None:
    rem = decide.propose(incident(), shipped().policies[0], shipped(), decide.ClusterView(gpu_nodes=100), {}, T0)
    gone = decide.supersede(rem, "INC-40", T0)
    assert gone is not None and gone.state == SUPERSEDED and "INC-40" in gone.reason
    assert decide.supersede(dataclasses.replace(rem, state=RUNNING), "INC-40", T0) is None


def test_uncordon_only_where_alertd_mark_for_this_incident_remains() -> None:
    done = Remediation(id="INC-1/quarantine", incident_id="INC-1", cluster="c", nodes=["a", "b", "c"],
                       kind=QUARANTINE, action="drain-gpu", policy="p", state="done", created_at=T0, updated_at=T0)
    view = decide.ClusterView(gpu_nodes=10, marked={"a": "INC-1", "b": "INC-7"}, cordoned=frozenset({"a", "b", "c"}))
    rem, why = decide.propose_uncordon(done, view, shipped(), T0)
    assert rem is not None and rem.nodes == ["a"] and "b, c" in why
    none, why = decide.propose_uncordon(done, decide.ClusterView(gpu_nodes=10), shipped(), T0)
    assert none is None and "no longer carries alertd's cordon mark" in why


def test_blast_radius_counts_evictions_gangs_and_pdbs() -> None:
    pods = [
        {"namespace": "ml", "name": "w-0", "node": "n1", "gpus": 8, "phase": "Running", "labels": {"app": "w", "job-name": "j"},
         "owner_chain": [{"kind": "Job", "name": "j"}, {"kind": "PyTorchJob", "name": "llm"}]},
        {"namespace": "ml", "name": "svc-0", "node": "n1", "gpus": 0, "phase": "Running", "labels": {"app": "svc"},
         "owner_chain": []},
        {"namespace": "kube-system", "name": "dcgm", "node": "n1", "gpus": 0, "phase": "Running", "labels": {},
         "daemonset": True, "owner_chain": [{"kind": "DaemonSet", "name": "dcgm"}]},
    ]
    pdbs = [{"metadata": {"namespace": "ml", "name": "llm-pdb"}, "spec": {"selector": {"matchLabels": {"app": "w"}}},
             "status": {"disruptionsAllowed": 0}}]

    class Gangs:
        def gang(self, namespace: str, pod: dict) -> dict | None:
            return {"name": "llm", "pods": 4, "nodes": ["n1", "n2"]} if pod["name"] == "w-0" else None

    out = blast.build("drain-gpu", [dict(p) for p in pods], pdbs, Gangs())
    assert (out["pods"], out["gpus"], out["evictedPods"], out["evictedGpus"]) == (3, 8, 1, 8)
    assert out["blocked"] == [{"namespace": "ml", "pod": "w-0", "pdbs": ["llm-pdb"]}]
    top = out["owners"][0]
    assert (top["kind"], top["name"], top["gang"]["pods"]) == ("PyTorchJob", "llm", 4)
    drained = blast.build("drain", [dict(p) for p in pods], [], None)
    assert drained["evictedPods"] == 2  # the DaemonSet pod stays
    assert "gangs: PyTorchJob ml/llm (4 pods on 2 nodes)" in blast.summary(out)


def test_automatic_policy_is_approved_by_the_policy_but_never_past_the_breaker() -> None:
    policy = shipped()
    auto = dataclasses.replace(policy.policies[0], automatic=True)
    inc = incident()
    rem = decide.propose(inc, auto, policy, decide.ClusterView(gpu_nodes=100), {}, T0)
    assert rem.state == APPROVED and rem.approvals[0]["actor"] == f"policy {auto.name}"
    held = decide.propose(inc, auto, policy, decide.ClusterView(gpu_nodes=100, cordons_last_hour=5), {}, T0)
    assert held.state == HELD and held.approvals == []
