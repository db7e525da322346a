"""Findings: the typed values of what enrichment wrote, over the JSON the store keeps.

Incidents are put through the store's JSON form (to_dict -> json -> Incident.from_dict, as
store/sql.py loads them), both in the shape enrichment writes today and in shapes earlier
versions stored (text, lists of text, a dict naming the team)."""
from __future__ import annotations

import json

from alertd.core.findings import EvidenceLine, Findings, Owner, RemediationFinding, SilenceFinding
from alertd.core.kube_findings import KubeNode, NodeEvent, Pod
from alertd.core.model import Incident
from alertd.integrations.slack import render as R
from alertd.rules.owners import OwnerRouting
from testkit.builders import at, engine, xid

POD = {"namespace": "ml-training", "name": "llama-finetune-worker-0", "node": "gpu-node-2", "phase": "Running",
       "gpus": 4, "owner_chain": [{"kind": "PyTorchJob", "name": "llama-finetune", "apiVersion": "kubeflow.org/v1"}],
       "team": "ml-platform", "channel": "#ml-platform-alerts", "started": "2026-01-02T00:00:02Z"}
OWNER = {"kind": "PyTorchJob", "name": "llama-finetune", "namespace": "ml-training", "team": "ml-platform",
         "channel": "#ml-platform-alerts", "pods": 1, "gpus": 4}
LINE = {"time": "2026-01-02T03:02:30.000Z", "host": "gpu-node-2", "node": "gpu-node-2",
        "line": "[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "xid": 79, "pci": "0000:3b:00", "gpu_uuid": None, "pid": None, "process": None}


def stored(annotations: dict[str, object]) -> Incident:
    """An incident with these annotations, as the store gives it back."""
    inc = engine().ingest([xid(79, node="gpu-node-2", gpu="3")], at(0))[0].incident
    inc.annotations.update(annotations)
    return Incident.from_dict(json.loads(json.dumps(inc.to_dict())))


def test_the_documented_shapes_read_as_dataclasses():
    inc = stored({"owners": [OWNER], "pods": [POD], "log_evidence": [LINE]})
    found = inc.findings
    assert found.owners == (Owner("PyTorchJob", "llama-finetune", "ml-training", "ml-platform", "#ml-platform-alerts", 1, 4),)
    assert found.owner_lines() == ["PyTorchJob ml-training/llama-finetune · team ml-platform · #ml-platform-alerts · 1 pod, 4 GPUs"]
    assert found.teams(["team"]) == ["ml-platform"] and found.channel() == "#ml-platform-alerts"
    assert found.pod_lines() == ["ml-training/llama-finetune-worker-0 · Running · 4 GPUs · team ml-platform"]
    assert found.pods[0].top_owner is not None and found.pods[0].top_owner.kind == "PyTorchJob"
    assert found.log_lines() == ["2026-01-02T03:02:30.000Z gpu-node-2 " + LINE["line"]]
    assert found.evidence[0].xid == 79 and found.evidence[0].pid is None
    assert found.logs_unavailable is None


def test_every_finding_writes_the_shape_it_reads():
    node = {"name": "gpu-node-2", "cordoned": True, "cordoned_by": "kubectl-cordon", "cordoned_at": "2026-01-02T03:05:00Z",
            "ready": "True",
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "since": "2025-12-03T03:00:00Z"}],
            "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-01-02T03:05:00Z"}],
            "pool": "h100-pool", "instance_type": "p5.48xlarge", "gpu_product": "NVIDIA-H100-80GB-HBM3",
            "gpus": {"capacity": "8", "allocatable": "8"}}
    event = {"node": "gpu-node-2", "time": "2026-01-02T03:05:00Z", "type": "Normal", "reason": "NodeNotSchedulable",
             "message": "Node gpu-node-2 status is now: NodeNotSchedulable", "source": "kubelet", "count": 1}
    mig_line = {**LINE, "mig": {"gpu_instance": 2, "compute_instance": 1}, "pod": "worker-0"}
    silence = {"id": "s-1", "startsAt": "2026-01-02T03:00:00.000Z", "endsAt": "2026-01-02T04:00:00.000Z",
               "createdBy": "ana", "matchers": [{"name": "node", "value": "gpu-node-2", "isRegex": False}]}
    remediation = {"id": "rem-1", "kind": "cordon", "action": "cordon_node", "state": "proposed", "nodes": ["gpu-node-2"],
                   "dryRun": False, "text": "cordon gpu-node-2", "approvals": [], "approvalsNeeded": 1}
    assert KubeNode.from_json(node).to_json() == node
    assert KubeNode.from_json({"name": "gone", "missing": True}).to_json() == {"name": "gone", "missing": True}
    assert Pod.from_json(POD).to_json() == POD and Owner.from_json(OWNER).to_json() == OWNER
    assert NodeEvent.from_json(event).to_json() == event
    assert EvidenceLine.from_json(mig_line).to_json() == mig_line
    assert SilenceFinding.from_json(silence).to_json() == silence
    assert RemediationFinding.from_json(remediation).to_json() == remediation
    found = stored({"kube_node": node, "node_events": [event], "silence": silence, "remediation": remediation}).findings
    assert found.nodes[0].cordoned_by == "kubectl-cordon" and found.node_events[0].reason == "NodeNotSchedulable"
    assert found.silence is not None and found.silence.ends_at == "2026-01-02T04:00:00.000Z"
    assert found.remediation is not None and found.remediation.waiting


def test_nothing_enriched_reads_as_empty():
    found = stored({}).findings
    assert found == Findings() and found.owner_lines() == [] and found.log_lines() == [] and found.pod_lines() == []
    assert found.log_evidence is None and found.silence is None and found.remediation is None
    assert OwnerRouting().team_for(stored({})) == ""
    assert stored({"log_evidence": []}).findings.log_evidence == ()  # searched, found nothing
    assert stored({"silence": {"endsAt": "2026-01-02T04:00:00Z"}}).findings.silence is None  # no id: no silence


def test_incidents_stored_by_earlier_versions_still_load_and_render():
    inc = stored({"owners": {"team": "infra"}, "pods": ["ml/worker-0", "ml/worker-1"],
                  "log_evidence": "NVRM: Xid 79\n\nNVRM: GPU has fallen off the bus", "logs_unavailable": True})
    found = inc.findings
    assert found.owners == (Owner(team="infra"),) and found.teams(["team"]) == ["infra"] and found.channel() == ""
    assert OwnerRouting(teams=(("infra", "infra-pager"),)).receiver_for(inc, set()) == ("infra-pager", "infra")
    assert found.log_lines() == ["NVRM: Xid 79", "NVRM: GPU has fallen off the bus"]
    assert found.pod_lines() == ["ml/worker-0", "ml/worker-1"]
    assert found.logs_unavailable == ""  # unavailable, no reason given
    _, blocks = R.render_incident(inc, R.RenderContext(now=at(60)))
    body = json.dumps(blocks)
    for expected in ("ml/worker-0", "GPU has fallen off the bus", "Kernel logs unavailable", "team infra"):
        assert expected in body, expected

    labelled = stored({"owners": {"labels": {"team": "infra", "owner": "ana"}}})
    assert labelled.findings.teams(["owner", "team"]) == ["ana", "infra"]

    text_owners = stored({"owners": "ml-platform, infra"})
    assert text_owners.findings.teams(["team"]) == ["ml-platform", "infra"]
    assert OwnerRouting().team_for(text_owners) == "ml-platform"


def test_payloads_carry_the_owners_in_the_documented_shape():
    inc = stored({"owners": [OWNER]})
    assert [o.to_json() for o in inc.findings.owners] == [OWNER]
