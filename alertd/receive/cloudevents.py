"""CloudEvents (HTTP binding, structured, batched and binary modes) -> alerts in the webhook's wire form.

Each known producer has a JSON Schema for its data, chosen by the event's ``type``: NVSentinel's
health events (its event exporter) and a documented generic GPU-health event for anyone else
(docs/sources.md). A bad event is BadPayload naming the field ("data.healthEvent.nodeName", or
"ce-id" for a binary-mode header), answered 400 like a bad webhook.

An alert's fingerprint comes from what it is about (producer, cluster, node, check, GPU), so a
later healthy event resolves it; its ``startsAt`` from when the producer saw it, so an event
delivered again (the same source and id, an at-least-once exporter's retry) makes the same
delivery key and the engine drops it.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Mapping, TypedDict, cast

from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.states import Severity
from alertd.receive.payload import BadPayload, decode_body, fingerprint_of
from alertd.schemas import describe, validator
from alertd.core.vocabulary import SignalKind

STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
SOURCE = "cloudevents"
NVSENTINEL_TYPES = ("com.nvidia.nvsentinel.health.v1", "com.nvidia.nvsentinel.healthevents.v1")
GENERIC_TYPE = "dev.alertd.gpu.health.v1"
ATTRIBUTES = ("specversion", "id", "source", "type", "time", "subject", "dataschema")
XID_CODE = re.compile(r"(?:xid_?)?(\d{1,3})", re.IGNORECASE)
Wire = JSONObject  # an alert as a webhook carries it


class CloudEvent(TypedDict, total=False):
    """A CloudEvent 1.0 as cloudevent.schema.json admits it (specversion, id, source, type, time required)."""

    specversion: str
    id: str
    source: str
    type: str
    time: str
    subject: str
    datacontenttype: str
    dataschema: str
    data: JSONObject


class ImpactedEntity(TypedDict):
    entityType: str
    entityValue: str


class HealthEvent(TypedDict, total=False):
    """NVSentinel's HealthEvent message in JSON (the fields alertd reads; nodeName, checkName, isHealthy required)."""

    nodeName: str
    checkName: str
    isHealthy: bool
    isFatal: bool
    componentClass: str
    message: str
    recommendedAction: int | str
    errorCode: list[str]
    entitiesImpacted: list[ImpactedEntity]
    generatedTimestamp: str


class NVSentinelData(TypedDict, total=False):
    metadata: dict[str, str]
    healthEvent: HealthEvent


class GpuRef(TypedDict, total=False):
    uuid: str
    index: str
    pci_bus_id: str


class GpuHealthData(TypedDict, total=False):
    """cloudevent-gpu-health.schema.json's data (node, check, healthy required)."""

    node: str
    cluster: str
    check: str
    healthy: bool
    kind: str
    severity: str
    xid: int
    message: str
    gpu: GpuRef
    observed_at: str


def read_cloudevents(headers: Mapping[str, str], body: bytes, cluster: str) -> list[Wire]:
    """The request's events as alerts (BadPayload naming the field for anything wrong). ``time`` is required:
    an alert starts when its producer saw the problem, never when it arrived, or a redelivery would differ."""
    ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if ctype == STRUCTURED:
        return _event(_object(decode_body(body), "document"), "", cluster)
    if ctype == BATCH:
        doc = decode_body(body)
        if not isinstance(doc, list):
            raise BadPayload("document: a batch of CloudEvents is a JSON array", "document")
        return [a for i, e in enumerate(doc) for a in _event(_object(e, str(i)), f"{i}.", cluster)]
    if "ce-specversion" not in {k.lower() for k in headers}:
        raise BadPayload(f"content-type: {ctype or 'none'} is neither {STRUCTURED} nor {BATCH}, and there is no "
                         "ce-specversion header (binary mode)", "content-type")
    event: JSONObject = {k.lower()[3:]: v for k, v in headers.items() if k.lower()[3:] in ATTRIBUTES
                         and k.lower().startswith("ce-")}
    if ctype and ctype != "application/json" and not ctype.endswith("+json"):
        raise BadPayload(f"content-type: binary-mode data must be JSON, not {ctype}", "content-type")
    event["data"] = decode_body(body)
    return _event(event, "ce-", cluster, binary=True)


def _object(value: JSONValue, where: str) -> JSONObject:
    if not isinstance(value, dict):
        raise BadPayload(f"{where}: a CloudEvent is a JSON object", where)
    return value


def _check(schema: str, doc: JSONObject, prefix: str) -> None:
    errors = list(validator(schema).iter_errors(doc))
    if errors:
        error = min(errors, key=lambda e: len(e.absolute_path))
        path = prefix + ".".join(str(p) for p in error.absolute_path)
        missing = re.match(r"'([^']+)' is a required property", error.message) if error.validator == "required" else None
        if missing:
            path += ("." if path and path[-1] not in ".-" else "") + missing.group(1)
        raise BadPayload(f"{path.rstrip('.') or 'document'}: {describe(error).split(': ', 1)[-1]}",
                         path.rstrip(".") or "document")


