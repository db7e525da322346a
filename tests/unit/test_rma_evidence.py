"""What the RMA step's ticket carries: the GPU, its Xid history with times, the kernel log; as Jira wants it."""
from __future__ import annotations

import json

from alertd.app.rma_handoff import build_evidence, xid_history
from alertd.core.findings import LOG_EVIDENCE
from alertd.core.model import Incident
from alertd.core.tickets import TicketLink
from alertd.integrations.jira import description, issue, refusal
from alertd.integrations.slack.render import render_incident
from alertd.integrations.tickets import JiraSettings
from testkit.builders import at, engine, xid

WHY = "3rd Xid 79 on GPU GPU-5fd2-9173 in 7 days (last: INC-412, INC-388)"
HISTORY = [  # store.gpu_history rows of one GPU, as HistoryReads gives them
    {"uuid": "GPU-5fd2", "incident": "INC-388", "node": "gpu-node-1", "openedAt": "2026-12-01T02:00:00Z",
     "first": "2026-12-01T02:00:01Z", "xids": [79], "serial": "1654922009381", "pci_bus_id": ""},
    {"uuid": "GPU-5fd2", "incident": "INC-412", "node": "gpu-node-2", "openedAt": "2026-12-04T10:00:00Z",
     "first": "", "xids": [79, 48], "serial": "", "pci_bus_id": "00000000:3B:00.0"},
]
NVRM = "2026-12-06T09:00:01Z gpu-node-1 NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."


def test_the_evidence_carries_the_gpu_its_xids_with_times_and_the_kernel_log() -> None:
    inc = engine().ingest([xid(79, node="gpu-node-1")], at(0))[0].incident
    inc.annotations[LOG_EVIDENCE] = [{"time": "2026-12-06T09:00:01Z", "host": "gpu-node-1",
                                      "line": NVRM.split(" ", 2)[2]}]
    ev = build_evidence(inc, {"uuid": "GPU-5fd2", "model": "NVIDIA H100 80GB HBM3"}, HISTORY, why=WHY,
                        alertd_url="https://alertd.example.com/")
    assert (ev.gpu_uuid, ev.serial, ev.pci_bus_id) == ("GPU-5fd2", "1654922009381", "00000000:3B:00.0")
    assert [(x.at, x.xid, x.incident) for x in ev.xid_history] == [
        ("2026-12-01T02:00:01Z", 79, "INC-388"), ("2026-12-04T10:00:00Z", 48, "INC-412"),
        ("2026-12-04T10:00:00Z", 79, "INC-412")]
    assert any("GPU has fallen off the bus" in line for line in ev.kernel_log)
    assert ev.link == f"https://alertd.example.com/ui/incidents/{inc.id}"
    assert ev.label.startswith("alertd-rma-") and " " not in ev.label
    assert xid_history([]) == ()


def test_the_jira_issue_is_an_atlassian_document_with_the_evidence_and_labels_without_spaces() -> None:
    inc = engine().ingest([xid(79, node="gpu-node-1")], at(0))[0].incident
    ev = build_evidence(inc, {"uuid": "GPU-5fd2", "serial": "1654922009381", "pci_bus_id": "00000000:3B:00.0"},
                        HISTORY, why=WHY)
    doc = issue(JiraSettings("https://example.atlassian.net", "ops@example.com", "t", "HW"), ev)
    fields = doc["fields"]
    assert fields["project"] == {"key": "HW"} and fields["issuetype"] == {"name": "Task"}
    assert fields["labels"] == sorted(["gpu-rma", ev.label]) and all(" " not in lb for lb in fields["labels"])
    adf = description(ev)
    assert adf["type"] == "doc" and adf["version"] == 1
    texts = str(adf)
    for needle in ("GPU UUID: GPU-5fd2", "Serial: 1654922009381", "PCI address: 00000000:3B:00.0",
                   "2026-12-01T02:00:01Z Xid 79 (INC-388, gpu-node-1)", WHY):
        assert needle in texts
    assert [b["type"] for b in adf["content"]][:2] == ["heading", "bulletList"]


def test_jiras_error_body_reads_as_one_line() -> None:
    body = {"errorMessages": [], "errors": {"labels": "The label 'gpu rma' contains spaces which is invalid."}}
    assert refusal(400, body) == "HTTP 400: labels: The label 'gpu rma' contains spaces which is invalid."
    assert refusal(401, "Client must be authenticated") == "HTTP 401: Client must be authenticated"


def test_the_incident_shows_its_ticket_as_a_typed_field_in_json_and_slack() -> None:
    inc = engine().ingest([xid(79, node="gpu-node-1")], at(0))[0].incident
    inc.tickets.append(TicketLink("jira", "jira", "HW-7", "https://example.atlassian.net/browse/HW-7", "GPU-5fd2",
                                  "2026-12-06T09:00:02Z"))
    doc = inc.to_dict()
    assert doc["tickets"] == [{"target": "jira", "system": "jira", "key": "HW-7", "gpu": "GPU-5fd2",
                               "url": "https://example.atlassian.net/browse/HW-7", "openedAt": "2026-12-06T09:00:02Z"}]
    assert Incident.from_dict(json.loads(json.dumps(doc))).tickets == inc.tickets
    _, blocks = render_incident(inc)
    assert "<https://example.atlassian.net/browse/HW-7|RMA HW-7>" in json.dumps(blocks)
