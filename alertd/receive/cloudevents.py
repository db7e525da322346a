"""CloudEvents (HTTP binding, structured, batched and binary modes) -> alerts in the webhook's wire form.

Each known producer's data is declared by a Struct here, chosen by the event's ``type``: NVSentinel's
health events (its event exporter) and a documented generic GPU-health event for anyone else
(docs/sources.md). Its JSON Schema is generated from the Struct (alertd/receive/shapes.py) and checks the
event first, so a bad event is BadPayload naming the field ("data.healthEvent.nodeName", or "ce-id" for a
binary-mode header), answered 400 like a bad webhook; the Struct then reads what it accepted.

An alert's fingerprint comes from what it is about (producer, cluster, node, check, GPU), so a
later healthy event resolves it; its ``startsAt`` from when the producer saw it, so an event
delivered again (the same source and id, an at-least-once exporter's retry) makes the same
delivery key and the engine drops it.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Callable, Iterable, Literal, Mapping

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.states import Severity
from alertd.core.vocabulary import HEALTH_EVENT_WORDS, SignalKind
from alertd.receive.payload import BadPayload, decode_body, fingerprint_of
from alertd.receive.wire import Time
from alertd.schemas import describe, validator
from alertd.schemas.declared import SEVERITY_WORDS, word

STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
SOURCE = "cloudevents"
NVSENTINEL_TYPES = ("com.nvidia.nvsentinel.health.v1", "com.nvidia.nvsentinel.healthevents.v1")
GENERIC_TYPE = "dev.alertd.gpu.health.v1"
ATTRIBUTES = ("specversion", "id", "source", "type", "time", "subject", "dataschema")
XID_CODE = re.compile(r"(?:xid_?)?(\d{1,3})", re.IGNORECASE)
Wire = JSONObject  # an alert as a webhook carries it


class CloudEvent(Struct, kw_only=True):
    """The context attributes CloudEvents 1.0 requires, in the structured JSON form (in binary mode they arrive as
    ce- headers and are checked against the same rules). The data is checked by its producer's schema, chosen by
    type. alertd requires time (optional in CloudEvents): an alert starts when its producer saw the problem, and
    that time is what makes a redelivered event recognisable."""

    specversion: Literal["1.0"]
    id: Annotated[str, Meta(min_length=1, max_length=512)]
    source: Annotated[str, Meta(min_length=1, max_length=2048)]
    type: Annotated[str, Meta(min_length=1, max_length=512)]
    time: Time
    subject: str | UnsetType = UNSET
    datacontenttype: str | UnsetType = UNSET
    dataschema: str | UnsetType = UNSET
    # read by its producer's Struct (PRODUCERS), never from here
    data: Annotated[Any, Meta(extra_json_schema={"type": "object"}, description=(
        "JSON data; data_base64 is not taken (every known producer sends JSON)."))] = UNSET


# An integer (``1.0`` too, as JSON Schema reads one) or a text, kept as the producer sent it.
IntegerOrText = Annotated[Any, Meta(extra_json_schema={"type": ["integer", "string"]})]


class ImpactedEntity(Struct, kw_only=True):
    entityType: str
    entityValue: str


class HealthEvent(Struct, kw_only=True):
    """NVSentinel's HealthEvent message in JSON (the fields alertd reads; nodeName, checkName, isHealthy required)."""

    version: IntegerOrText = UNSET
    agent: str = ""
    componentClass: str = ""
    checkName: Annotated[str, Meta(min_length=1)]
    isFatal: bool = False
    isHealthy: bool
    message: str = ""
    recommendedAction: IntegerOrText = UNSET
    errorCode: list[str] = []
    entitiesImpacted: list[ImpactedEntity] = []
    generatedTimestamp: Time | UnsetType = UNSET
    nodeName: Annotated[str, Meta(min_length=1, max_length=253)]
    metadata: dict[str, str] = {}


class NVSentinelData(Struct, kw_only=True):
    """The data of NVSentinel's event exporter (type com.nvidia.nvsentinel.health.v1): data.metadata (cluster
    required) and data.healthEvent, its HealthEvent message in JSON (camelCase). Fields alertd does not read are
    allowed."""

    metadata: Annotated[dict[str, str], Meta(extra_json_schema={"properties": {"cluster": {"type": "string"}}})] = {}
    # the required keys in the order the refusal names the first missing one
    healthEvent: Annotated[HealthEvent, Meta(extra_json_schema={"required": ["nodeName", "checkName", "isHealthy"]})]


class GpuRef(Struct, kw_only=True, forbid_unknown_fields=True):
    uuid: str = ""
    index: str = ""
    pci_bus_id: str = ""


