"""Remediation end to end on a REAL kube-apiserver (etcd, RBAC, kube-controller-manager's disruption
controller for PDB status), as alertd's account under the shipped RBAC: an Xid 79 webhook -> a proposal
with the node's pods, owners and gang -> a signed Slack approval -> cordon and the GPU pods evicted (a
PDB-guarded one reported, not forced) -> the incident resolves -> an uncordon proposal -> approved ->
uncordoned; every step on the timeline and in the audit log with its actor."""
from __future__ import annotations

from pathlib import Path

import pytest

from alertd.config.settings import parse_config
from testkit import kube_gpu_cluster as kc
from testkit.kube_apiserver import KubeAPIServer
from testkit.notify_harness import Harness, hook, one_channel, top_messages, wait_for, xid_alert

pytestmark = pytest.mark.services
NS = "ml-training"


@pytest.fixture(scope="module")
def cluster(kube_apiserver: KubeAPIServer) -> KubeAPIServer:
    k = kube_apiserver
    kc.apply_shipped_rbac(k)
    for i in range(1, 11):
        kc.add_node(k, f"gpu-{i}")
    kc.namespace(k, NS)
    kc.namespace(k, "serving")
    kc.pytorch_gang(k, NS, "llm-pretrain", ["gpu-1", "gpu-2"])
    kc.add_pod(k, "serving", "inference-0", "gpu-1", gpus=1, labels={"app": "inference"})
    kc.add_pod(k, NS, "tensorboard-0", "gpu-1", labels={"app": "tensorboard"})  # no GPU: drain-gpu keeps it
    kc.ok(k.request("POST", "/apis/policy/v1/namespaces/serving/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "inference"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "inference"}}}}))
    return k


async def harness(tmp_path: Path, slack, k: KubeAPIServer, *, dry_run: bool = False, share: float = 0.2,
                  per_hour: int = 5, timeout: str = "3s", user: str = kc.USER, policy: str = "") -> Harness:
    """alertd in-process with the policy (kc.policy unless ``policy``), acting as ``user`` on the API server."""
    h = Harness(tmp_path, slack=slack, routing=one_channel("#gpu-oncall"))
    (tmp_path / "rules" / "remediation.yml").write_text(policy or kc.policy(
        dry_run=dry_run, share=share, per_hour=per_hour, timeout=timeout, slack_users=("U0ANA",)))
    kubeconfig = k.kubeconfig(tmp_path / "kubeconfig", user)
    h.cfg = parse_config({**h.cfg.raw, "enrich": {"kube": {"kubeconfig": str(kubeconfig)}}}, "test")
    return await h.start()


async def remediations(h: Harness, incident_id: str) -> list[dict]:
    resp = await h.client.get(f"/api/v1/incidents/{incident_id}/remediations")
    assert resp.status == 200, await resp.text()
    return (await resp.json())["remediations"]


async def in_state(h: Harness, incident_id: str, kind: str, *states: str, timeout: float = 20) -> dict:
    async def found():
        return next((r for r in await remediations(h, incident_id) if r["kind"] == kind and r["state"] in states), None)
    return await wait_for(found, timeout)


async def test_xid79_proposal_approval_drain_resolve_uncordon(tmp_path, slack, cluster) -> None:
    k = cluster
    h = await harness(tmp_path, slack, k)
    try:
        await h.post(hook(xid_alert("gpu-1", 3), node="gpu-1"))
        inc = await h.one_incident()
        rem = await in_state(h, inc["id"], "quarantine", "proposed")
        blast = rem["blast"]
        pods = {p["name"]: p for p in blast["podList"]}
        assert set(pods) == {"llm-pretrain-worker-0", "llm-pretrain-worker-1", "inference-0", "tensorboard-0"}
        assert [o["kind"] for o in pods["llm-pretrain-worker-0"]["owner_chain"]] == ["Job", "PyTorchJob"]
        top = next(o for o in blast["owners"] if o["kind"] == "PyTorchJob")
        assert (top["name"], top["gpus"], top["gang"]["pods"], top["gang"]["nodes"]) == (
            "llm-pretrain", 8, 4, ["gpu-1", "gpu-2"])
        assert (blast["evictedPods"], blast["evictedGpus"]) == (3, 9)
        assert pods["tensorboard-0"]["evict"] is False
        assert blast["blocked"] == [{"namespace": "serving", "pod": "inference-0", "pdbs": ["inference"]}]

        # The Slack message carries the proposal and its buttons; a click by someone not in the policy is refused.
        await wait_for(lambda: any(e.get("action_id") == "alertd_remediation_approve"
                                   for m in top_messages(slack, "#gpu-oncall") for b in m.get("blocks", [])
                                   if b["type"] == "actions" for e in b["elements"]))
        assert await h.click("alertd_remediation_approve", inc["id"], user=("U0EVE", "eve")) == 200
        await h.actions_idle()
        assert (await remediations(h, inc["id"]))[0]["state"] == "proposed"
        assert await h.click("alertd_remediation_approve", inc["id"]) == 200  # U0ANA, in approvers.slack_users
        await h.actions_idle()
        done = await in_state(h, inc["id"], "quarantine", "done", "failed")
        assert done["state"] == "done", done
        node = kc.node(k, "gpu-1")
        assert node["spec"]["unschedulable"] is True
        assert node["metadata"]["annotations"]["alertd.dev/cordoned-for"] == inc["id"]
        assert {"key": "alertd.dev/quarantine", "value": inc["id"], "effect": "NoSchedule"} in node["spec"]["taints"]
        left = await wait_for(lambda: (lambda p: p if "ml-training/llm-pretrain-worker-0" not in p else None)(
            kc.pods_on(k, "gpu-1")))
        assert left == ["ml-training/tensorboard-0", "serving/inference-0"]
        blocked = next(r for r in done["results"] if r.get("pod") == "serving/inference-0")
        assert blocked["ok"] is False and "PodDisruptionBudget" in blocked["result"] and blocked["status"] == 429
        assert kc.pods_on(k, "gpu-2") == ["ml-training/llm-pretrain-worker-2", "ml-training/llm-pretrain-worker-3"]

        # Resolve -> uncordon proposal (only for alertd's own cordon) -> approved by API -> uncordoned.
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/resolve")
        assert resp.status == 200, await resp.text()
        back = await in_state(h, inc["id"], "uncordon", "proposed")
        assert back["nodes"] == ["gpu-1"]
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/remediation/approve?kind=uncordon")
        assert resp.status == 200, await resp.text()
        await in_state(h, inc["id"], "uncordon", "done")
        node = kc.node(k, "gpu-1")
        assert not node["spec"].get("unschedulable") and "alertd.dev/cordoned-for" not in node["metadata"].get(
            "annotations", {})
        assert not any(t["key"] == "alertd.dev/quarantine" for t in node["spec"].get("taints") or [])

        timeline = [(e["kind"], e.get("actor", "")) for e in (await h.incident(inc["id"]))["timeline"]]
        for step in [("remediation_proposed", "alertd"), ("remediation_approve", "ana (slack:U0ANA)"),
                     ("remediation_started", "alertd"), ("remediation_done", "alertd")]:
            assert step in timeline, timeline
        assert timeline.count(("remediation_done", "alertd")) == 2  # the drain, and the uncordon after resolving
        audit = [(a.actor, a.action, a.outcome.split(":")[0]) for a in await h.store.list_audit(limit=100)]
        assert ("eve (slack:U0EVE)", "remediation_approve", "refused") in audit
        assert ("ana (slack:U0ANA)", "remediation_approve", "ok") in audit
        assert sum(1 for a in audit if a[1] == "remediation_approve" and a[2] == "ok") >= 2
    finally:
        await h.stop()


async def test_storm_of_40_nodes_gets_one_fleet_proposal_held_by_the_breaker(tmp_path, slack, cluster) -> None:
    k = cluster
    nodes = [f"storm-{i:02d}" for i in range(40)]
    for name in nodes:
        kc.add_node(k, name)
    h = await harness(tmp_path, slack, k, share=0.2)
    try:
        for name in nodes:
            await h.post(hook(xid_alert(name, 0), node=name))
        fleet = await wait_for(lambda: _fleet(h), 30)
        async def all_in() -> dict | None:  # the waiting proposal follows its fleet as nodes fold in
            rem = await in_state(h, fleet["id"], "quarantine", "held")
            return rem if sorted(rem["nodes"]) == nodes else None
        rem = await wait_for(all_in, 30)
        marked = sum(1 for n in kc.ok(k.request("GET", "/api/v1/nodes"))["items"]
                     if "alertd.dev/cordoned-for" in (n["metadata"].get("annotations") or {}))  # other tests' cordons
        assert rem["reason"].startswith(f"circuit breaker: {40 + marked} of ")
        assert "GPU nodes would be cordoned by alertd" in rem["reason"]
        async def only_the_fleets() -> list | None:  # node proposals give way as their folds are proposed on
            resp = await h.client.get("/api/v1/remediations", params={"state": "proposed,held,approved,running"})
            live = (await resp.json())["remediations"]
            return live if [r["incident"] for r in live] == [fleet["id"]] else None
        assert await wait_for(only_the_fleets, 30)
        # approving without the override is refused, and says why
        resp = await h.client.post(f"/api/v1/incidents/{fleet['id']}/remediation/approve")
        assert resp.status == 409 and "needs an explicit override" in (await resp.json())["error"]
        resp = await h.client.post(f"/api/v1/incidents/{fleet['id']}/remediation/cancel")
        assert resp.status == 200
        assert not any(kc.node(k, n)["spec"].get("unschedulable") for n in nodes)
    finally:
        await h.stop()


async def _fleet(h: Harness) -> dict | None:
    return next((i for i in await h.incidents() if i.get("fleet")), None)


async def test_dry_run_acts_on_nothing(tmp_path, slack, cluster) -> None:
    """Approved from the web UI, the proposal runs as a dry run: the cluster is left exactly as it was."""
    k = cluster
    kc.namespace(k, "dry")
    kc.add_pod(k, "dry", "trainer-0", "gpu-3", gpus=8)
    before = (kc.node(k, "gpu-3"), kc.pods_on(k, "gpu-3"))
    h = await harness(tmp_path, slack, k, dry_run=True)
    try:
        await h.post(hook(xid_alert("gpu-3", 1), node="gpu-3"))
        inc = await h.one_incident()
        rem = await in_state(h, inc["id"], "quarantine", "proposed")
        assert rem["dryRun"] is True and rem["blast"]["evictedPods"] == 1
        page = await (await h.client.get(f"/ui/incidents/{inc['id']}")).text()
        assert "dry run: nothing is done" in page and "Approve drain-gpu" in page and "evicts 1 pod (8 GPUs)" in page
        origin = str(h.client.make_url("")).rstrip("/")
        resp = await h.client.post(f"/ui/incidents/{inc['id']}/action", data={"action": "remediation-approve-quarantine"},
                                   headers={"Origin": origin}, allow_redirects=False)
        assert resp.status == 303 and resp.headers["Location"].endswith("?done=approve"), resp.headers["Location"]
        done = await in_state(h, inc["id"], "quarantine", "done")
        assert [r["result"] for r in done["results"]] == ["dry run: would cordon", "dry run: would evict 1 pod"]
        assert (kc.node(k, "gpu-3")["spec"], kc.pods_on(k, "gpu-3")) == (before[0]["spec"], before[1])
        assert "alertd.dev/cordoned-for" not in (kc.node(k, "gpu-3")["metadata"].get("annotations") or {})
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/resolve")
        assert resp.status == 200
        await h.incident(inc["id"])
        assert [r["kind"] for r in await remediations(h, inc["id"])] == ["quarantine"]  # nothing to give back
    finally:
        await h.stop()


async def test_a_node_someone_else_cordoned_is_never_uncordoned(tmp_path, slack, cluster) -> None:
    k = cluster
    out = k.kubectl("cordon", "gpu-4")
    assert out.returncode == 0, out.stderr
    h = await harness(tmp_path, slack, k)
    try:
        await h.post(hook(xid_alert("gpu-4", 2), node="gpu-4"))
        inc = await h.one_incident()
        await in_state(h, inc["id"], "quarantine", "proposed")
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/remediation/approve")
        assert resp.status == 200
        done = await in_state(h, inc["id"], "quarantine", "done")
        cordon = next(r for r in done["results"] if r["step"] == "cordon")
        assert "already cordoned by someone else" in cordon["result"]
        assert "alertd.dev/cordoned-for" not in (kc.node(k, "gpu-4")["metadata"].get("annotations") or {})
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/resolve")
        assert resp.status == 200
        await wait_for(lambda: _audited(h, "remediation_not_proposed"))
        assert [r["kind"] for r in await remediations(h, inc["id"])] == ["quarantine"]
        assert kc.node(k, "gpu-4")["spec"]["unschedulable"] is True
    finally:
        await h.stop()
        k.kubectl("uncordon", "gpu-4")


async def _audited(h: Harness, action: str) -> list:
    return [a for a in await h.store.list_audit(limit=200) if a.action == action]


def test_the_shipped_rbac_is_what_remediation_needs_and_no_more(cluster) -> None:
    k = cluster
    token = k.token(kc.USER)

    def can(verb: str, resource: str) -> bool:
        resource, _, sub = resource.partition("/")
        out = k.kubectl("auth", "can-i", verb, resource, *([f"--subresource={sub}"] if sub else []), token=token)
        return out.stdout.strip() == "yes"

    needed = [("patch", "nodes"), ("create", "pods/eviction"), ("list", "poddisruptionbudgets"),
              ("list", "nodes"), ("list", "pods"), ("get", "jobs.batch"), ("get", "pytorchjobs.kubeflow.org")]
    refused = [("delete", "pods"), ("create", "pods"), ("patch", "pods"), ("update", "nodes"), ("delete", "nodes"),
               ("patch", "nodes/status"), ("create", "pods/exec"), ("list", "secrets"), ("get", "secrets"), ("delete", "jobs.batch"),
               ("patch", "pytorchjobs.kubeflow.org"), ("create", "poddisruptionbudgets"), ("list", "jobs.batch")]
    assert [n for n in needed if not can(*n)] == []
    assert [r for r in refused if can(*r)] == []
    status, _ = k.request("DELETE", f"/api/v1/namespaces/{NS}/pods/tensorboard-0", token=token)
    assert status == 403


async def test_an_account_without_rights_is_reported_not_dropped(tmp_path, slack, cluster) -> None:
    """As a user with no rights: the blast radius says the cluster is unreadable, the breaker holds (the GPU node
    count is unknown), and an overridden approval fails on the incident with the 403."""
    k = cluster
    h = await harness(tmp_path, slack, k, user="nobody")
    try:
        await h.post(hook(xid_alert("gpu-5", 0), node="gpu-5"))
        inc = await h.one_incident()
        rem = await in_state(h, inc["id"], "quarantine", "held")
        assert "HTTP 403" in rem["blast"]["error"] and "GPU node count is unknown" in rem["reason"]
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/remediation/override")
        assert resp.status == 200, await resp.text()
        failed = await in_state(h, inc["id"], "quarantine", "failed")
        assert failed["reason"].startswith("forbidden by RBAC") and failed["results"][0]["status"] == 403
        assert not kc.node(k, "gpu-5")["spec"].get("unschedulable")
        timeline = (await h.incident(inc["id"]))["timeline"]
        assert any(e["kind"] == "remediation_failed" and "403" in e.get("text", "") for e in timeline)
    finally:
        await h.stop()


async def test_a_drain_in_flight_can_be_stopped(tmp_path, slack, cluster) -> None:
    """A drain waiting on a PodDisruptionBudget (timeout 5m) stops when asked; what it did stays done."""
    k = cluster
    kc.namespace(k, "stoppable")
    kc.add_pod(k, "stoppable", "guarded-0", "gpu-6", gpus=4, labels={"app": "guarded"})
    kc.ok(k.request("POST", "/apis/policy/v1/namespaces/stoppable/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}))
    h = await harness(tmp_path, slack, k, timeout="5m")
    try:
        await h.post(hook(xid_alert("gpu-6", 0), node="gpu-6"))
        inc = await h.one_incident()
        await in_state(h, inc["id"], "quarantine", "proposed")
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/remediation/approve")
        assert resp.status == 200
        await in_state(h, inc["id"], "quarantine", "running")
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/remediation/stop")
        assert resp.status == 200, await resp.text()
        stopped = await in_state(h, inc["id"], "quarantine", "stopped", timeout=15)
        assert next(r for r in stopped["results"] if r["step"] == "cordon")["result"] == "cordoned"
        guarded = next(r for r in stopped["results"] if r.get("pod") == "stoppable/guarded-0")
        assert not guarded["ok"] and "stopped" in guarded["result"]
        assert kc.pods_on(k, "gpu-6") == ["stoppable/guarded-0"]
        audit = [(a.action, a.outcome) for a in await h.store.list_audit(limit=100)]
        assert ("remediation_stop", "ok") in audit and ("remediation_stopped", "ok") in audit
    finally:
        await h.stop()


async def test_handoff_labels_the_node_for_an_external_remediator(tmp_path, slack, cluster) -> None:
    """action handoff: the policy's label and alertd's incident annotation on the node, no cordon."""
    k = cluster
    h = await harness(tmp_path, slack, k, policy=kc.policy(share=0.5).replace(
        "action: drain-gpu}", "action: handoff, handoff: {labels: {remediation.example.com/requested: 'true'}}}"))
    try:
        await h.post(hook(xid_alert("gpu-7", 0), node="gpu-7"))
        inc = await h.one_incident()
        rem = await in_state(h, inc["id"], "quarantine", "proposed")
        assert rem["action"] == "handoff" and rem["blast"]["evictedPods"] == 0
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/remediation/approve")
        assert resp.status == 200
        done = await in_state(h, inc["id"], "quarantine", "done")
        assert [r["result"] for r in done["results"]] == ["handed off"]
        node = kc.node(k, "gpu-7")
        assert node["metadata"]["labels"]["remediation.example.com/requested"] == "true"
        assert node["metadata"]["annotations"]["alertd.dev/incident"] == inc["id"]
        assert not node["spec"].get("unschedulable")
    finally:
        await h.stop()


async def test_read_only_rbac_still_proposes_and_reports_the_403_on_approval(tmp_path, slack, cluster) -> None:
    """With only the shipped enrichment role (the remediation role deleted): the proposal shows the pods and
    says the PDBs could not be read; an approved cordon fails on the incident with the 403."""
    k = cluster
    kc.ok(k.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "alertd-enrichment-read-only"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": f"alertd-enrichment-{kc.USER}"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alertd"}]}), 409)
    kc.namespace(k, "readonly")
    kc.add_pod(k, "readonly", "trainer-0", "gpu-8", gpus=8)
    h = await harness(tmp_path, slack, k, share=0.5, user="alertd")
    try:
        await h.post(hook(xid_alert("gpu-8", 0), node="gpu-8"))
        inc = await h.one_incident()
        rem = await in_state(h, inc["id"], "quarantine", "proposed")
        assert [p["name"] for p in rem["blast"]["podList"]] == ["trainer-0"] and rem["blast"]["evictedGpus"] == 8
        assert "PodDisruptionBudgets not readable (HTTP 403" in rem["blast"]["error"]
        resp = await h.client.post(f"/api/v1/incidents/{inc['id']}/remediation/approve")
        assert resp.status == 200
        failed = await in_state(h, inc["id"], "quarantine", "failed")
        assert failed["reason"].startswith("forbidden by RBAC") and failed["results"][0]["status"] == 403
        assert not kc.node(k, "gpu-8")["spec"].get("unschedulable")
    finally:
        await h.stop()
