"""The inbound payloads' schemas are generated from their Structs (alertd/receive/shapes.py) and word every
refusal as the hand-written files did: of several errors at one depth the same one is told (the Structs keep
the files' key order), a one-value Literal is a const, an enum has no type, and the patterns the hot path
checks in code are the schema's."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

import pytest

from alertd.receive import wire
from alertd.receive.cloudevents import read_cloudevents
from alertd.receive.payload import BadPayload, read_notification
from alertd.schemas import schema
from tests.unit.test_cloudevents import STRUCTURED, health_event

AT = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
ALERT = {"status": "firing", "labels": {}, "startsAt": "2026-12-01T12:00:00Z"}
GENERIC = {"specversion": "1.0", "id": "7", "source": "//checker", "type": "dev.alertd.gpu.health.v1",
           "time": "2026-12-06T04:00:00Z"}


def _refusal(read: Any) -> tuple[str, str]:
    with pytest.raises(BadPayload) as refused:
        read()
    return str(refused.value), refused.value.field


@pytest.mark.parametrize(("doc", "message"), [
    ({"version": 4, "status": "x", "alerts": []}, 'version: got 4 (not a string), accepted only "4"'),
    ({"version": "4", "status": "x", "truncatedAlerts": -1, "alerts": []}, "truncatedAlerts: -1 is less than the minimum of 0"),
    ({"version": "4", "status": "firing", "alerts": [{**ALERT, "annotations": 5, "startsAt": "x"}]},
     "alerts[0].annotations: 5 is not of type 'object'"),
    ({"version": "4", "status": "firing", "alerts": [{**ALERT, "status": "x", "labels": 5}]},
     "alerts[0].status: 'x' is not one of ['firing', 'resolved']"),
])
def test_a_webhook_with_several_errors_is_told_its_first_as_before(doc: dict[str, Any], message: str) -> None:
    assert _refusal(lambda: read_notification(json.dumps(doc).encode(), AT))[0] == message


def _nvsentinel(**data: Any) -> dict[str, Any]:
    event = health_event()
    event["data"].update(data)
    return event


@pytest.mark.parametrize(("event", "told"), [
    ({**health_event(), "specversion": 1.0}, ('specversion: got 1.0, accepted only "1.0"', "specversion")),
    (_nvsentinel(metadata={"a": 1, "cluster": 2}), ("data.metadata.cluster: 2 is not of type 'string'",
                                                    "data.metadata.cluster")),
    (_nvsentinel(healthEvent={"isHealthy": True}), ("data.healthEvent.nodeName: 'nodeName' is a required property",
                                                    "data.healthEvent.nodeName")),
    (_nvsentinel(healthEvent={"nodeName": "n", "checkName": "c", "isHealthy": True, "version": 1.5}),
     ("data.healthEvent.version: 1.5 is not of type 'integer', 'string'", "data.healthEvent.version")),
    ({**GENERIC, "data": {"check": "c", "healthy": False, "nod": "n"}},
     ("data: unknown key(s) 'nod' (did you mean 'node'?)", "data")),
    ({**GENERIC, "data": {"node": "n", "check": "c", "healthy": False, "kind": 5}},
     ("data.kind: 5 is not one of ['xid', 'ecc', 'row_remap', 'nvlink', 'thermal', 'gpu_missing', 'gpu_unusable', "
      "'other']", "data.kind")),
])
def test_a_cloudevent_with_several_errors_is_told_its_first_as_before(event: dict[str, Any],
                                                                      told: tuple[str, str]) -> None:
    assert _refusal(lambda: read_cloudevents(STRUCTURED, json.dumps(event).encode(), "")) == told


def test_the_patterns_the_fast_path_checks_in_code_are_the_schemas() -> None:
    shipped: Any = schema("webhook")
    alert = shipped["$defs"]["alert"]["properties"]
    assert alert["startsAt"]["pattern"] == alert["endsAt"]["pattern"] == wire.TIME_PATTERN
    assert alert["fingerprint"]["pattern"] == "^[0-9a-fA-F]{1,32}$"
    assert re.fullmatch(wire.TIME, "2026-12-01T12:00:00.5+01:00") and not re.fullmatch(wire.TIME, "2026-12-01T12:00:00")


def test_a_generic_event_reads_through_its_struct() -> None:
    data = {"node": "n1", "check": "row-remap", "healthy": False, "xid": 79.0, "gpu": {"index": "1"}}
    (alert,) = read_cloudevents(STRUCTURED, json.dumps({**GENERIC, "data": data}).encode(), "lab")
    labels: Any = alert["labels"]
    assert labels["xid"] == "79" and labels["kind"] == "xid" and labels["gpu"] == "1" and labels["cluster"] == "lab"
    assert alert["startsAt"] == GENERIC["time"]
