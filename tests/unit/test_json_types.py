"""JSON read from outside is typed where it is decoded: the narrowing helpers, the documents cast after their
schema, and the packages whose seams carry no ``dict[str, Any]``."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from alertd.core.json_types import arr, as_array, as_text, each, integers, member, obj, objects
from alertd.core.model import Incident, Severity, Signal
from alertd.receive.payload import BadPayload, parse_notification
from alertd.remediation.model import Remediation
from alertd.report.facts import fact

ROOT = Path(__file__).resolve().parents[2] / "alertd"
# Packages whose documents are typed (TypedDicts of their schemas, JSON objects, dataclasses).
TYPED = ("alertmanager", "authoring", "cli", "config", "engine", "enrich", "gpu", "ha", "integrations", "promql",
         "receive", "remediation", "report", "rules", "schemas", "sources")
UNTYPED = re.compile(r"dict\[str, Any\]")


def test_obj_and_arr_name_where_the_value_was_not_what_was_expected() -> None:
    assert obj({"a": 1}) == {"a": 1}
    assert arr([1]) == [1]
    with pytest.raises(TypeError, match="a watch event: expected a JSON object, got list"):
        obj([], "a watch event")
    with pytest.raises(TypeError, match="items: expected a JSON array, got dict"):
        arr({}, "items")


def test_each_reads_the_objects_of_an_array_in_order() -> None:
    assert each(lambda o: o["a"], json.loads('[{"a": 1}, 2, null, "x", {"a": 3}]')) == (1, 3)
    assert each(lambda o: o, None) == () and each(lambda o: o, {"a": 1}) == ()


def test_absent_or_mistyped_members_read_as_empty() -> None:
    doc = json.loads('{"metadata": {"name": "n1"}, "items": [{"a": 1}, 2, null], "spec": "x"}')
    assert member(doc, "metadata") == {"name": "n1"}
    assert member(doc, "spec") == {} and member(doc, "status") == {} and member("not an object", "x") == {}
    assert objects(doc["items"]) == [{"a": 1}] and objects(doc.get("none")) == []
    assert as_array(doc["items"]) == [{"a": 1}, 2, None] and as_array("abc") == []
    assert as_text(member(doc, "metadata").get("name")) == "n1" and as_text(3, "-") == "-"


def test_integers_skip_what_is_no_integer() -> None:
    assert integers(json.loads('[79, "48", true, 3.5, null, 94]')) == [79, 94] and integers(None) == []


def test_an_incident_reads_back_from_its_stored_document() -> None:
    doc = json.loads(json.dumps({
        "id": "INC-12", "key": "c1/gpu-node-7", "group": "node", "title": "Xid 79 on gpu-node-7",
        "severity": "critical", "category": "hardware", "status": "open", "openedAt": "2026-03-01T10:00:00Z",
        "updatedAt": "2026-03-01T10:05:00Z", "resolvedAt": None, "cluster": "c1", "node": "gpu-node-7",
        "nodes": ["gpu-node-7"], "gpus": [{"uuid": "GPU-1", "index": "0"}], "signals": ["xid"], "xids": [79],
        "flaps": 2, "stormKeys": ["xid79"], "primary": {"kind": "xid", "severity": "critical", "xid": 79, "drain": True},
        "members": [{"fingerprint": "f1", "alertname": "GPUXid", "status": "firing", "labels": {"Hostname": "gpu-node-7"},
                     "signal": {"kind": "xid", "xid": 79}, "startsAt": "2026-03-01T10:00:00Z"}],
        "timeline": [{"at": "2026-03-01T10:00:00Z", "kind": "opened", "data": {"fingerprints": ["f1"]}}],
        "annotations": {"note": "x"}, "version": 3, "firing": 1}))
    inc = Incident.from_dict(doc)
    assert inc.primary == Signal(kind="xid", severity=Severity.CRITICAL, xid=79, drain=True)
    assert (inc.xids, inc.gpus, inc.flaps, inc.version, inc.members["f1"].signal.xid) == \
        ([79], [{"uuid": "GPU-1", "index": "0"}], 2, 3, 79)
    assert Incident.from_dict(json.loads(json.dumps(inc.to_dict()))) == inc
    assert Incident.from_dict({**doc, "xids": "79", "flaps": None, "primary": "xid"}).xids == []
    with pytest.raises(KeyError):
        Incident.from_dict({k: v for k, v in doc.items() if k != "id"})


def test_store_and_engine_seams_carry_no_untyped_dicts() -> None:
    found = [f"{p.relative_to(ROOT.parent)}:{n}" for pkg in TYPED for p in sorted((ROOT / pkg).rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if UNTYPED.search(line)]
    store = [p for p in sorted((ROOT / "store").rglob("*.py")) if p.name != "reads.py"]
    found += [f"{p.relative_to(ROOT.parent)}:{n}" for p in store
              for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if UNTYPED.search(line)]
    assert found == []


def test_a_webhook_is_checked_before_it_is_read() -> None:
    at = datetime(2026, 3, 1, tzinfo=timezone.utc)
    with pytest.raises(BadPayload) as bad:
        parse_notification({"version": "4", "status": "firing", "alerts": [{"status": "firing"}]}, at)
    assert bad.value.field.startswith("alerts.0")
    note = parse_notification({"version": "4", "status": "firing", "receiver": "alertd", "alerts": [
        {"status": "firing", "labels": {"alertname": "GPUXid", "Hostname": "gpu-node-7"},
         "startsAt": "2026-03-01T10:00:00Z"}]}, at)
    assert note.receiver == "alertd" and note.alerts[0].labels["Hostname"] == "gpu-node-7"


def test_a_stored_remediation_with_a_wrong_field_is_refused_by_name() -> None:
    doc = {"id": "INC-7/quarantine", "incident": "INC-7", "nodes": ["gpu-node-7"], "kind": "quarantine",
           "action": "cordon", "state": "proposed", "createdAt": "2026-03-01T10:00:00Z",
           "updatedAt": "2026-03-01T10:00:00Z", "blast": {"pods": 2, "gpus": 8}, "version": 1}
    rem = Remediation.from_dict(dict(doc))
    assert rem.blast == {"pods": 2, "gpus": 8} and rem.to_dict()["nodes"] == ["gpu-node-7"]
    with pytest.raises(ValueError, match="where a list belongs"):
        Remediation.from_dict({**doc, "nodes": "gpu-node-7"})


def test_a_fact_reads_an_incident_document_as_stored() -> None:
    doc = json.loads(json.dumps({
        "id": "INC-12", "cluster": "c1", "node": "gpu-node-7", "openedAt": "2026-03-01T10:00:00Z",
        "resolvedAt": None, "category": "hardware", "severity": "critical", "title": "Xid 79 on gpu-node-7",
        "primary": {"xid": 79, "action": "reboot_node"}, "xids": [79], "gpus": [{"uuid": "GPU-1"}, {"index": "2"}]}))
    f = fact(doc, nodes={("c1", "gpu-node-7"): ("h100", 8)})
    assert (f["kind"], f["xid"], f["action"], f["gpus"], f["gpusOut"], f["nodeType"], f["resolvedAt"]) == \
        ("failure", 79, "reboot_node", ["GPU-1"], 8, "h100", None)
