"""Two `alertd serve` replicas on one real PostgreSQL, acting on a real kube-apiserver: the leader is frozen
(SIGSTOP) once a proposal is made, a person approves on the follower, and the leader is killed (SIGKILL)
before it could act. The follower takes the lease and runs the remediation, once: one claim, one result,
the node cordoned with alertd's mark and its GPU pod evicted."""
from __future__ import annotations

import os
import shutil
import signal
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from testkit import kube_gpu_cluster as kc
from testkit.alertd_proc import AlertdProcess
from testkit.ha_cluster import TOKEN, fresh_database, replica_config, wait_for_leader
from testkit.pipeline import wait
from testkit.process import http_json
from testkit.webhooks import gpu_alert, webhook

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NODE = "ha-gpu-1"


def remediation(replica: AlertdProcess, incident_id: str, *states: str) -> dict | None:
    status, doc = replica.get_json(f"/api/v1/incidents/{incident_id}/remediations")
    rows = doc.get("remediations", []) if status == 200 and isinstance(doc, dict) else []
    return next((r for r in rows if r["state"] in states), None)


def test_leader_killed_between_approval_and_action_acts_once(tmp_path: Path, postgres, kube_apiserver) -> None:
    k = kube_apiserver
    kc.apply_shipped_rbac(k)
    for name in [NODE] + [f"ha-spare-{i}" for i in range(3)]:
        kc.add_node(k, name)
    kc.namespace(k, "ha")
    kc.add_pod(k, "ha", "trainer-0", NODE, gpus=8)
    rules = tmp_path / "rules"
    rules.mkdir()
    for name in ("xid-catalog.yml", "signals.yml", "correlation.yml", "evidence.yml"):
        shutil.copy(ROOT / "rules" / name, rules / name)
    (rules / "remediation.yml").write_text(kc.policy(share=0.5, timeout="10s"))
    cfg = replica_config(fresh_database(postgres.dsn), rules, ha={"lease_ttl": "3s", "renew_interval": "1s"},
                         enrich={"kube": {"kubeconfig": str(k.kubeconfig(tmp_path / "kubeconfig", kc.USER))}})
    replicas = [AlertdProcess(tmp_path / f"replica-{i}", cfg, serve_args=["--receivers", "0"]) for i in range(2)]
    try:
        for r in replicas:
            r.start(timeout=60)
        leader = wait_for_leader(replicas)
        follower = next(r for r in replicas if r is not leader)
        starts = time.time() - 60
        alert = gpu_alert("prod", NODE, 0, starts_at=datetime.fromtimestamp(starts, timezone.utc),
                          extra={"xid": "79", "severity": "critical"})
        status, body, _ = leader.post(webhook([alert], cluster="prod", node=NODE),
                                      headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200, body
        inc_id = wait("the incident", lambda: next((i["id"] for i in follower.get_json("/api/v1/incidents")[1]
                                                    .get("incidents", []) if i.get("node") == NODE), None), 30, 0.1)
        wait("the proposal", lambda: remediation(follower, inc_id, "proposed"), 30, 0.1)

        os.kill(leader.pid, signal.SIGSTOP)  # the leader can no longer act, nor renew its lease
        status, answer = http_json("POST", f"{follower.url}/api/v1/incidents/{inc_id}/remediation/approve")
        assert status == 200, answer
        leader.kill9()
        assert wait_for_leader([follower], timeout=20) is follower
        done = wait("the remediation run by the new leader",
                    lambda: remediation(follower, inc_id, "done", "failed"), 30, 0.1)
        assert done["state"] == "done", done
        node = kc.node(k, NODE)
        assert node["spec"]["unschedulable"] is True
        assert node["metadata"]["annotations"]["alertd.dev/cordoned-for"] == inc_id
        assert kc.pods_on(k, NODE) == []
        assert [r["result"] for r in done["results"] if r["step"] in ("cordon", "evict")] == ["cordoned", "evicted"]
        status, audit = follower.get_json("/api/v1/audit?limit=200")
        actions = [e["action"] for e in audit["entries"] if e["target"] == inc_id]
        assert actions.count("remediation_started") == 1 and actions.count("remediation_done") == 1, actions
        assert actions.count("remediation_approve") == 1
    finally:
        for r in replicas:
            if r.alive():
                try:
                    os.kill(r.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            r.stop()
        k.request("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"annotations": {"alertd.dev/cordoned-for": None}}},
                  content_type="application/merge-patch+json")  # the session's other tests count alertd's cordons