class GpuHealthData(Struct, kw_only=True, forbid_unknown_fields=True):
    """For any health agent that is not a known producer: one check's verdict on one node (and optionally one GPU).
    healthy=false fires an alert, a later healthy=true for the same node, check and GPU resolves it.
    docs/sources.md has an example."""

    node: Annotated[str, Meta(min_length=1, max_length=253, description="The Kubernetes node name (or host name).")]
    cluster: Annotated[str, Meta(description="Default: sources.cloudevents.cluster, then normalize.cluster.")] = ""
    check: Annotated[str, Meta(pattern="^[A-Za-z0-9_.:-]{1,128}$",
                               description="The check's name; with node and GPU it identifies the alert.")]
    healthy: bool
    kind: Annotated[str, word(HEALTH_EVENT_WORDS, "What the check found, when it knows (default: other; an xid code "
                                            "implies xid).")] | UnsetType = UNSET
    severity: Annotated[str, word(SEVERITY_WORDS)] | UnsetType = UNSET
    xid: Annotated[int, Meta(ge=1, le=999)] | UnsetType = UNSET
    message: Annotated[str, Meta(max_length=8192, description=(
        "Shown as the alert's description; an NVRM Xid line here gives the Xid and PCI address."))] = ""
    gpu: GpuRef = msgspec.field(default_factory=GpuRef)
    observed_at: Annotated[Time, Meta(description="When the check saw it (default: the event's time).")] | UnsetType = \
        UNSET


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
    attributes = {k: v for k, v in doc.items() if k != "data"}
    _check("cloudevent", attributes, prefix)
    data_at = "data." if binary else f"{prefix}data."
    data = doc.get("data")
    if not isinstance(data, dict):
        raise BadPayload(f"{data_at}: the event's data must be a JSON object".replace(".:", ":"), data_at.rstrip("."))
    event = msgspec.convert(attributes, CloudEvent)  # valid now
    reader = PRODUCERS.get(event.type)
    if reader is None:
        known = ", ".join(sorted(PRODUCERS))
        raise BadPayload(f"{prefix}type: unknown event type {event.type!r} (known: {known})", f"{prefix}type")
    schema, read = reader
    _check(schema, data, data_at)
    return [read(event, data, cluster, event.time)]


def _alert(labels: dict[str, str], identity: dict[str, str], healthy: bool, at: str,
           annotations: dict[str, str]) -> Wire:
    out: Wire = {"status": "resolved" if healthy else "firing", "labels": {k: v for k, v in labels.items() if v},
                 "annotations": {k: v for k, v in annotations.items() if v}, "startsAt": at,
                 "fingerprint": fingerprint_of({k: v for k, v in identity.items() if v})}
    if healthy:
        out["endsAt"] = at
    return out


def _nvsentinel(event: CloudEvent, doc: JSONObject, cluster: str, when: str) -> Wire:
    data = msgspec.convert(doc, NVSentinelData, strict=False)  # valid by cloudevent-nvsentinel.schema.json
    he = data.healthEvent
    check = he.checkName
    cluster = data.metadata.get("cluster") or cluster
    entities = {e.entityType.upper(): e.entityValue for e in he.entitiesImpacted}
    identity = {"producer": "nvsentinel", "cluster": cluster, "node": he.nodeName, "check": check,
                "pci_bus_id": entities.get("PCI", ""), "UUID": entities.get("GPU_UUID", "")}
    labels = {"alertname": "NVSentinelHealthEvent", "source": SOURCE, **identity,
              "component": he.componentClass, "fatal": "true" if he.isFatal else "false",
              "xid": _xid(check, he.errorCode), "gpu": entities.get("GPU", ""),
              "severity": (Severity.CRITICAL if he.isFatal else Severity.WARNING).value}
    message = he.message
    at = he.generatedTimestamp or when
    return _alert(labels, identity, he.isHealthy, at, {
        "summary": f"{check} on {he.nodeName}: {message[:200]}" if message else f"{check} on {he.nodeName}",
        "description": message, "cloudevent": f"{event.source} {event.id}",
        "recommended_action": str(he.recommendedAction or "")})


def _xid(check: str, codes: Iterable[str]) -> str:
    """The Xid code among NVSentinel's error codes ("XID_79", or "79" under an Xid check)."""
    for code in codes:
        m = XID_CODE.fullmatch(str(code))
        if m and (str(code).upper().startswith("XID") or "XID" in check.upper()):
            return m.group(1)
    return ""


def _generic(event: CloudEvent, doc: JSONObject, cluster: str, when: str) -> Wire:
    data = msgspec.convert(doc, GpuHealthData, strict=False)  # valid by cloudevent-gpu-health.schema.json
    gpu = data.gpu
    identity = {"producer": event.source, "cluster": data.cluster or cluster, "node": data.node, "check": data.check,
                "UUID": gpu.uuid, "pci_bus_id": gpu.pci_bus_id, "gpu": gpu.index}
    xid = str(data.xid or "")
    labels = {"alertname": "GPUHealthEvent", "source": SOURCE, **identity,
              "kind": data.kind or (SignalKind.XID.value if xid else SignalKind.OTHER.value), "xid": xid,
              "severity": data.severity or ""}
    message = data.message
    return _alert(labels, identity, data.healthy, data.observed_at or when, {
        "summary": f"{data.check} on {data.node}" + (f": {message[:200]}" if message else ""),
        "description": message, "cloudevent": f"{event.source} {event.id}"})


PRODUCERS: dict[str, tuple[str, Callable[[CloudEvent, JSONObject, str, str], Wire]]] = {
    **{t: ("cloudevent-nvsentinel", _nvsentinel) for t in NVSENTINEL_TYPES},
    GENERIC_TYPE: ("cloudevent-gpu-health", _generic),
}

__all__ = ["BATCH", "CloudEvent", "GpuHealthData", "HealthEvent", "NVSentinelData", "GENERIC_TYPE", "NVSENTINEL_TYPES", "STRUCTURED", "read_cloudevents"]
