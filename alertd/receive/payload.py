"""Alertmanager webhook v4: bytes in, alerts out, or an error naming the field."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Sequence

import msgspec
import orjson

from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.model import FIRING, RESOLVED, Alert, as_alert_status, parse_instant
from alertd.receive import wire
from alertd.schemas import describe, validator

ZERO_TIME_PREFIX = "0001-01-01"
# Alert times the engine can do arithmetic on (windows, hold-downs) without leaving datetime's range.
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(9000, 1, 1, tzinfo=timezone.utc)


class BadPayload(ValueError):
    """Input that can never become valid: answered with 400 so Alertmanager does not retry."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field
        self.reason = "schema" if field else "json"

    def to_json(self) -> dict[str, str]:
        out = {"error": str(self)}
        if self.field:
            out["field"] = self.field
        return out


@dataclass(slots=True)
class Notification:
    receiver: str
    status: str
    group_key: str
    external_url: str
    truncated: int
    alerts: list[Alert]
    group_labels: dict[str, str] = field(default_factory=dict)
    count: int = -1  # alerts in the webhook (``alerts`` is left empty by read_notification(build=False))

    def __post_init__(self) -> None:
        if self.count < 0:
            self.count = len(self.alerts)


def decode_body(raw: bytes) -> JSONValue:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadPayload(f"body is not UTF-8 (byte {exc.start})") from None
    try:
        doc: JSONValue = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadPayload(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep, an integer of thousands of digits
        raise BadPayload(f"malformed JSON: {str(exc).split(';')[0]}") from None
    try:
        where = _unstorable(doc, "") if _SUSPECT_ESCAPE.search(raw) else None
    except RecursionError:
        raise BadPayload(TOO_DEEP) from None
    if where is not None:
        raise BadPayload(f"{where or 'document'}: a \\u escape encodes a NUL or a lone UTF-16 surrogate, "
                         "which no label or annotation can hold", where or "document")
    return doc


_SUSPECT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)")  # searched in the raw body, by both paths


def _unstorable(value: Any, path: str) -> str | None:
    """The path of the first string (or key) the stores cannot keep: a lone surrogate is not UTF-8,
    and PostgreSQL text cannot hold NUL (such an alert would stop the processor)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
        return path if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        here = f"{path}.{key}" if path else str(key)
        if (found := _unstorable(key, here) if isinstance(key, str) else None) is not None:
            return found
        if (found := _unstorable(item, here)) is not None:
            return found
    return None


def fingerprint_of(labels: dict[str, str]) -> str:
    """Alertmanager always sends a fingerprint; senders that do not get a stable one from labels."""
    digest = hashlib.sha256(json.dumps(labels, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:16]


def read_notification(raw: bytes, received_at: datetime, *, build: bool = True) -> Notification:
    """The receive path: bytes to alerts, or BadPayload naming the field.

    msgspec decodes and checks the webhook schema's rules in one pass in C
    (alertd/receive/wire.py); whatever it refuses is decoded again by
    decode_body and judged by the JSON Schema, so a rejection names the field
    in the schema's words, and a document only msgspec is stricter about
    (``1.0`` as an integer, NaN in an unknown field) is still taken.
    ``build=False`` (the receive path: the engine reads the stored body again)
    checks the alerts' times but builds no Alert: ``count`` says how many.
    """
    try:
        hook = wire.decode(raw)
    except msgspec.DecodeError:  # ValidationError too: not JSON, or not the webhook's shape
        return _explained(raw, received_at)
    except RecursionError:  # msgspec skipping an unknown field nested about a thousand deep
        raise BadPayload(TOO_DEEP) from None
    if _SUSPECT_ESCAPE.search(raw):  # a NUL or lone surrogate, named by the slow path
        return _explained(raw, received_at)
    receiver, external_url = hook.receiver, hook.externalURL
    if build:
        alerts = _built(hook, received_at)
    else:
        alerts = []
        for i, a in enumerate(hook.alerts):
            _timestamp(a.startsAt, f"alerts.{i}.startsAt")
            ends = a.endsAt or ""
            if ends and not ends.startswith(ZERO_TIME_PREFIX):
                _timestamp(ends, f"alerts.{i}.endsAt")
    return Notification(receiver=receiver, status=hook.status, group_key=hook.groupKey, external_url=external_url,
                        truncated=hook.truncatedAlerts, alerts=alerts, group_labels=hook.groupLabels,
                        count=len(hook.alerts))


def read_stored(raw: bytes, received_at: datetime) -> Notification:
    """The engine's read of a webhook the receiver took (read_notification checked it then): decoded without
    matching its times against the schema's pattern again, every alert built. A body that does not decode so
    (stored by another version, damaged) goes read_notification's way, which names what is wrong."""
    try:
        hook = wire.STORED_DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return read_notification(raw, received_at)
    if _SUSPECT_ESCAPE.search(raw) or wire.stricter_than_schema(hook):
        return read_notification(raw, received_at)
    return Notification(receiver=hook.receiver, status=hook.status, group_key="", external_url=hook.externalURL,
                        truncated=0, alerts=_built(hook, received_at))


