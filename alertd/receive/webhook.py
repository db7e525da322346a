"""Alertmanager webhook v4: bytes in, alerts out, or an error naming the field."""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from sys import intern
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

import fastjsonschema

from alertd.model import Alert, parse_iso
from alertd.schemas import describe, schema, validator

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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": str(self)}
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


def decode_body(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadPayload(f"body is not UTF-8 (byte {exc.start})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadPayload(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep, an integer of thousands of digits
        raise BadPayload(f"malformed JSON: {str(exc).split(';')[0]}") from None
    try:
        where = _unstorable(doc, "") if _SUSPECT_ESCAPE.search(text) else None
    except RecursionError:
        raise BadPayload("malformed JSON: nested too deeply") from None
    if where is not None:
        raise BadPayload(f"{where or 'document'}: a \\u escape encodes a NUL or a lone UTF-16 surrogate, "
                         "which no label or annotation can hold", where or "document")
    return doc


_SUSPECT_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F]|0000)")


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


@functools.cache
def fast_validator() -> Callable[[Any], Any]:
    """The webhook schema compiled to Python: ~25x faster than interpreting it, on the hot path.

    The schema only uses keywords that mean the same in draft 7, which
    fastjsonschema compiles; jsonschema still explains rejected input.
    """
    # A deep copy: fastjsonschema writes into the schema it compiles, and schema() is shared and cached.
    compiled = dict(copy.deepcopy(schema("webhook")), **{"$schema": "http://json-schema.org/draft-07/schema#"})
    return fastjsonschema.compile(compiled)


def parse_notification(doc: Any, received_at: datetime) -> Notification:
    try:
        fast_validator()(doc)
    except fastjsonschema.JsonSchemaValueException as fast:  # the slow, message-building path only for bad input
        errors = list(validator("webhook").iter_errors(doc))
        if not errors:  # the two validators disagree: still refuse, with the compiled one's words
            raise BadPayload(fast.message, ".".join(fast.path[1:]) or "document") from None
        error = min(errors, key=lambda e: len(e.absolute_path))
        path = ".".join(str(p) for p in error.absolute_path)
        raise BadPayload(describe(error), path or "document") from None
    receiver = doc.get("receiver", "")
    external_url = doc.get("externalURL", "")
    alerts = []
    for i, item in enumerate(doc["alerts"]):
        ends_raw = item.get("endsAt") or ""
        # Label names and values repeat across alerts (cluster, node, model, alertname): one copy each.
        labels = {intern(k): intern(v) for k, v in item["labels"].items()}
        alerts.append(
            Alert(
                fingerprint=(item.get("fingerprint") or fingerprint_of(labels)).lower(),
                status=item["status"],
                labels=labels,
                annotations=item.get("annotations") or {},
                starts_at=_timestamp(item["startsAt"], f"alerts.{i}.startsAt"),  # type: ignore[arg-type]
                ends_at=None if not ends_raw or ends_raw.startswith(ZERO_TIME_PREFIX)
                else _timestamp(ends_raw, f"alerts.{i}.endsAt"),
                generator_url=item.get("generatorURL", ""),
                receiver=receiver,
                external_url=external_url,
                received_at=received_at,
            )
        )
    return Notification(
        receiver=receiver,
        status=doc["status"],
        group_key=doc.get("groupKey", ""),
        external_url=external_url,
        truncated=int(doc.get("truncatedAlerts") or 0),
        alerts=alerts,
        group_labels=dict(doc.get("groupLabels") or {}),
    )


def _timestamp(value: str, where: str) -> datetime | None:
    """The schema checks the shape; the calendar (month 13, offset +25:00) is checked here."""
    try:
        ts = parse_iso(value)
    except ValueError as exc:
        raise BadPayload(f"{where}: {value!r} is not a valid RFC 3339 timestamp ({exc})", where) from None
    if ts is not None and not EARLIEST <= ts < LATEST:
        raise BadPayload(f"{where}: {value!r} is outside the supported range (1970 to 8999)", where)
    return ts


def delivery_key(alert: Alert) -> str:
    """Idempotency key: a retry or an HA peer's copy of the same alert state has the same key."""
    return f"{alert.fingerprint}|{alert.starts_at.timestamp():.3f}|{alert.status}"