def _event(doc: JSONObject, prefix: str, cluster: str, binary: bool = False) -> list[Wire]:
    """One event: its attributes (``prefix``: "ce-" for headers, "3." in a batch), then its data by its type."""
    _check("cloudevent", {k: v for k, v in doc.items() if k != "data"}, prefix)
    event = cast(CloudEvent, doc)  # its attributes are valid now
    data_at = "data." if binary else f"{prefix}data."
    data = doc.get("data")
    if not isinstance(data, dict):
        raise BadPayload(f"{data_at}: the event's data must be a JSON object".replace(".:", ":"), data_at.rstrip("."))
    reader = PRODUCERS.get(event["type"])
    if reader is None:
        known = ", ".join(sorted(PRODUCERS))
        raise BadPayload(f"{prefix}type: unknown event type {event['type']!r} (known: {known})", f"{prefix}type")
    schema, read = reader
    _check(schema, data, data_at)
    return [read(event, data, cluster, str(event["time"]))]


def _alert(labels: dict[str, str], identity: dict[str, str], healthy: bool, at: str,
           annotations: dict[str, str]) -> Wire:
    out: Wire = {"status": "resolved" if healthy else "firing", "labels": {k: v for k, v in labels.items() if v},
                 "annotations": {k: v for k, v in annotations.items() if v}, "startsAt": at,
                 "fingerprint": fingerprint_of({k: v for k, v in identity.items() if v})}
    if healthy:
        out["endsAt"] = at
    return out


def _nvsentinel(event: CloudEvent, doc: JSONObject, cluster: str, when: str) -> Wire:
    data = cast(NVSentinelData, doc)  # valid by cloudevent-nvsentinel.schema.json
    he = data["healthEvent"]
    check = str(he["checkName"])
    cluster = str((data.get("metadata") or {}).get("cluster") or cluster)
    entities = {str(e["entityType"]).upper(): str(e["entityValue"]) for e in he.get("entitiesImpacted") or ()}
    identity = {"producer": "nvsentinel", "cluster": cluster, "node": str(he["nodeName"]), "check": check,
                "pci_bus_id": entities.get("PCI", ""), "UUID": entities.get("GPU_UUID", "")}
    labels = {"alertname": "NVSentinelHealthEvent", "source": SOURCE, **identity,
              "component": str(he.get("componentClass") or ""), "fatal": "true" if he.get("isFatal") else "false",
              "xid": _xid(check, he.get("errorCode") or ()), "gpu": entities.get("GPU", ""),
              "severity": (Severity.CRITICAL if he.get("isFatal") else Severity.WARNING).value}
    message = str(he.get("message") or "")
    at = str(he.get("generatedTimestamp") or when)
    return _alert(labels, identity, bool(he["isHealthy"]), at, {
        "summary": f"{check} on {he['nodeName']}: {message[:200]}" if message else f"{check} on {he['nodeName']}",
        "description": message, "cloudevent": f"{event['source']} {event['id']}",
        "recommended_action": str(he.get("recommendedAction") or "")})


def _xid(check: str, codes: Iterable[str]) -> str:
    """The Xid code among NVSentinel's error codes ("XID_79", or "79" under an Xid check)."""
    for code in codes:
        m = XID_CODE.fullmatch(str(code))
        if m and (str(code).upper().startswith("XID") or "XID" in check.upper()):
            return m.group(1)
    return ""


def _generic(event: CloudEvent, doc: JSONObject, cluster: str, when: str) -> Wire:
    data = cast(GpuHealthData, doc)  # valid by cloudevent-gpu-health.schema.json
    gpu = data.get("gpu") or {}
    identity = {"producer": str(event["source"]), "cluster": str(data.get("cluster") or cluster),
                "node": str(data["node"]), "check": str(data["check"]), "UUID": str(gpu.get("uuid") or ""),
                "pci_bus_id": str(gpu.get("pci_bus_id") or ""), "gpu": str(gpu.get("index") or "")}
    xid = str(data.get("xid") or "")
    labels = {"alertname": "GPUHealthEvent", "source": SOURCE, **identity,
              "kind": str(data.get("kind") or (SignalKind.XID.value if xid else SignalKind.OTHER.value)), "xid": xid,
              "severity": str(data.get("severity") or "")}
    message = str(data.get("message") or "")
    return _alert(labels, identity, bool(data["healthy"]), str(data.get("observed_at") or when), {
        "summary": f"{data['check']} on {data['node']}" + (f": {message[:200]}" if message else ""),
        "description": message, "cloudevent": f"{event['source']} {event['id']}"})


PRODUCERS: dict[str, tuple[str, Callable[[CloudEvent, JSONObject, str, str], Wire]]] = {
    **{t: ("cloudevent-nvsentinel", _nvsentinel) for t in NVSENTINEL_TYPES},
    GENERIC_TYPE: ("cloudevent-gpu-health", _generic),
}

__all__ = ["BATCH", "CloudEvent", "GpuHealthData", "HealthEvent", "NVSentinelData", "GENERIC_TYPE", "NVSENTINEL_TYPES", "STRUCTURED", "read_cloudevents"]
