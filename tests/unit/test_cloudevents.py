"""CloudEvents -> alerts: the three HTTP-binding modes, NVSentinel's event in its published shapes (the
exporter's transformer: recommendedAction an integer, errorCode ["79"] under an Xid check; its design
document's example: recommendedAction "REPLACE_GPU", errorCode ["XID_48"]), how each classifies, and
refusals that name the field."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from alertd.engine.pipeline import Engine
from alertd.receive.cloudevents import read_cloudevents
from alertd.receive.payload import BadPayload, encode_webhook, read_stored
from testkit.builders import shipped_rules

NOW = datetime(2026, 12, 6, 4, 40, tzinfo=timezone.utc)
STRUCTURED = {"Content-Type": "application/cloudevents+json; charset=utf-8"}
RULES = shipped_rules()


def health_event(check: str = "SysLogsXIDError", codes: list[str] | None = None, healthy: bool = False,
                 action: Any = 15, type_: str = "com.nvidia.nvsentinel.health.v1") -> dict[str, Any]:
    return {"specversion": "1.0", "type": type_, "source": "nvsentinel://us-west-1-prod/healthevents",
            "id": "fe5302cf-1887-48a9-8e6e-117d366a7344", "time": "2026-12-06T04:30:00.123456Z",
            "data": {"metadata": {"cluster": "us-west-1-prod", "environment": "production"},
                     "healthEvent": {"version": 1, "agent": "syslog-health-monitor", "componentClass": "GPU",
                                     "checkName": check, "isFatal": not healthy, "isHealthy": healthy,
                                     "message": "GPU 3 reported XID 48: Double Bit ECC Error",
                                     "recommendedAction": action, "errorCode": ["79"] if codes is None else codes,
                                     "entitiesImpacted": [{"entityType": "PCI", "entityValue": "0000:17:00.0"}],
                                     "generatedTimestamp": "2026-12-06T04:30:00.123456Z", "nodeName": "gpu-node-42"}}}


def signal(wire: dict[str, Any]) -> Any:
    (alert,) = read_stored(encode_webhook([wire], "cloudevents"), NOW).alerts
    return Engine(RULES).prepare(alert).signal


def test_nvsentinel_xid_event_is_that_xid_and_its_healthy_event_resolves_the_same_alert() -> None:
    (fired,) = read_cloudevents(STRUCTURED, json.dumps(health_event()).encode(), "")
    assert fired["labels"]["xid"] == "79" and fired["labels"]["cluster"] == "us-west-1-prod"
    assert fired["labels"]["pci_bus_id"] == "0000:17:00.0" and fired["startsAt"] == "2026-12-06T04:30:00.123456Z"
    assert signal(fired).kind == "xid" and "79" in signal(fired).title
    (healthy,) = read_cloudevents(STRUCTURED, json.dumps(health_event(codes=[], healthy=True, action=0)).encode(), "")
    assert healthy["status"] == "resolved" and healthy["fingerprint"] == fired["fingerprint"]


def test_the_event_exporters_whole_output_is_taken() -> None:
    """What NVSentinel's event exporter sends (event-exporter/pkg/transformer/cloudevents.go): RFC3339Nano times
    with nine digits, the overrides and gpuUUID it adds beside the HealthEvent's fields, the event's own metadata
    map, and recommendedAction as the enum's number."""
    doc = health_event()
    at = "2026-12-06T04:30:00.123456789Z"
    doc["time"] = at
    doc["data"]["healthEvent"].update({
        "generatedTimestamp": at, "recommendedAction": 24, "metadata": {"node.kubernetes.io/instance-type": "p5"},
        "entitiesImpacted": [{"entityType": "GPU", "entityValue": "3"},
                             {"entityType": "GPU_UUID", "entityValue": "GPU-1b2c3d4e-0000-1111-2222-333344445555"}],
        "gpuUUID": "GPU-1b2c3d4e-0000-1111-2222-333344445555",
        "quarantineOverrides": {"force": False, "skip": True}, "drainOverrides": {"force": True, "skip": False}})
    (a,) = read_cloudevents(STRUCTURED, json.dumps(doc).encode(), "")
    assert a["startsAt"] == at and a["labels"]["UUID"] == "GPU-1b2c3d4e-0000-1111-2222-333344445555"
    assert a["labels"]["gpu"] == "3" and a["annotations"]["recommended_action"] == "24"
    assert signal(a).kind == "xid"


def test_the_design_documents_shape_and_an_nvlink_check() -> None:
    doc = health_event("XID_ERROR_48", ["XID_48"], action="REPLACE_GPU", type_="com.nvidia.nvsentinel.healthevents.v1")
    (a,) = read_cloudevents(STRUCTURED, json.dumps(doc).encode(), "")
    assert a["labels"]["xid"] == "48" and signal(a).kind == "xid"
    (nv,) = read_cloudevents(STRUCTURED, json.dumps(health_event("GpuNvlinkWatch", ["NVLINK_DOWN"])).encode(), "")
    assert "xid" not in nv["labels"] and signal(nv).kind == "nvlink"


def test_binary_and_batched_modes() -> None:
    headers = {"Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": "7", "ce-source": "//checker",
               "ce-type": "dev.alertd.gpu.health.v1", "ce-time": "2026-12-06T04:00:00Z"}
    data = {"node": "n1", "check": "row-remap", "healthy": False, "kind": "row_remap", "gpu": {"index": "1"}}
    (a,) = read_cloudevents(headers, json.dumps(data).encode(), "lab")
    assert a["labels"]["cluster"] == "lab" and a["startsAt"] == "2026-12-06T04:00:00Z" and signal(a).kind == "row_remap"
    batch = [health_event(), {**health_event(), "id": "other"}]
    assert len(read_cloudevents({"Content-Type": "application/cloudevents-batch+json"},
                                json.dumps(batch).encode(), "")) == 2


@pytest.mark.parametrize(("headers", "body", "field"), [
    (STRUCTURED, b"{not json", None),
    (STRUCTURED, b"[]", "document"),
    (STRUCTURED, json.dumps({k: v for k, v in health_event().items() if k != "time"}).encode(), "time"),
    ({"Content-Type": "application/cloudevents-batch+json"}, b"{}", "document"),
    ({"Content-Type": "application/xml", "ce-specversion": "1.0"}, b"<a/>", "content-type"),
    ({"Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": "1", "ce-source": "s",
      "ce-time": "2026-12-06T04:00:00Z", "ce-type": "dev.alertd.gpu.health.v1"}, b'{"node": "n", "check": "c", "healthy": false, "gpu": {"bus": 1}}',
     "data.gpu"),
])
def test_refusals_name_the_field(headers: dict[str, str], body: bytes, field: str | None) -> None:
    with pytest.raises(BadPayload) as err:
        read_cloudevents(headers, body, "")
    if field is None:
        assert err.value.reason == "json"
    else:
        assert err.value.field == field and str(err.value).startswith(field), str(err.value)