def _built(hook: wire.WireWebhook | wire.StoredWebhook, received_at: datetime) -> list[Alert]:
    """Every alert of a decoded webhook (its times parsed: a bad one is BadPayload naming the field)."""
    items: Sequence[wire.WireAlert | wire.StoredAlert] = hook.alerts
    return [_alert(i, a.fingerprint or "", a.status, a.labels, a.annotations, a.startsAt, a.endsAt or "",
                   a.generatorURL, hook.receiver, hook.externalURL, received_at) for i, a in enumerate(items)]


TOO_DEEP = "malformed JSON: nested too deeply"


def _explained(raw: bytes, received_at: datetime) -> Notification:
    """The schema's path. A document just shallow enough to decode can still be too deep to validate or
    describe (jsonschema and repr recurse): that is the same 400 as one too deep to decode."""
    try:
        return parse_notification(decode_body(raw), received_at)
    except RecursionError:
        raise BadPayload(TOO_DEEP) from None


def parse_notification(raw: object, received_at: datetime) -> Notification:
    """A decoded document checked against the webhook schema (jsonschema): the path that explains. A document
    it takes is read into the receive path's own types (``1.0`` as an integer: the schema takes it)."""
    errors = list(validator("webhook").iter_errors(raw))
    if errors:
        error = min(errors, key=lambda e: len(e.absolute_path))
        path = ".".join(str(p) for p in error.absolute_path)
        raise BadPayload(describe(error), path or "document")
    hook = msgspec.convert(raw, wire.WireWebhook, strict=False)
    return Notification(receiver=hook.receiver, status=hook.status, group_key=hook.groupKey,
                        external_url=hook.externalURL, truncated=hook.truncatedAlerts,
                        alerts=_built(hook, received_at), group_labels=hook.groupLabels)


def _alert(i: int, fingerprint: str, status: str, raw_labels: dict[str, str], annotations: dict[str, str],
           starts_raw: str, ends_raw: str, generator_url: str, receiver: str, external_url: str,
           received_at: datetime) -> Alert:
    return Alert(
        fingerprint=(fingerprint or fingerprint_of(raw_labels)).lower(),
        status=as_alert_status(status),
        labels=raw_labels,
        annotations=annotations,
        starts_at=_timestamp(starts_raw, f"alerts.{i}.startsAt"),
        ends_at=None if not ends_raw or ends_raw.startswith(ZERO_TIME_PREFIX)
        else _timestamp(ends_raw, f"alerts.{i}.endsAt"),
        generator_url=generator_url,
        receiver=receiver,
        external_url=external_url,
        received_at=received_at,
    )


def _timestamp(value: str, where: str) -> datetime:
    """The schema checks the shape; the calendar (month 13, offset +25:00) is checked here.

    Every alert's times pass here on receipt and again when the engine reads the stored webhook: the common
    case (a time in UTC within range) is one C call and a year compare; anything else goes the long way,
    which converts offsets and words the refusal."""
    try:
        ts = datetime.fromisoformat(value)  # Python 3.11 reads "Z" itself
    except ValueError:
        ts = None
    if ts is not None and ts.tzinfo is timezone.utc and EARLIEST.year <= ts.year < LATEST.year:
        return ts
    return _timestamp_checked(value, where)


def _timestamp_checked(value: str, where: str) -> datetime:
    try:
        ts = parse_instant(value)
    except ValueError as exc:
        raise BadPayload(f"{where}: {value!r} is not a valid RFC 3339 timestamp ({exc})", where) from None
    if not EARLIEST <= ts < LATEST:
        raise BadPayload(f"{where}: {value!r} is outside the supported range (1970 to 8999)", where)
    return ts


def encode_webhook(alerts: Sequence[JSONObject], receiver: str = "", external_url: str = "") -> bytes:
    """A webhook (version 4) holding alerts in their wire form (Alert.to_wire): how alerts alertd makes itself
    (reconciliation), and alerts an earlier version stored one by one, enter the inbox log."""
    fields = ("status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint")
    items = [{k: a[k] for k in fields if a.get(k) or k == "labels"} for a in alerts]
    return orjson.dumps({
        "version": "4", "groupKey": "", "truncatedAlerts": 0, "receiver": receiver, "externalURL": external_url,
        "status": (FIRING if any(a.get("status") == FIRING for a in alerts) else RESOLVED).value,
        "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "alerts": items})


def delivery_key(alert: Alert) -> str:
    """Idempotency key: a retry or an HA peer's copy of the same alert state has the same key.

    The start time leads: new keys land at the end of the unique index, in a few pages per engine step, where
    a fingerprint first scattered each step's keys over the whole index (half the engine's disk writes)."""
    return f"{alert.starts_at.timestamp():.3f}|{alert.status}|{alert.fingerprint}"
