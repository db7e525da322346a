"""Evidence and Owners: the typed view of what enrichment wrote, over the JSON the store keeps.

Incidents are put through the store's JSON form (to_dict -> json -> Incident.from_dict, as
store/sql.py loads them), both in the shape enrichment writes today and in shapes earlier
versions stored (text, lists of text, a dict naming the team)."""
from __future__ import annotations

import json

from alertd.core.findings import Evidence, Owner, Owners
from alertd.core.model import Incident
from alertd.integrations.slack import render as R
from alertd.rules.owners import OwnerRouting
from tests.unit.builders import at, engine, xid

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
    owners = Owners.of(inc.annotations)
    assert owners.owners == (Owner("PyTorchJob", "llama-finetune", "ml-training", "ml-platform", "#ml-platform-alerts", 1, 4),)
    assert owners.lines() == ["PyTorchJob ml-training/llama-finetune · team ml-platform · #ml-platform-alerts · 1 pod, 4 GPUs"]
    assert owners.teams(["team"]) == ["ml-platform"] and owners.channel() == "#ml-platform-alerts"
    found = Evidence.of(inc.annotations)
    assert found.pod_lines() == ["ml-training/llama-finetune-worker-0 · Running · 4 GPUs · team ml-platform"]
    assert found.log_lines() == ["2026-01-02T03:02:30.000Z gpu-node-2 " + LINE["line"]]
    assert found.unavailable_reasons() == [] and not found.logs_unavailable


def test_nothing_enriched_reads_as_empty():
    inc = stored({})
    assert not Owners.of(inc.annotations) and Owners.of(inc.annotations).lines() == []
    assert Evidence.of(inc.annotations).log_lines() == [] and Evidence.of(inc.annotations).pod_lines() == []
    assert OwnerRouting().team_for(inc) == ""


def test_incidents_stored_by_earlier_versions_still_load_and_render():
    inc = stored({"owners": {"team": "infra"}, "pods": ["ml/worker-0", "ml/worker-1"],
                  "log_evidence": "NVRM: Xid 79\n\nNVRM: GPU has fallen off the bus", "logs_unavailable": True})
    owners = Owners.of(inc.annotations)
    assert owners.owners == () and owners.teams(["team"]) == ["infra"] and owners.channel() == ""
    assert OwnerRouting(teams=(("infra", "infra-pager"),)).receiver_for(inc, set()) == ("infra-pager", "infra")
    found = Evidence.of(inc.annotations)
    assert found.log_lines() == ["NVRM: Xid 79", "NVRM: GPU has fallen off the bus"]
    assert found.pod_lines() == ["ml/worker-0", "ml/worker-1"]
    _, blocks = R.render_incident(inc, R.RenderContext(now=at(60)))
    body = json.dumps(blocks)
    for expected in ("ml/worker-0", "GPU has fallen off the bus", "Kernel logs unavailable"):
        assert expected in body, expected
    assert "team: infra" in body  # an owners dict of an earlier version, shown as key: value

    labelled = stored({"owners": {"labels": {"team": "infra", "owner": "ana"}}})
    assert Owners.of(labelled.annotations).teams(["owner", "team"]) == ["ana", "infra"]

    text_owners = stored({"owners": "ml-platform, infra"})
    assert Owners.of(text_owners.annotations).teams(["team"]) == ["ml-platform", "infra"]
    assert OwnerRouting().team_for(text_owners) == "ml-platform"


def test_payloads_carry_the_owners_as_stored():
    inc = stored({"owners": [OWNER]})
    assert Owners.of(inc.annotations).stored == [OWNER]
